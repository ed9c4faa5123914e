"""How a matrix of label similarities (the cosines of DISTRO's label
vectors, Srikumar & Manning 2014, §3) follows the structure the labels are
known to have: do the labels of a family lie nearer each other than labels
of different families, and does a tag variant lie near its base tag."""
from typing import Dict, Optional, Sequence

import numpy

from ..corpora.labels import label_families


def family_closeness(labels: Sequence[str], sims: numpy.ndarray,
                     families: Optional[Sequence[Optional[str]]] = None) -> Optional[dict]:
    """Whether labels cluster by family (``families``, one per label; by
    default the scheme of :func:`..corpora.labels.label_families`): how many
    have their nearest label by cosine (ties count against it) in their own
    family, the share expected from a random neighbour, the mean cosine of
    two labels within a family and across families, each family's size
    (``sizes``) and own mean (``within_by_family``, families of two or
    more) and the mean cosine
    between every two families (``between``, keyed ``(family, family)``,
    each pair once in sorted order). None unless every label has a family
    and some family has two."""
    labels = list(labels)
    families = label_families(labels) if families is None else list(families)
    n = len(labels)
    if n < 3 or families is None or None in families:
        return None
    family = numpy.array(families)
    same = family[:, None] == family[None, :]
    off = ~numpy.eye(n, dtype=bool)
    if not (same & off).any():
        return None
    sims = numpy.asarray(sims, dtype="float64")
    nearest = 0
    for i in range(n):
        row = numpy.where(off[i], sims[i], -numpy.inf)
        nearest += bool(same[i, row == row.max()].all())
    names = sorted(set(families))
    members = {name: family == name for name in names}
    within = {name: float(sims[numpy.ix_(m, m)][~numpy.eye(m.sum(), dtype=bool)].mean())
              for name, m in members.items() if m.sum() > 1}
    between = {(a, b): float(sims[numpy.ix_(members[a], members[b])].mean())
               for i, a in enumerate(names) for b in names[i + 1:]}
    return {"labels": n, "families": len(names), "nearest_in_family": nearest,
            "sizes": {name: int(m.sum()) for name, m in members.items()},
            "chance": float((same & off).sum() / (n * (n - 1))),
            "cosine_within": float(sims[same & off].mean()), "cosine_across": float(sims[~same].mean()),
            "within_by_family": within, "between": between}


def variant_closeness(labels: Sequence[str], sims: numpy.ndarray, bases: Dict[str, str]) -> Optional[dict]:
    """How near each variant's label vector lies to its base tag's: the
    base's rank among the variant's neighbours by cosine (1: the nearest;
    ties count against it, so orthogonal vectors give the last rank), and
    the mean cosine to the base against the mean cosine to every other tag.
    None when there are no variants."""
    if not bases:
        return None
    index = {label: i for i, label in enumerate(labels)}
    ranks, to_base, to_others = [], [], []
    for variant, base in bases.items():
        i, j = index[variant], index[base]
        row = numpy.array(sims[i], dtype="float64")
        row[i] = -numpy.inf
        ranks.append(int((row >= row[j]).sum()))
        to_base.append(row[j])
        to_others.append((row[numpy.isfinite(row)].sum() - row[j]) / max(len(labels) - 2, 1))
    ranks = numpy.array(ranks)
    return {"variants": len(ranks), "neighbours": len(labels) - 1, "nearest": int((ranks == 1).sum()),
            "within_5": int((ranks <= 5).sum()), "median_rank": float(numpy.median(ranks)),
            "cosine_to_base": float(numpy.mean(to_base)), "cosine_to_others": float(numpy.mean(to_others))}

"""Draw the label similarity map of a trained ``distro_tagger``: the label
vectors projected on their two principal directions, next to the matrix of
cosine similarities between labels (ordered by angle in that plane, so that
similar tags sit together)."""
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy

from ..corpora.labels import VARIANT_PREFIXES, VARIANT_SUFFIXES, label_family, variant_bases
from ..errors import StructPrefError

FORMATS = (".png", ".svg")


def _tagger(nlp):
    for name, factory in zip(nlp.pipe_names, (nlp.get_pipe_meta(n).factory for n in nlp.pipe_names)):
        if factory in ("distro_tagger", "distro_textcat"):
            return nlp.get_pipe(name)
    raise StructPrefError(f"the pipeline has no distro_tagger or distro_textcat component "
                          f"(pipes: {nlp.pipe_names})")


def label_similarity(tagger):
    """(labels, cosine similarity matrix, 2-D coordinates) of a tagger's label vectors."""
    labels = list(tagger.labels)
    A = numpy.stack([tagger.label_vectors[t] for t in labels], axis=1).astype("float64")
    A /= numpy.maximum(numpy.linalg.norm(A, axis=0, keepdims=True), 1e-12)
    centred = A - A.mean(axis=1, keepdims=True)
    U, _, _ = numpy.linalg.svd(centred, full_matrices=False)
    coords = (U[:, :2].T @ centred).T
    if coords.shape[1] < 2:
        coords = numpy.hstack([coords, numpy.zeros((len(labels), 1))])
    return labels, A.T @ A, coords


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


def describe_variants(closeness: dict) -> str:
    c = closeness
    return (f"{c['variants']} variant tags ({', '.join(VARIANT_PREFIXES + VARIANT_SUFFIXES)}): the base tag is the "
            f"nearest label for {c['nearest']}, among the 5 nearest for {c['within_5']}, median rank "
            f"{c['median_rank']:g} of {c['neighbours']}; mean cosine {c['cosine_to_base']:.2f} to the base, "
            f"{c['cosine_to_others']:.2f} to the other tags")


def family_closeness(labels: Sequence[str], sims: numpy.ndarray) -> Optional[dict]:
    """Whether labels named ``FAMILY:label`` (Li & Roth's question classes:
    ``HUM:ind`` in ``HUM``) cluster by family: how many have their nearest
    label by cosine (ties count against it) in their own family, the share
    expected from a random neighbour, and the mean cosine within and across
    families. None unless every label has a family and some family two."""
    families = [label_family(label) for label in labels]
    n = len(labels)
    if n < 3 or None in families:
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
    return {"labels": n, "families": len(set(families)), "nearest_in_family": nearest,
            "chance": float((same & off).sum() / (n * (n - 1))),
            "cosine_within": float(sims[same & off].mean()), "cosine_across": float(sims[~same].mean())}


def describe_families(closeness: dict) -> str:
    c = closeness
    return (f"{c['families']} label families: the nearest label is of the same family for "
            f"{c['nearest_in_family']} of {c['labels']} (a random neighbour: {100 * c['chance']:.0f} %); mean cosine "
            f"{c['cosine_within']:.2f} within families, {c['cosine_across']:.2f} across")


def _plain(label: str) -> str:
    """A label as matplotlib text: "$" would start mathtext (Brown's ``PP$$``)."""
    return label.replace("$", r"\$")


def draw_label_map(model_path: Union[str, Path], output_path: Union[str, Path]) -> Tuple[Path, str]:
    """Draw the label map of the distro_tagger in the pipeline at ``model_path``
    into ``output_path`` (.png or .svg). Returns the output path and the
    tagger's one-line description of its label space (effective rank, and
    whether it has structure yet), followed, when the labels have Brown
    variants (``NN-TL`` of ``NN``), by how near the variants lie to their
    base tags (the map joins each variant to its base with a grey line), and
    when they have families (``HUM:ind``), by whether the families cluster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import spacy

    import spacy_structpref.components.factories  # noqa: F401  (registers the factories)

    output_path = Path(output_path)
    if output_path.suffix.lower() not in FORMATS:
        raise StructPrefError(f"output must end in {' or '.join(FORMATS)}, got {output_path.name!r}")
    if not Path(model_path).exists():
        raise StructPrefError(f"no trained pipeline at {str(model_path)!r}")
    tagger = _tagger(spacy.load(model_path))
    labels, sims, coords = label_similarity(tagger)
    order = numpy.argsort(numpy.arctan2(coords[:, 1], coords[:, 0]), kind="stable")

    n = len(labels)
    fig, (ax_map, ax_sim) = plt.subplots(1, 2, figsize=(8 + 0.18 * n, 4 + 0.09 * n))
    # labels "FAMILY:label" (question classes) are coloured by family
    label_families = [label_family(label) for label in labels]
    families = sorted(set(label_families) - {None})
    palette = {f: plt.get_cmap("tab10")(i % 10) for i, f in enumerate(families)}
    colors = [palette.get(family, "tab:blue") for family in label_families]
    bases = variant_bases(labels)
    index = {label: i for i, label in enumerate(labels)}
    for variant, base in bases.items():
        ax_map.plot(*coords[[index[variant], index[base]]].T, color="0.75", linewidth=0.6, zorder=1)
    ax_map.scatter(coords[:, 0], coords[:, 1], s=12, c=colors, zorder=2)
    for (x, y), label, color in zip(coords, labels, colors):
        ax_map.annotate(_plain(label), (x, y), fontsize=7, xytext=(2, 2), textcoords="offset points",
                        color=color if families else "black")
    ax_map.set_title(f"label vectors (d = {tagger.label_matrix.shape[0]}, effective rank "
                     f"{tagger.effective_rank}), first two principal directions"
                     + ("; grey lines join variant tags to their base" if bases else ""), fontsize=9)
    if not tagger.has_label_structure:
        fig.suptitle("orthogonal label vectors (one-hot A): every similarity is 0, no structure yet",
                     fontsize=10, color="tab:red")
    ax_map.set_xticks([])
    ax_map.set_yticks([])
    image = ax_sim.imshow(sims[numpy.ix_(order, order)], cmap="RdBu_r", vmin=-1, vmax=1)
    ax_sim.set_xticks(range(n), [_plain(labels[i]) for i in order], rotation=90, fontsize=6)
    ax_sim.set_yticks(range(n), [_plain(labels[i]) for i in order], fontsize=6)
    ax_sim.set_title("cosine similarity of label vectors", fontsize=9)
    fig.colorbar(image, ax=ax_sim, shrink=0.7)
    fig.tight_layout()
    output_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output_path, dpi=120)
    plt.close(fig)
    closeness, by_family = variant_closeness(labels, sims, bases), family_closeness(labels, sims)
    parts = [tagger.describe_label_space()]
    parts += [describe_variants(closeness)] if closeness is not None else []
    parts += [describe_families(by_family)] if by_family is not None else []
    return output_path, "; ".join(parts)

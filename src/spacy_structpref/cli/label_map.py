"""Draw the label similarity map of a trained ``distro_tagger``: the label
vectors projected on their two principal directions, next to the matrix of
cosine similarities between labels in the leaf order of their hierarchical
clustering (average linkage on cosine distance, leaves ordered optimally:
Bar-Joseph, Gifford & Jaakkola 2001), its dendrogram above, so that
families of similar tags sit together as blocks; labels coloured by family
where the label set has families (``corpora.labels.label_families``)."""
from pathlib import Path
from typing import Tuple, Union

import numpy

from ..corpora.labels import VARIANT_PREFIXES, VARIANT_SUFFIXES, label_families, variant_bases
from ..errors import StructPrefError
from ..scoring.label_space import family_closeness, variant_closeness

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


def cluster_order(sims: numpy.ndarray):
    """(leaf order, scipy linkage matrix or None) of the labels clustered
    by average linkage on the cosine distance ``1 - sims``."""
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    n = len(sims)
    if n < 3:
        return numpy.arange(n), None
    distance = numpy.clip(1.0 - numpy.asarray(sims, dtype="float64"), 0.0, 2.0)
    distance = (distance + distance.T) / 2
    numpy.fill_diagonal(distance, 0.0)
    tree = linkage(squareform(distance, checks=False), method="average", optimal_ordering=True)
    return leaves_list(tree), tree


def describe_variants(closeness: dict) -> str:
    c = closeness
    return (f"{c['variants']} variant tags ({', '.join(VARIANT_PREFIXES + VARIANT_SUFFIXES)}): the base tag is the "
            f"nearest label for {c['nearest']}, among the 5 nearest for {c['within_5']}, median rank "
            f"{c['median_rank']:g} of {c['neighbours']}; mean cosine {c['cosine_to_base']:.2f} to the base, "
            f"{c['cosine_to_others']:.2f} to the other tags")


def describe_families(closeness: dict) -> str:
    """The family figures of :func:`family_closeness` in words, with each
    family's own mean cosine (families of two or more, largest first)."""
    c = closeness
    own = sorted(c["within_by_family"], key=lambda f: (-c["sizes"][f], f))
    return (f"{c['families']} label families: the nearest label is of the same family for "
            f"{c['nearest_in_family']} of {c['labels']} (a random neighbour: {100 * c['chance']:.0f} %); mean cosine "
            f"{c['cosine_within']:.2f} within families, {c['cosine_across']:.2f} across (within "
            + ", ".join(f"{f} {c['within_by_family'][f]:.2f}" for f in own) + ")")


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
    order, tree = cluster_order(sims)

    n = len(labels)
    fig, (ax_map, ax_sim) = plt.subplots(1, 2, figsize=(8 + 0.18 * n, 5 + 0.09 * n))
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    # the dendrogram above the matrix and the colour bar beside it, aligned with its cells
    divider = make_axes_locatable(ax_sim)
    ax_tree = divider.append_axes("top", size="22%", pad=0.05)
    ax_bar = divider.append_axes("right", size="4%", pad=0.1)
    # labels with families (question classes, PTB and Basque tags) are coloured by family
    of_label = label_families(labels) or [None] * n
    families = sorted(set(of_label) - {None})
    cmap = plt.get_cmap("tab10" if len(families) <= 10 else "tab20")
    palette = {f: cmap(i % cmap.N) for i, f in enumerate(families)}
    colors = [palette.get(family, "tab:blue") for family in of_label]
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
    if tree is not None:
        from scipy.cluster.hierarchy import dendrogram

        dendrogram(tree, ax=ax_tree, no_labels=True, color_threshold=0, above_threshold_color="0.4")
        ax_tree.set_xlim(0, 10 * n)  # leaf i sits at 10 i + 5, over the matrix's column i
    ax_tree.set_axis_off()
    ax_tree.set_title("cosine similarity of label vectors, ordered by their hierarchical clustering "
                      "(average linkage, cosine distance)", fontsize=9)
    image = ax_sim.imshow(sims[numpy.ix_(order, order)], cmap="RdBu_r", vmin=-1, vmax=1)
    ax_sim.set_xticks(range(n), [_plain(labels[i]) for i in order], rotation=90, fontsize=6)
    ax_sim.set_yticks(range(n), [_plain(labels[i]) for i in order], fontsize=6)
    if families:
        for ticks in (ax_sim.get_xticklabels(), ax_sim.get_yticklabels()):
            for tick, i in zip(ticks, order):
                tick.set_color(colors[i])
    fig.colorbar(image, cax=ax_bar)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output_path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    closeness, by_family = variant_closeness(labels, sims, bases), family_closeness(labels, sims)
    parts = [tagger.describe_label_space()]
    parts += [describe_variants(closeness)] if closeness is not None else []
    parts += [describe_families(by_family)] if by_family is not None else []
    return output_path, "; ".join(parts)

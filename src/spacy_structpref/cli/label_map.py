"""Draw the label similarity map of a trained ``distro_tagger``: the label
vectors projected on their two principal directions, next to the matrix of
cosine similarities between labels (ordered by angle in that plane, so that
similar tags sit together)."""
from pathlib import Path
from typing import Tuple, Union

import numpy

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


def draw_label_map(model_path: Union[str, Path], output_path: Union[str, Path]) -> Tuple[Path, str]:
    """Draw the label map of the distro_tagger in the pipeline at ``model_path``
    into ``output_path`` (.png or .svg). Returns the output path and the
    tagger's one-line description of its label space (effective rank, and
    whether it has structure yet)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import spacy

    import spacy_structpref.components.distro_tagger  # noqa: F401  (registers the factory)

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
    families = sorted({label.split(":", 1)[0] for label in labels if ":" in label})
    palette = {f: plt.get_cmap("tab10")(i % 10) for i, f in enumerate(families)}
    colors = [palette.get(label.split(":", 1)[0], "tab:blue") for label in labels]
    ax_map.scatter(coords[:, 0], coords[:, 1], s=12, c=colors)
    for (x, y), label, color in zip(coords, labels, colors):
        ax_map.annotate(label, (x, y), fontsize=7, xytext=(2, 2), textcoords="offset points",
                        color=color if families else "black")
    ax_map.set_title(f"label vectors (d = {tagger.label_matrix.shape[0]}, effective rank "
                     f"{tagger.effective_rank}), first two principal directions", fontsize=9)
    if not tagger.has_label_structure:
        fig.suptitle("orthogonal label vectors (one-hot A): every similarity is 0, no structure yet",
                     fontsize=10, color="tab:red")
    ax_map.set_xticks([])
    ax_map.set_yticks([])
    image = ax_sim.imshow(sims[numpy.ix_(order, order)], cmap="RdBu_r", vmin=-1, vmax=1)
    ax_sim.set_xticks(range(n), [labels[i] for i in order], rotation=90, fontsize=6)
    ax_sim.set_yticks(range(n), [labels[i] for i in order], fontsize=6)
    ax_sim.set_title("cosine similarity of label vectors", fontsize=9)
    fig.colorbar(image, ax=ax_sim, shrink=0.7)
    fig.tight_layout()
    output_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output_path, dpi=120)
    plt.close(fig)
    return output_path, tagger.describe_label_space()

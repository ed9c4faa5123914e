"""Pictures of one word's first-pass attachment alternatives (Menchetti et
al. 2005, §6.3.3):

- :func:`draw_state_pca`: their Fig. 2, the recursive net's root-state
  vectors ``u(root(x))`` of the alternatives projected on their first two
  principal components, the gold alternative as a cross and the predicted
  one circled, each point coloured by its utility (the paper observes the
  alternatives on a curve in the plane, the best at its right end when the
  net ranks it first);
- :func:`alternatives_svg`: the alternatives themselves, the highest
  utilities first, each with its connection path and anchor coloured, the
  gold alternative framed green and the predicted one orange.

The alternatives of word ``i`` (0-based, ``i >= 1``) are built on ``T_i``:
the gold incremental tree when the sentence comes as a tree (the gold
alternative is then known), else the model's own greedy parse of the first
``i`` words (tagged text). The model is a trained pipeline's
``attachment_predictor`` (:meth:`AttachmentModel.from_predictor`) or a
learner trained here from a config (:meth:`AttachmentModel.train`).
"""
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError
from ..incremental.candidates import CPInventory, candidate_dag, candidate_edits, preference_sets, preference_sets_of
from ..incremental.classes import foot_class
from ..incremental.parsing import IncrementalParser
from ..incremental.paths import ATTACH, CPType, extend
from ..learners.metrics import at_least
from ..trees.arrays import SymbolTable

# dev sentences whose preference sets a recursive net trained for a picture stops early on
PICTURE_VALIDATION = 50
FORMATS = (".png", ".svg")
GOLD, PREDICTED, PATH, ANCHOR = "#1a9850", "#e66101", "#e66101", "#5e3c99"


class AttachmentModel:
    """What the pictures need of a trained first-pass attachment model: its
    CP inventory, the SymbolTable its candidate DAGs are built over, whether
    it scores reduced trees, its utilities ``(DAG, foot tag) -> array``, and
    the learner that scores a foot tag's sets (for its root states)."""

    def __init__(self, inventory: CPInventory, symbols: SymbolTable, reduced: bool,
                 utilities: Callable[[object, str], np.ndarray], learner_for: Callable[[str], object],
                 name: str):
        self.inventory, self.symbols, self.reduced = inventory, symbols, reduced
        self.utilities, self.learner_for, self.name = utilities, learner_for, name

    @classmethod
    def from_predictor(cls, pipe, name: str) -> "AttachmentModel":
        """A trained ``attachment_predictor`` component (e.g. of a saved
        pipeline), through its public ``inventory``, ``symbols``,
        ``utilities`` and ``learner_for``."""
        pipe.require_inventory()
        return cls(pipe.inventory, pipe.symbols, pipe.cfg["reduced"], pipe.utilities, pipe.learner_for, name)

    @classmethod
    def train(cls, config: Union[str, Path], sentences: int, specialise: bool = False) -> "AttachmentModel":
        """A learner from a config's ``[learner]`` block trained on the reduced
        preference sets of the first ``sentences`` train sentences (the CP
        inventory from all of train); a recursive net stops early on the sets
        of the first :data:`PICTURE_VALIDATION` dev sentences."""
        from ..corpora import ptb_trees
        from ..learners import RecursiveNetLearner
        from ..learners.kernels import TreeKernel
        from .attachment_tables import fit_attachment_learner, learner_from_config

        if sentences < 1:
            raise StructPrefError(f"train on at least one sentence, got {sentences}")
        learner = learner_from_config(config, {"learner.seed": 0})
        kernel = getattr(learner, "kernel", None)
        symbols = kernel.symbols if isinstance(kernel, TreeKernel) else SymbolTable()
        train = ptb_trees("train")
        inventory = CPInventory.from_trees(train)
        psets = preference_sets_of(train[:sentences], inventory)
        validation = (preference_sets_of(ptb_trees("dev")[:PICTURE_VALIDATION], inventory)
                      if isinstance(learner, RecursiveNetLearner) else None)
        trained, utilities = fit_attachment_learner(learner, psets, symbols, reduced=True, specialise=specialise,
                                                    validation=validation)

        def learner_for(foot: str):
            return trained.learners.get(foot_class(foot)) if specialise else trained

        return cls(inventory, symbols, True, utilities, learner_for,
                   f"{Path(config).stem} trained on {min(sentences, len(train))} sentences")

    def prefix(self, words: Sequence[str], tags: Sequence[str]) -> Tree:
        """``T_i`` of the model's greedy parse of the words (no ``TOP``)."""
        parser = IncrementalParser(self.inventory, lambda dag, foot, i: self.utilities(dag, foot),
                                   reduced=self.reduced, symbols=self.symbols)
        tree = parser.parse(words, tags).tree
        return tree[0]  # _finish put T_n under TOP


@dataclass
class Alternatives:
    """Word ``word``'s alternatives: ``edits`` on ``prefix`` (``T_word``),
    the candidate trees as the model scores them (``trees``), its
    ``utilities``, the ``gold`` index (None: unknown or not in the
    inventory) and the ``predicted`` one (the first of highest utility, as
    greedy parsing picks); ``from_tree``: built on a gold prefix tree."""

    words: List[str]
    tags: List[str]
    word: int
    prefix: Tree
    edits: List[Tuple[CPType, int]]
    trees: List[Tree]
    dag: object
    utilities: np.ndarray
    gold: Optional[int]
    predicted: int
    model: AttachmentModel
    from_tree: bool

    def root_states(self) -> np.ndarray:
        """The recursive net's root states of the alternatives, one row each."""
        from ..learners.recursive import RecursiveNetLearner

        learner = self.model.learner_for(self.tags[self.word])
        if not isinstance(learner, RecursiveNetLearner):
            raise StructPrefError(f"Fig. 2 plots the recursive net's root states, and {self.model.name} scores "
                                  f"with a {type(learner).__name__}: give a pipeline whose learner is "
                                  "spacy_structpref.RecursiveNetLearner.v1, or train one (configs/learners/rnn.cfg)")
        return learner.root_states(self.dag)


def read_sentence(source: str, index: int = 0) -> Tuple[List[str], List[str], Optional[Tree]]:
    """``(words, tags, gold tree or None)`` from a bracketed tree, ``ptb:SPLIT``
    (sentence ``index`` of a PTB-sample split), a ``.spacy`` file with
    constituents (Doc ``index``) or tagged text ``word/TAG word/TAG …``."""
    from ..trees.normalize import normalize_tree

    source = source.strip()
    tree = None
    if source.startswith("("):
        from ..trees.brackets import parse_bracketed

        tree = normalize_tree(parse_bracketed(source))
    elif source.startswith("ptb:") or source.endswith(".spacy"):
        if source.startswith("ptb:"):
            from ..corpora import ptb_trees

            items = ptb_trees(source[4:])
        else:
            import spacy
            from spacy.tokens import DocBin

            if not Path(source).is_file():
                raise StructPrefError(f"no file {source}")
            items = [d._.parse for d in DocBin().from_disk(source).get_docs(spacy.blank("xx").vocab)]
        if not 0 <= index < len(items) or items[index] is None:
            raise StructPrefError(f"{source} has no sentence {index} with a tree ({len(items)} sentences)")
        tree = items[index]
    else:
        pairs = [item.rsplit("/", 1) for item in source.split()]
        if not pairs or any(len(p) != 2 or not all(p) for p in pairs):
            raise StructPrefError("give the sentence as a bracketed tree, ptb:SPLIT, a .spacy file or tagged "
                                  f"text 'word/TAG word/TAG …', got {source[:60]!r}")
        words, tags = (list(x) for x in zip(*pairs))
        return words, tags, None
    words, tags = (list(x) for x in zip(*tree.pos()))
    return words, tags, tree


def word_alternatives(model: AttachmentModel, words: Sequence[str], tags: Sequence[str], word: int,
                      tree: Optional[Tree] = None) -> Alternatives:
    """The alternatives of word ``word`` (0-based, >= 1) of a sentence: on the
    gold ``T_word`` of ``tree`` when given, else on the model's greedy parse."""
    words, tags = list(words), list(tags)
    if not 1 <= word < len(words):
        raise StructPrefError(f"word must be between 1 and {len(words) - 1} (0-based: word 0 has no "
                              f"alternatives), got {word}")
    gold = None
    if tree is not None:
        s = preference_sets(tree, model.inventory)[word - 1]
        prefix, edits, gold = s.prefix, s.edits, s.gold
    else:
        prefix = model.prefix(words[:word], tags[:word])
        edits = candidate_edits(prefix, tags[word], model.inventory)
    if not edits:
        raise StructPrefError(f"no CP type of the inventory fits word {word} ({words[word]!r}, {tags[word]}) on "
                              "its prefix tree: the parser takes its fallback there, with no alternatives to draw")
    dag = candidate_dag(prefix, words[word], edits, model.symbols, model.reduced)
    utilities = np.asarray(model.utilities(dag, tags[word]), dtype=float)
    trees = [extend(prefix, cp, depth, words[word], model.reduced) for cp, depth in edits]
    return Alternatives(words, tags, word, prefix, list(edits), trees, dag, utilities, gold,
                        int(np.argmax(utilities)), model, tree is not None)


def _title(alts: Alternatives) -> str:
    return (f"word {alts.word} '{alts.words[alts.word]}' ({alts.tags[alts.word]}) after "
            f"'{' '.join(alts.words[max(0, alts.word - 6):alts.word])}': {len(alts.edits)} alternatives")


def _check_output(output: Union[str, Path], formats: Sequence[str]) -> Path:
    output = Path(output)
    if output.suffix.lower() not in formats:
        raise StructPrefError(f"output must end in {' or '.join(formats)}, got {output.name!r}")
    output.parent.mkdir(parents=True, exist_ok=True)
    return output


def principal_plane(states: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The rows projected on their first two principal components (zeros
    where there are fewer), and the share of variance of each."""
    centred = states - states.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    coords = np.zeros((len(states), 2))
    k = min(2, vt.shape[0])
    coords[:, :k] = centred @ vt[:k].T
    total = float((s ** 2).sum())
    share = np.zeros(2)
    share[:k] = (s[:k] ** 2) / total if total > 0 else 0.0
    return coords, share


def draw_state_pca(alts: Alternatives, output: Union[str, Path]) -> Path:
    """Menchetti et al. (2005), Fig. 2: PCA of the recursive net's root
    states of one word's alternatives (.png or .svg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    output = _check_output(output, FORMATS)
    coords, share = principal_plane(alts.root_states())
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    points = ax.scatter(coords[:, 0], coords[:, 1], c=alts.utilities, cmap="viridis", s=22, zorder=2)
    fig.colorbar(points, ax=ax, label="utility U(x)")
    p, g = alts.predicted, alts.gold
    tied = g is not None and g != p and bool(at_least(alts.utilities[g], alts.utilities[p]))
    ax.scatter(*coords[p], s=180, facecolors="none", edgecolors=PREDICTED, linewidths=2, zorder=3,
               label="predicted (highest utility" + (", tied with gold: first in edit order)" if tied else ")"))
    if g is not None:
        ax.scatter(*coords[g], s=110, marker="x", color="black", linewidths=2.2, zorder=4,
                   label="gold" + (" = predicted" if g == p else ""))
    ax.set_xlabel(f"principal component 1 ({100 * share[0]:.0f}% of variance)")
    ax.set_ylabel(f"principal component 2 ({100 * share[1]:.0f}% of variance)")
    ax.set_title(f"RNN root states, PCA: {_title(alts)}", fontsize=9)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(output)
    plt.close(fig)
    return output


def path_positions(tree: Tree, cp: CPType) -> Tuple[List[Tuple[int, ...]], Tuple[int, ...]]:
    """In a candidate ``T_{i+1}`` built with ``cp``: the positions of the
    connection path's nodes (the chain down to the new word's preterminal,
    and for a lift the new root and spine) and of the anchor."""
    position: Tuple[int, ...] = ()
    while len(tree[position].leaves()) > 1:  # down the right frontier to the chain's top
        position += (len(tree[position]) - 1,)
    chain = [position]
    while isinstance(tree[chain[-1]][0], Tree):
        chain.append(chain[-1] + (0,))
    if cp.kind == ATTACH:
        return chain, position[:-1]
    spine = [(0,) * k for k in range(len(cp.spine))]
    return spine + chain, (0,) * len(cp.spine)


_SIZE = re.compile(r'<svg [^>]*width="([\d.]+)" height="([\d.]+)"')


def alternatives_svg(alts: Alternatives, top: int = 8, columns: int = 2) -> str:
    """SVG of a word's alternatives, highest utility first (the ``top``
    best, plus the gold one wherever it ranks), each with its rank,
    utility and connection path, the path's nodes orange, its anchor
    purple; the gold alternative framed green, the predicted one orange."""
    from xml.sax.saxutils import escape

    from ..trees.draw import FONT_FAMILY, text_width, tree_to_svg

    if top < 1 or columns < 1:
        raise StructPrefError(f"top and columns must be >= 1, got {top} and {columns}")
    order = [int(j) for j in np.argsort(-alts.utilities, kind="stable")]
    rank = {j: r + 1 for r, j in enumerate(order)}
    shown = order[:top] + ([alts.gold] if alts.gold is not None and alts.gold not in order[:top] else [])
    panels = []
    for j in shown:
        cp, depth = alts.edits[j]
        nodes, anchor = path_positions(alts.trees[j], cp)
        colors = {**{p: PATH for p in nodes}, anchor: ANCHOR}
        inner = tree_to_svg(alts.trees[j], colors)
        width, height = (float(x) for x in _SIZE.match(inner).groups())
        marks = [name for name, k in (("gold", alts.gold), ("predicted", alts.predicted)) if k == j]
        caption = [f"#{rank[j]}  U = {alts.utilities[j]:.4g}" + (f"  [{' = '.join(marks)}]" if marks else ""),
                   f"{cp}" + (f" (depth {depth})" if cp.kind == ATTACH else "")]
        frame = GOLD if j == alts.gold else PREDICTED if j == alts.predicted else "#bbbbbb"
        panels.append((inner, width, height, caption, frame, 3 if marks else 1))
    pad, line = 10, 16
    gold_note = (f"gold ranked #{rank[alts.gold]}" if alts.gold is not None
                 else "the gold CP type is not in the inventory" if alts.from_tree
                 else "gold unknown (tagged text: the prefix is the model's greedy parse)")
    legend = f"{alts.model.name}; {gold_note}; path nodes orange, anchor purple; frame gold, predicted"
    # each cell as wide as its widest tree or caption, the picture as wide as its title lines
    cell_w = max(max(p[1] for p in panels), max(text_width(c, "text") for p in panels for c in p[3])) + 2 * pad
    rows = [panels[i:i + columns] for i in range(0, len(panels), columns)]
    heights = [max(p[2] for p in row) + 2 * line + 3 * pad for row in rows]
    head = 3 * line
    total_w = max(cell_w * min(columns, len(panels)), text_width(_title(alts), "label") + 2 * pad,
                  text_width(legend, "text") + 2 * pad)
    total_h = head + sum(heights)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
             f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" font-family="{FONT_FAMILY}" font-size="13">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{pad}" y="{line + 2}" font-weight="bold">{escape(_title(alts))}</text>',
             f'<text x="{pad}" y="{2 * line + 4}">{escape(alts.model.name)}; {gold_note}; path nodes '
             f'<tspan fill="{PATH}">orange</tspan>, anchor <tspan fill="{ANCHOR}">purple</tspan>; '
             f'frame <tspan fill="{GOLD}">gold</tspan>, <tspan fill="{PREDICTED}">predicted</tspan></text>']
    y = head
    for row, row_h in zip(rows, heights):
        for col, (inner, width, height, caption, frame, stroke) in enumerate(row):
            x = col * cell_w
            parts.append(f'<rect x="{x + 3}" y="{y + 3}" width="{cell_w - 6}" height="{row_h - 6}" fill="none" '
                         f'stroke="{frame}" stroke-width="{stroke}"/>')
            for k, text in enumerate(caption):
                parts.append(f'<text x="{x + pad}" y="{y + pad + line * (k + 1)}">{escape(text)}</text>')
            parts.append(inner.replace("<svg ", f'<svg x="{x + pad:.0f}" y="{y + 2 * pad + 2 * line:.0f}" ', 1))
        y += row_h
    parts.append("</svg>")
    return "\n".join(parts)


def write_alternatives_svg(alts: Alternatives, output: Union[str, Path], top: int = 8, columns: int = 2) -> Path:
    output = _check_output(output, (".svg",))
    output.write_text(alternatives_svg(alts, top, columns), encoding="utf8")
    return output

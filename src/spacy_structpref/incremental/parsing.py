"""A strongly incremental parser: first-pass attachment decisions chained
left to right (Menchetti et al. 2005, §6.1; Lombardo & Sturt's dynamic
grammar; Sturt et al. 2003).

The sentence is read one word at a time keeping one connected tree:

- **first word**: ``T_1`` is the word's bare preterminal ``(TAG word)``, as in
  :func:`~.paths.incremental_trees` (``r_1`` is ``w_1``'s preterminal and
  nothing above it is known yet), so it is always buildable and no choice is
  made;
- **next words**: the candidates ``T_{i+1}`` are the inventory's edits
  (:func:`~.candidates.candidate_edits`), built into one hash-consed DAG
  (:func:`~.candidates.candidate_dag`) that the scorer rates with one
  utility each;
- **fallback**, when no inventory CP fits (an unseen tag, or no anchor label
  on the right frontier): the word's bare preterminal becomes the new last
  child of the lowest non-preterminal frontier node, or, when ``T_i`` is a
  lone preterminal, ``T_i`` and the new preterminal become the children of a
  new ``FRAG`` root. The tree stays connected and every CP type is
  well-formed; fallbacks are counted;
- **end**: ``T_n`` is put under ``TOP`` like the trees of
  :func:`~spacy_structpref.corpora.ptb_trees`, so EVALB compares it with gold.
  Unary nodes between ``TOP`` and ``r_n`` are never built (2 of the 3,501
  PTB-sample trees have any).

Search keeps ``beam_width`` partial trees. A tree's score is the sum over
its choices of the log-softmax of the chosen utility within its set,
``log p(T_{i+1} | T_i) = U(T_{i+1}) − log Σ_j exp U(T_j)`` (the softmax
preference model of Menchetti et al. 2005, eq. 9), and a fallback, a set
of one, adds 0. Trees are ranked by fewest fallbacks first (a fallback lies
outside what the inventory can build, so a free log-probability of 0 must
not make it attractive), then by score, then, between extensions of one
tree, by utility and by edit order. With ``beam_width=1`` this is exactly
greedy first-pass attachment: at every word the first candidate of highest
utility (``np.argmax``), as a learner's ``predict`` picks.
"""
import heapq
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError
from ..trees.arrays import SymbolTable
from ..trees.dag import TreeSetDAG
from ..trees.normalize import TOP
from .candidates import CPInventory, Edit, candidate_dag, candidate_edits
from .paths import ATTACH, LIFT, CPType, extend, right_frontier

FRAG = "FRAG"
# Each word scores the candidates of every kept tree: the work grows linearly with the width.
MAX_BEAM_WIDTH = 100
# scorer(candidates, foot, word_index) -> one utility per candidate
Scorer = Callable[[TreeSetDAG, str, int], Sequence[float]]


@dataclass(frozen=True)
class Step:
    """How one word joined the tree: ``cp`` (None for the first word) at
    anchor depth ``depth`` on ``T_i``'s right frontier (0 for a lift);
    ``utility`` the scorer's value of the chosen candidate (None where the
    scorer was not asked: first word, fallback); ``logp`` its log-softmax
    within the set; ``n_alternatives`` the number of candidates scored."""

    cp: Optional[CPType]
    depth: int
    utility: Optional[float]
    logp: float
    n_alternatives: int
    fallback: bool

    @property
    def kind(self) -> str:
        return "first" if self.cp is None else self.cp.kind

    @property
    def anchor(self) -> Optional[str]:
        return None if self.cp is None else self.cp.anchor

    def to_dict(self) -> dict:
        """JSON-ready summary (what ``token._.attachment`` holds)."""
        return {"kind": self.kind, "anchor": self.anchor, "depth": self.depth,
                "cp": None if self.cp is None else str(self.cp), "utility": self.utility,
                "logp": self.logp, "n_alternatives": self.n_alternatives, "fallback": self.fallback}


@dataclass
class IncrementalParse:
    """A parse: ``tree`` (``TOP``-rooted), one :class:`Step` per word,
    ``n_fallbacks`` (steps with ``fallback``) and ``score`` (sum of the
    steps' ``logp``)."""

    tree: Tree
    steps: List[Step]
    n_fallbacks: int
    score: float


@dataclass
class _State:
    tree: Tree
    score: float
    n_fallbacks: int
    steps: Tuple  # linked list (previous steps, step): no copying per word


def fallback_edit(prefix: Tree, foot: str) -> Edit:
    """The fallback edit for a word tagged ``foot``: attach its bare
    preterminal under the lowest non-preterminal frontier node, which keeps
    every frontier node (every anchor) open for the next words; a lone
    preterminal is lifted under a new ``FRAG`` root."""
    frontier = right_frontier(prefix)
    if len(frontier) == 1:
        return CPType(LIFT, prefix.label(), (FRAG,), (foot,)), 0
    return CPType(ATTACH, frontier[-2].label(), (), (foot,)), len(frontier) - 2


def _log_softmax(u: np.ndarray) -> np.ndarray:
    m = u.max()
    return u - (m + np.log(np.exp(u - m).sum()))


class IncrementalParser:
    """Strongly incremental parsing with a CP inventory and a scorer of
    candidate sets (see the module docstring for the rules).

    ``scorer(candidates, foot, word_index)``: utilities of the candidates
    ``T_{i+1}`` (a :class:`TreeSetDAG` over ``symbols``) of word
    ``word_index`` (0-based), whose tag is ``foot``: e.g. a learner's
    ``utilities``, or ``lambda c, foot, i: spec.utilities(c, foot_class(foot))``.
    ``reduced``: candidates with tree reduction, as the scorer was trained."""

    def __init__(self, inventory: CPInventory, scorer: Scorer, beam_width: int = 1,
                 reduced: bool = False, symbols: Optional[SymbolTable] = None):
        if not isinstance(inventory, CPInventory):
            raise StructPrefError(f"expected a CPInventory, got {type(inventory).__name__}")
        if not callable(scorer):
            raise StructPrefError("the scorer must be callable as scorer(candidates, foot, word_index)")
        check_beam_width(beam_width)
        self.inventory, self.scorer = inventory, scorer
        self.beam_width, self.reduced = int(beam_width), bool(reduced)
        self.symbols = symbols if symbols is not None else SymbolTable()

    def parse(self, words: Sequence[str], tags: Sequence[str]) -> IncrementalParse:
        """The best parse of the tagged words."""
        return self.beam(words, tags)[0]

    def beam(self, words: Sequence[str], tags: Sequence[str]) -> List[IncrementalParse]:
        """Every parse left in the beam after the last word, best first."""
        words, tags = _check_input(words, tags)
        first = Step(None, 0, None, 0.0, 0, False)
        beam = [_State(Tree(tags[0], [words[0]]), 0.0, 0, ((), first))]
        for i in range(1, len(words)):
            beam = self._advance(beam, words[i], tags[i], i)
        return [_finish(state) for state in beam]

    def _advance(self, beam: List[_State], word: str, foot: str, i: int) -> List[_State]:
        ranked = []  # (rank key, parent, edit, step)
        for k, state in enumerate(beam):
            edits = candidate_edits(state.tree, foot, self.inventory)
            if not edits:
                edit = fallback_edit(state.tree, foot)
                ranked.append(((state.n_fallbacks + 1, -state.score, k, 0.0, 0), state, edit,
                               Step(edit[0], edit[1], None, 0.0, 0, True)))
                continue
            u = self._utilities(candidate_dag(state.tree, word, edits, self.symbols, self.reduced),
                                foot, i, len(edits))
            logp = _log_softmax(u)
            for j, (edit, uj, lj) in enumerate(zip(edits, u.tolist(), logp.tolist())):
                ranked.append(((state.n_fallbacks, -(state.score + lj), k, -uj, j), state, edit,
                               Step(edit[0], edit[1], uj, lj, len(edits), False)))
        kept = heapq.nsmallest(self.beam_width, ranked, key=lambda r: r[0])
        # only the survivors' trees are built
        return [_State(extend(parent.tree, edit[0], edit[1], word), parent.score + step.logp,
                       parent.n_fallbacks + step.fallback, (parent.steps, step))
                for _, parent, edit, step in kept]

    def _utilities(self, dag: TreeSetDAG, foot: str, i: int, n: int) -> np.ndarray:
        try:
            u = np.asarray(self.scorer(dag, foot, i), dtype=float)
        except (TypeError, ValueError) as err:
            raise StructPrefError(f"the scorer's utilities for word {i} are not numbers: {err}") from None
        if u.shape != (n,):
            raise StructPrefError(f"the scorer gave utilities of shape {u.shape} for word {i}'s "
                                  f"{n} candidates: one number per candidate is needed")
        if not np.isfinite(u).all():
            raise StructPrefError(f"the scorer gave a non-finite utility for word {i}")
        return u


def check_beam_width(width, owner: str = "") -> None:
    """Raise a :class:`StructPrefError` unless ``width`` is an integer in
    [1, :data:`MAX_BEAM_WIDTH`]."""
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or not 1 <= width <= MAX_BEAM_WIDTH:
        raise StructPrefError(f"{owner + ': ' if owner else ''}beam_width must be an integer from 1 to "
                              f"{MAX_BEAM_WIDTH}, got {width!r}")


def flat_parse(words: Sequence[str], tags: Sequence[str]) -> IncrementalParse:
    """The parse of a sentence left unsearched (longer than a bound): the
    flat tree ``(TOP (S (tag word) ...))`` of its tags (as the chart
    parser's fallback, :func:`~spacy_structpref.parsing.parser.flat_tree`),
    its steps what builds it (the first preterminal, lifted under ``S`` by
    the second word, the others attached to ``S``), every step a fallback."""
    from ..parsing.parser import flat_tree

    words, tags = _check_input(words, tags)
    steps = [Step(None, 0, None, 0.0, 0, True)]
    if len(words) > 1:
        steps.append(Step(CPType(LIFT, tags[0], ("S",), (tags[1],)), 0, None, 0.0, 0, True))
    steps.extend(Step(CPType(ATTACH, "S", (), (tag,)), 0, None, 0.0, 0, True) for tag in tags[2:])
    return IncrementalParse(flat_tree(words, tags), steps, len(steps), 0.0)


def _check_input(words: Sequence[str], tags: Sequence[str]) -> Tuple[List[str], List[str]]:
    words, tags = list(words), list(tags)
    if not words:
        raise StructPrefError("incremental parsing needs at least one word")
    if len(words) != len(tags):
        raise StructPrefError(f"{len(words)} words but {len(tags)} tags: one tag per word")
    for i, (word, tag) in enumerate(zip(words, tags)):
        if not isinstance(word, str) or not word:
            raise StructPrefError(f"word {i} is {word!r}: words must be non-empty strings")
        if not isinstance(tag, str) or not tag:
            raise StructPrefError(f"word {i} ({word!r}) has tag {tag!r}: every word needs a tag")
    return words, tags


def _finish(state: _State) -> IncrementalParse:
    steps, link = [], state.steps
    while link:
        link, step = link
        steps.append(step)
    steps.reverse()
    tree = state.tree if state.tree.label() == TOP else Tree(TOP, [state.tree])
    return IncrementalParse(tree, steps, state.n_fallbacks, state.score)

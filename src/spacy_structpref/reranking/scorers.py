"""A preference learner as a parse reranker: each sentence's k-best list
becomes the candidate set the learner scores (Collins & Duffy 2002;
Menchetti et al. 2005, §6.2), and the candidate of highest utility wins.

What a set holds depends on the learner: the candidates hash-consed into a
:class:`~spacy_structpref.trees.TreeSetDAG` for a tree kernel or the
recursive network, with the parser's log probabilities
(:class:`~spacy_structpref.learners.ScoredTrees`) for the composite kernel
(Menchetti et al. 2005, eq. 17) and the network's ``a·log p + b`` input
(§6.3.2), for the forest kernel each candidate's bracket-compatible
sub-forest of the sentence's forest (:mod:`.forest_kernel`), and for the
feature ranker (Charniak & Johnson 2005) the bracketed trees themselves. Sets are
built when a learner asks for them
(:class:`RerankSets`), so a training split of thousands of lists is never
held as trees at once.
"""
from collections.abc import Sequence as SequenceABC
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import SymbolTable
from ..trees.brackets import bracketed_to_arrays
from ..trees.dag import TreeSetDAG
from ..trees.forest import Forest
from .data import RerankItem


def takes_log_p(learner) -> bool:
    """Whether the learner scores candidates with their log probabilities."""
    from ..learners.kernels import CompositeKernel

    kernel = getattr(learner, "kernel", None)
    return isinstance(kernel, CompositeKernel) or bool(getattr(learner, "log_p_input", False))


def _base_kernel(learner):
    """The learner's kernel under a composite kernel's log p term (None: no kernel)."""
    kernel = getattr(learner, "kernel", None)
    return getattr(kernel, "tree_kernel", kernel)


def takes_forest(learner) -> bool:
    """Whether the learner scores candidates through the sentence's forest."""
    from ..learners.kernels import ForestKernel

    return isinstance(_base_kernel(learner), ForestKernel)


def reads_brackets(learner) -> bool:
    """Whether the learner reads each candidate tree itself (its own
    features) rather than a hash-consed DAG of the list."""
    return bool(getattr(learner, "reads_brackets", False))


def learner_symbols(learner) -> SymbolTable:
    """The table a learner's sets are built with: a kernel's own (support and
    candidates must share production ids); a fresh one for the network,
    which reads labels by name."""
    kernel = getattr(learner, "kernel", None)
    return kernel.symbols if kernel is not None else SymbolTable()


def candidate_set(learner, candidates: Sequence[str], log_probs: Sequence[float], forest: Optional[Forest] = None):
    """The set ``learner`` scores for one k-best list (bracket strings, best
    first, with their log probabilities, and the pruned forest they came
    from when the learner takes forests)."""
    from ..learners.kernels import ScoredTrees

    if len(candidates) != len(log_probs):
        raise StructPrefError(f"{len(candidates)} candidates with {len(log_probs)} log probabilities")
    if reads_brackets(learner):
        from ..learners.kernels import ScoredTrees

        return ScoredTrees(list(candidates), log_probs)
    symbols = learner_symbols(learner)
    if takes_forest(learner):
        from .forest_kernel import candidate_subforest

        if forest is None:
            raise StructPrefError("the forest kernel needs each sentence's forest (forest_parser: store_forest = "
                                  "true; rerank lists: with_forest=True)")
        if forest.symbols is not symbols:
            raise StructPrefError("mismatched vocabularies: read the forests into the kernel's SymbolTable")
        alpha = _base_kernel(learner).alpha
        trees = [candidate_subforest(forest, c, alpha) for c in candidates]
    else:
        trees = TreeSetDAG(bracketed_to_arrays(list(candidates), symbols).trees, symbols)
    return ScoredTrees(trees, log_probs) if takes_log_p(learner) else trees


class RerankSets(SequenceABC):
    """The candidate sets of rerank items for one learner, built on access;
    ``keep[i]``: the candidates of item i in its set (default: all).
    ``sizes()`` tells the set sizes without building them."""

    def __init__(self, learner, items: Sequence[RerankItem], keep: Optional[Sequence[Sequence[int]]] = None):
        self.learner, self.items = learner, list(items)
        self.keep = [range(len(item)) for item in self.items] if keep is None else [list(k) for k in keep]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return RerankSets(self.learner, self.items[i], self.keep[i])
        item, keep = self.items[i], self.keep[i]
        return candidate_set(self.learner, [item.candidates[j] for j in keep], [item.log_probs[j] for j in keep],
                             item.forest)

    def sizes(self) -> List[int]:
        return [len(k) for k in self.keep]


def first_k(items: Sequence[RerankItem], k: int) -> List[RerankItem]:
    """The items cut to their first ``k`` candidates, targets chosen again
    among those (lists of at most k are kept as they are)."""
    if k < 1:
        raise StructPrefError(f"k must be at least 1, got {k}")
    return [item if len(item) <= k else
            RerankItem(item.words, item.candidates[:k], item.log_probs[:k], item.gold, item.forest,
                       item.fallback, item.fold, item.stats[:k] if item.stats is not None else None)
            for item in items]


def training_sets(learner, items: Sequence[RerankItem], min_gap: float = 0.0) -> Tuple[RerankSets, List[int]]:
    """``(sets, gold)`` to train ``learner`` on: each item's target (its
    best-F1 candidate) against the candidates of lower F1, by more than
    ``min_gap``. Candidates as good as the target (most often the same
    brackets with other tags: PARSEVAL does not count tags) are left out,
    since ranking the target above them would teach noise; an item with
    nothing worse (or a parser's fallback, a single tree) teaches nothing
    and is left out. ``sets.items``: the items kept."""
    kept, keep, gold = [], [], []
    for n, item in enumerate(items):
        if item.target is None:
            raise StructPrefError(f"rerank item {n} has no gold tree, so no target to learn")
        f1 = item.f1()
        worse = [j for j in range(len(item)) if f1[j] < f1[item.target] - min_gap]
        if worse:
            kept.append(item)
            keep.append([item.target] + worse)
            gold.append(0)
    return RerankSets(learner, kept, keep), gold


def utilities(learner, candidates: Sequence[str], log_probs: Sequence[float],
              forest: Optional[Forest] = None) -> np.ndarray:
    """U(x) of each candidate of one k-best list; a list of one tree (e.g.
    the parser's fallback) is not scored: its utility is 0."""
    if len(candidates) < 2:
        return np.zeros(len(candidates))
    return np.asarray(learner.utilities(candidate_set(learner, candidates, log_probs, forest)), dtype=float)


def rerank(learner, items: Sequence[RerankItem], k: Optional[int] = None) -> List[int]:
    """The chosen candidate of each item: the highest utility among its
    first ``k`` candidates (all by default); ties go to the parser's order."""
    return [int(np.argmax(utilities(learner, item.candidates[:k], item.log_probs[:k], item.forest)))
            for item in items]

"""The forest-kernel scorer (Zhang et al. 2010), tempered: hyperedge
probabilities raised to a power α, an extension of this package.

Each candidate tree t of a sentence stands for the packed sub-forest of the
sentence's pruned forest that holds the trees bracket-compatible with t
(every forest node whose span crosses a bracket of t removed, with the
hyperedges that need it), its hyperedge probabilities raised to α and
inside–outside recomputed; K(t, t') is then Zhang et al.'s forest kernel
between the two sub-forests, the expected subset-tree kernel between trees
drawn from them, so it differs from candidate to candidate and changes
which one wins (α = 1: the parser's distribution, α → ∞: the sub-forest's
Viterbi tree, α → 0: its trees counted equally). The learners score the
sub-forests with :class:`~spacy_structpref.learners.kernels.ForestKernel`.
"""
from typing import List, Sequence, Tuple

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import offsets
from ..trees.forest import Forest


class NoCompatibleTree(StructPrefError):
    """No tree of a forest is bracket-compatible with the given brackets."""


def compatible_subforest(forest: Forest, brackets: Sequence[Tuple[int, int]], alpha: float = 1.0) -> Forest:
    """The sub-forest of the trees of ``forest`` none of whose nodes crosses
    one of ``brackets`` (``(start, end)`` token spans), hyperedge
    probabilities raised to ``alpha``, inside–outside recomputed; none:
    :class:`NoCompatibleTree`."""
    if not alpha > 0:
        raise StructPrefError(f"the tempering exponent α must be > 0, got {alpha}")
    f = forest
    spans = np.asarray(list(brackets), dtype=np.int64).reshape(-1, 2)
    s, e = f.start[:, None].astype(np.int64), f.end[:, None].astype(np.int64)
    a, b = spans[:, 0][None, :], spans[:, 1][None, :]
    crossing = ((s < a) & (a < e) & (e < b)) | ((a < s) & (s < b) & (b < e))
    alive = ~crossing.any(axis=1)
    owner = np.repeat(np.arange(f.n_edges), np.diff(f.tail_start))
    node_tail = f.tails >= 0
    while True:  # a node whose every hyperedge lost a tail goes too, and so on upwards
        dead_tail = np.zeros(f.n_edges, dtype=bool)
        dead_tail[owner[node_tail & ~alive[np.maximum(f.tails, 0)]]] = True
        edge_ok = alive[f.head] & ~dead_tail
        supported = np.zeros(f.n_nodes, dtype=bool)
        supported[f.head[edge_ok]] = True
        if np.array_equal(supported & alive, alive):
            break
        alive &= supported
    if not alive[f.root]:
        raise NoCompatibleTree("no tree of the forest is compatible with the brackets (is the tree in the forest?)")
    reach = np.zeros(f.n_nodes, dtype=bool)  # nodes that still hang below the root
    reach[f.root] = True
    while True:
        from_reached = edge_ok & reach[f.head]
        grown = reach.copy()
        grown[f.tails[node_tail & from_reached[owner]]] = True
        if np.array_equal(grown, reach):
            break
        reach = grown
    keep_node = alive & reach
    keep_edge = edge_ok & keep_node[f.head]
    new_id = np.cumsum(keep_node) - 1  # keeps the bottom-up order
    tails = f.tails[keep_edge[owner]]
    tails = np.where(tails >= 0, new_id[np.maximum(tails, 0)], tails)
    sizes = np.diff(f.tail_start)[keep_edge]
    sub = Forest(f.label[keep_node], f.start[keep_node], f.end[keep_node], new_id[f.head[keep_edge]],
                 offsets(sizes), tails, f.rule[keep_edge], f.prob[keep_edge] ** alpha,
                 new_id[f.root], f.n_words, f.symbols, state=f.state[keep_node])
    return sub.compute_inside_outside()


def candidate_subforest(forest: Forest, candidate: str, alpha: float = 1.0) -> Forest:
    """:func:`compatible_subforest` of a bracketed candidate, which must be a
    tree of the forest (the parsers' forests keep their k-best trees)."""
    try:
        return compatible_subforest(forest, candidate_brackets(candidate), alpha)
    except NoCompatibleTree:
        raise NoCompatibleTree(f"the candidate {candidate!r} is not a tree of its forest: rerank a parser's k-best "
                               f"list with the forest of the same parse") from None


def candidate_brackets(candidate: str) -> List[Tuple[int, int]]:
    """The token spans of a bracketed candidate's constituents (preterminals
    cross nothing and are left out)."""
    from ..trees.brackets import parse_bracketed
    from ..trees.doc import constituent_spans

    return [(s, e) for s, e, _ in constituent_spans(parse_bracketed(candidate))]

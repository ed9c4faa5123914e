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
Viterbi tree, α → 0: its trees counted equally).
"""
from typing import List, Sequence, Tuple

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import SymbolTable
from ..trees.forest import Forest


def compatible_subforest(forest: Forest, brackets: Sequence[Tuple[int, int]], alpha: float = 1.0) -> Forest:
    """The sub-forest of the trees of ``forest`` none of whose nodes crosses
    one of ``brackets`` (``(start, end)`` token spans), hyperedge
    probabilities raised to ``alpha``, inside–outside recomputed."""
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
        raise StructPrefError("no tree of the forest is compatible with the brackets (is the tree in the forest?)")
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
                 np.concatenate([[0], np.cumsum(sizes)]), tails, f.rule[keep_edge], f.prob[keep_edge] ** alpha,
                 new_id[f.root], f.n_words, f.symbols, state=f.state[keep_node])
    return sub.compute_inside_outside()


def candidate_brackets(candidate: str) -> List[Tuple[int, int]]:
    """The token spans of a bracketed candidate's constituents (preterminals
    cross nothing and are left out)."""
    from ..trees.brackets import parse_bracketed
    from ..trees.doc import constituent_spans

    return [(s, e) for s, e, _ in constituent_spans(parse_bracketed(candidate))]


class ForestKernel:
    """A learner kernel over packed (sub-)forests: Zhang et al.'s forest
    kernel with decay ``lam``, cosine-normalised when ``normalize``. Items
    are :class:`~spacy_structpref.trees.Forest` objects interned in
    ``symbols`` (for reranking, :func:`compatible_subforest` of a
    candidate, already tempered by ``alpha``: the kernel keeps α so that a
    saved support is checked against it). Each kernel value is one forest
    kernel: a support of n forests costs n evaluations per candidate."""

    def __init__(self, lam: float = 0.4, alpha: float = 1.0, normalize: bool = True,
                 symbols: SymbolTable = None):
        from ..kernels.inputs import check_lambda

        if not alpha > 0:
            raise StructPrefError(f"the tempering exponent α must be > 0, got {alpha}")
        self.lam, self.alpha, self.normalize = check_lambda(lam), float(alpha), normalize
        self.symbols = symbols if symbols is not None else SymbolTable()

    def prepare(self, items) -> list:
        from ..kernels.forests import PreparedForest

        out = []
        for item in items:
            forest = item.forest if isinstance(item, PreparedForest) else item
            if not isinstance(forest, Forest):
                raise StructPrefError(f"the forest kernel scores forests, got a {type(item).__name__}")
            if forest.symbols is not self.symbols:
                raise StructPrefError("mismatched vocabularies: build the forests with the kernel's SymbolTable "
                                      "(kernel.symbols)")
            out.append(item if isinstance(item, PreparedForest) else PreparedForest(forest))
        return out

    def join(self, parts) -> list:
        return [p for part in parts for p in part]

    def _norms(self, prepared) -> np.ndarray:
        return np.sqrt([p.self_kernel(self.lam) for p in prepared]) if self.normalize else np.ones(len(prepared))

    def block(self, a, b) -> np.ndarray:
        from ..kernels.forests import _forest_kernel

        K = np.array([[_forest_kernel(x, y, self.lam) for y in b] for x in a]).reshape(len(a), len(b))
        return K / np.outer(self._norms(a), self._norms(b))

    def weighted_sum(self, a, weights, b) -> np.ndarray:
        from ..kernels.forests import _forest_kernel

        w = np.asarray(weights, dtype=float) / self._norms(a)
        return np.array([sum(wi * _forest_kernel(x, y, self.lam) for wi, x in zip(w, a) if wi)
                         for y in b]) / self._norms(b)

    def settings(self) -> dict:
        return {"kind": "forest", "lam": self.lam, "alpha": self.alpha, "normalize": self.normalize}

    def encode(self, items) -> list:
        return [(item.forest if hasattr(item, "forest") else item).to_dict() for item in items]

    def decode(self, data: list) -> list:
        return [Forest.from_dict(d, self.symbols).compute_inside_outside() for d in data]

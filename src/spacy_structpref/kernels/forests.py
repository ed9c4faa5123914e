"""Packed-forest kernel (Zhang et al. 2010; SPEC §4) in scaled form.

With the node posterior μ(v) = α(v)β(v)/β(root) and q(e) = P(e)Πβ(tails)/β(head),
the spec's Δ' divided by α(v1)α(v2)β(v1)β(v2) is

    D(v1, v2) = λ Σ_{rule(e1) = rule(e2)} q(e1) q(e2) Π_j (1 + D(t_j(e1), t_j(e2)))

(word tails contribute 1) and K_f = Σ μ(v1) μ(v2) D(v1, v2). Every factor
stays in [0, 1]-ish ranges, so long sentences do not underflow; on a tree
(q = μ = 1) D is exactly the Collins–Duffy Δ.
"""
from typing import Optional

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import INT, SymbolTable
from ..trees.convert import shared_symbols, to_forest
from ..trees.forest import Forest
from . import _kernels
from .inputs import check_lambda


class PreparedForest:
    """A forest with the quantities the kernel loop reads, computed once."""

    def __init__(self, forest: Forest) -> None:
        if not 0 <= forest.root < forest.n_nodes:
            raise StructPrefError("the forest has no root")
        self.forest = forest
        self.mu = np.ascontiguousarray(np.nan_to_num(forest.node_posterior(), nan=0.0))
        # q is 0/0 under a node of zero inside probability: such edges never count
        self.q = np.ascontiguousarray(np.nan_to_num(forest.edge_given_head(), nan=0.0))
        self.by_rule = np.argsort(forest.rule, kind="stable").astype(INT)
        self.by_head = np.argsort(forest.head, kind="stable").astype(INT)
        self._self = {}

    def rule_slices(self, n_rules: int):
        first = np.full(n_rules, -1, dtype=INT)
        last = np.full(n_rules, -1, dtype=INT)
        rules = self.forest.rule[self.by_rule]
        if len(rules):
            cut = np.flatnonzero(np.r_[True, rules[1:] != rules[:-1]])
            first[rules[cut]] = cut
            last[rules[cut]] = np.r_[cut[1:], len(rules)]
        return first, last

    def self_kernel(self, lam: float) -> float:
        if lam not in self._self:
            self._self[lam] = _forest_kernel(self, self, lam)
        return self._self[lam]


def _forest_kernel(p1: PreparedForest, p2: PreparedForest, lam: float) -> float:
    f1, f2 = p1.forest, p2.forest
    n_rules = int(max(f1.rule.max(initial=-1), f2.rule.max(initial=-1))) + 1
    first, last = p1.rule_slices(n_rules)
    return _kernels.forest_kernel_sum(
        f1.head, f1.tail_start, f1.tails, p1.q, p1.mu, p1.by_rule, first, last,
        f2.head, f2.tail_start, f2.tails, f2.rule, p2.q, p2.mu, p2.by_head,
        f1.n_nodes, f2.n_nodes, lam)


def _prepare(item, symbols: SymbolTable) -> PreparedForest:
    return item if isinstance(item, PreparedForest) else PreparedForest(to_forest(item, symbols))


def _symbols_of(items, symbols):
    return shared_symbols([x.forest if isinstance(x, PreparedForest) else x for x in items], symbols)


def forest_kernel(f1, f2, lam: float = 0.4, normalize: bool = False,
                  symbols: Optional[SymbolTable] = None) -> float:
    """Forest kernel: the expected subset-tree kernel over the trees of two
    packed forests (``Forest``; trees in any accepted form become forests with
    one edge per node, :class:`PreparedForest` reuses its precomputation)."""
    lam = check_lambda(lam)
    symbols = _symbols_of([f1, f2], symbols)
    p1, p2 = _prepare(f1, symbols), _prepare(f2, symbols)
    k = _forest_kernel(p1, p2, lam)
    if normalize:
        k /= np.sqrt(p1.self_kernel(lam) * p2.self_kernel(lam))
    return float(k)


def forest_gram(A, B=None, lam: float = 0.4, normalize: bool = True,
                symbols: Optional[SymbolTable] = None) -> np.ndarray:
    """Forest-kernel matrix between two sequences of forests (or trees)."""
    lam = check_lambda(lam)
    symbols = _symbols_of(list(A) + list(B or []), symbols)
    pa = [_prepare(x, symbols) for x in A]
    pb = pa if B is None else [_prepare(x, symbols) for x in B]
    K = np.zeros((len(pa), len(pb)))
    for i, x in enumerate(pa):
        for j in range(i if B is None else 0, len(pb)):
            K[i, j] = _forest_kernel(x, pb[j], lam)
            if B is None:
                K[j, i] = K[i, j]
    if normalize:
        da = np.array([x.self_kernel(lam) for x in pa])
        db = da if B is None else np.array([x.self_kernel(lam) for x in pb])
        K /= np.sqrt(np.outer(da, db))
    return K

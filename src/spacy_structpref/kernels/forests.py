"""Packed-forest kernel (Zhang et al. 2010) in scaled form.

With the node posterior μ(v) = α(v)β(v)/β(root) and q(e) = P(e)Πβ(tails)/β(head),
Zhang et al.'s Δ' (their eqs. 8–9) divided by α(v1)α(v2)β(v1)β(v2) is

    D(v1, v2) = λ Σ_{rule(e1) = rule(e2)} q(e1) q(e2) Π_j (1 + D(t_j(e1), t_j(e2)))

(word tails contribute 1) and K_f = Σ μ(v1) μ(v2) D(v1, v2). Every factor
stays in [0, 1]-ish ranges, so long sentences do not underflow; on a tree
(q = μ = 1) D is exactly the Collins–Duffy Δ, which overflows as a tree's
does (see :mod:`.trees`): what comes out non-finite is recomputed with
logarithms.

The kernel table holds n1 × n2 doubles (a forest of 14,000 nodes: 1.5 GB
and 9 s per kernel), so forests above ``max_nodes`` nodes
(:data:`~.inputs.MAX_NODES` unless given) are refused with an error (see
:mod:`.inputs`); ``forest_parser`` forests of 100 words, its
``max_length``, have about 8,000.
"""
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import INT, SymbolTable
from ..trees.convert import shared_symbols, to_forest
from ..trees.forest import Forest
from . import _kernels
from .inputs import MAX_NODES, check_lambda, check_max_nodes, check_sizes, check_threads
from .numerics import cosine, finite_or_raise, log_cosine, with_logs

# Progress bars of a forest block appear (on a terminal) from this many kernel evaluations on.
PROGRESS_MIN_PAIRS = 100_000


class PreparedForest:
    """A forest with the quantities the kernel loop reads, computed once;
    one of more than ``max_nodes`` nodes is refused (see the module)."""

    def __init__(self, forest: Forest, max_nodes: int = MAX_NODES) -> None:
        if not 0 <= forest.root < forest.n_nodes:
            raise StructPrefError("the forest has no root")
        check_sizes([forest.n_nodes], check_max_nodes(max_nodes), "forest",
                    "prune it harder (forest_parser's merit_threshold, or prune_by_merit)")
        self.forest = forest
        self.mu = np.ascontiguousarray(np.nan_to_num(forest.node_posterior(), nan=0.0))
        # q is 0/0 under a node of zero inside probability: such edges never count
        self.q = np.ascontiguousarray(np.nan_to_num(forest.edge_given_head(), nan=0.0))
        self.by_rule = np.argsort(forest.rule, kind="stable").astype(INT)
        self.by_head = np.argsort(forest.head, kind="stable").astype(INT)
        self._self = {}
        self._logs = None

    def rule_slices(self, n_rules: int):
        first = np.full(n_rules, -1, dtype=INT)
        last = np.full(n_rules, -1, dtype=INT)
        rules = self.forest.rule[self.by_rule]
        if len(rules):
            cut = np.flatnonzero(np.r_[True, rules[1:] != rules[:-1]])
            first[rules[cut]] = cut
            last[rules[cut]] = np.r_[cut[1:], len(rules)]
        return first, last

    @property
    def logs(self):
        """(log q, log μ), for the kernel's ``Log`` arithmetic."""
        if self._logs is None:
            with np.errstate(divide="ignore"):
                self._logs = (np.log(self.q), np.log(self.mu))
        return self._logs

    def self_kernel(self, lam: float) -> float:
        """K(f, f), possibly inf: see :meth:`log_self_kernel`."""
        if lam not in self._self:
            self._self[lam] = _forest_kernel(self, self, lam)
        return self._self[lam]

    def log_self_kernel(self, lam: float) -> float:
        """log K(f, f), exact where K(f, f) overflows."""
        return float(_log_kernels(np.array([self.self_kernel(lam)]), [(self, self)], lam)[0])


def _kernel_sum(p1: PreparedForest, first: np.ndarray, last: np.ndarray, p2: PreparedForest, lam: float,
                log_space: bool) -> float:
    """K(f1, f2) by the compiled loop, ``first``/``last``: f1's rule slices."""
    f1, f2 = p1.forest, p2.forest
    (q1, mu1), (q2, mu2) = (p1.logs, p2.logs) if log_space else ((p1.q, p1.mu), (p2.q, p2.mu))
    return _kernels.forest_kernel_sum(
        f1.head, f1.tail_start, f1.tails, q1, mu1, p1.by_rule, first, last,
        f2.head, f2.tail_start, f2.tails, f2.rule, q2, mu2, p2.by_head,
        f1.n_nodes, f2.n_nodes, float(np.log(lam)) if log_space else lam, log_space)


def _forest_kernel(p1: PreparedForest, p2: PreparedForest, lam: float, log_space: bool = False) -> float:
    """K(f1, f2) of one pair (``log_space``: log K, exact where K overflows)."""
    f1, f2 = p1.forest, p2.forest
    n_rules = int(max(f1.rule.max(initial=-1), f2.rule.max(initial=-1))) + 1
    first, last = p1.rule_slices(n_rules)
    return _kernel_sum(p1, first, last, p2, lam, log_space)


def _log_kernels(K: np.ndarray, pairs, lam: float) -> np.ndarray:
    """log K, recomputed with logarithms for the pairs (in K's flat order) whose value is not finite."""
    return with_logs(K, lambda bad: [_forest_kernel(*pairs[i], lam, log_space=True)
                                     for i in np.flatnonzero(bad)])


def normalise_forest_gram(K: np.ndarray, pa: Sequence[PreparedForest], pb: Sequence[PreparedForest],
                          lam: float) -> np.ndarray:
    """Cosine normalisation of the unnormalised kernel matrix ``K`` between
    two lists of prepared forests (:func:`forest_block`); pairs whose value
    or self-kernels left the double range are recomputed with logarithms."""
    da = np.array([x.self_kernel(lam) for x in pa])
    db = np.array([x.self_kernel(lam) for x in pb])
    if np.isfinite(K).all() and np.isfinite(da).all() and np.isfinite(db).all():
        return cosine(K, da, db)
    pairs = [(x, y) for x in pa for y in pb]
    log_K = _log_kernels(K.ravel(), pairs, lam).reshape(K.shape)
    return log_cosine(log_K, np.array([x.log_self_kernel(lam) for x in pa]),
                      np.array([x.log_self_kernel(lam) for x in pb]))


def forest_block(a: Sequence[PreparedForest], b: Optional[Sequence[PreparedForest]] = None, lam: float = 0.4,
                 n_threads: int = 1, progress=None, n_rules: Optional[int] = None) -> np.ndarray:
    """Unnormalised forest-kernel matrix between two lists of
    :class:`PreparedForest` (``b=None``: symmetric, the upper triangle
    computed and mirrored, the diagonal kept as the forests' self-kernels).
    Each row's rule index is built once for the whole row (``n_rules``: the
    symbol table's production count, by default the largest rule id seen
    plus one), and rows go to ``n_threads`` threads (the compiled loop
    releases the GIL). ``progress``: True/False, or None for a bar
    from :data:`PROGRESS_MIN_PAIRS` kernel evaluations on (status lines when
    not on a terminal)."""
    lam, n_threads = check_lambda(lam), check_threads(n_threads)
    symmetric = b is None
    b = a if symmetric else b
    out = np.zeros((len(a), len(b)))
    if not len(a) or not len(b):
        return out
    if n_rules is None:
        n_rules = int(max(max(p.forest.rule.max(initial=-1) for p in a),
                          max(p.forest.rule.max(initial=-1) for p in b))) + 1

    def row(i: int) -> None:
        first, last = a[i].rule_slices(n_rules)
        for j in range(i if symmetric else 0, len(b)):
            out[i, j] = _kernel_sum(a[i], first, last, b[j], lam, False)

    n_pairs = len(a) * len(b) // (2 if symmetric else 1)
    if progress is None:
        progress = n_pairs >= PROGRESS_MIN_PAIRS
    from ..progress import progress_bar

    bar = progress_bar(total=len(a), desc="forest gram", unit="row", disable=not progress)
    try:
        if n_threads <= 1:
            for i in range(len(a)):
                row(i)
                bar.update(1)
        else:
            # a symmetric matrix's rows shrink: hand them out longest first, one at a time
            with ThreadPoolExecutor(max_workers=n_threads) as pool:
                for _ in pool.map(row, range(len(a))):
                    bar.update(1)
    finally:
        bar.close()
    if symmetric:
        out += np.triu(out, 1).T
        for i, p in enumerate(a):
            p._self.setdefault(lam, out[i, i])
    return out


def _prepare(item, symbols: SymbolTable, max_nodes: int) -> PreparedForest:
    return item if isinstance(item, PreparedForest) else PreparedForest(to_forest(item, symbols), max_nodes)


def _symbols_of(items, symbols):
    return shared_symbols([x.forest if isinstance(x, PreparedForest) else x for x in items], symbols)


def forest_kernel(f1, f2, lam: float = 0.4, normalize: bool = False,
                  symbols: Optional[SymbolTable] = None, max_nodes: int = MAX_NODES) -> float:
    """Forest kernel: the expected subset-tree kernel over the trees of two
    packed forests (``Forest``; trees in any accepted form become forests with
    one edge per node, :class:`PreparedForest` reuses its precomputation).
    A forest of more than ``max_nodes`` nodes raises (see the module)."""
    B = None if f2 is f1 else [f2]  # K(f, f) then costs one table, not three
    return float(forest_gram([f1], B, lam=lam, normalize=normalize, symbols=symbols, max_nodes=max_nodes)[0, 0])


def forest_gram(A, B=None, lam: float = 0.4, normalize: bool = True,
                symbols: Optional[SymbolTable] = None, max_nodes: int = MAX_NODES) -> np.ndarray:
    """Forest-kernel matrix between two sequences of forests (or trees)."""
    lam, max_nodes = check_lambda(lam), check_max_nodes(max_nodes)
    symbols = _symbols_of(list(A) + list(B or []), symbols)
    pa = [_prepare(x, symbols, max_nodes) for x in A]
    pb = pa if B is None else [_prepare(x, symbols, max_nodes) for x in B]
    K = forest_block(pa, None if B is None else pb, lam, progress=False)
    return normalise_forest_gram(K, pa, pb, lam) if normalize else finite_or_raise(K, "forest kernel")

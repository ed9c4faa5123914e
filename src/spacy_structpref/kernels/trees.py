"""Subset-tree (Collins & Duffy 2002) and subtree (σ = 0, Moschitti 2006)
kernels, Gram matrices and the composite reranking kernel, on top of the
Cython loops in ``_kernels``.

Kernel values grow like a product over a node's children: a flat tree of
2,200 children overflows a double at λ = 0.4. What the fast loops return
non-finite is recomputed with logarithms (``_kernels``' ``Log``
arithmetic): a normalised kernel (a cosine, in [0, 1]) is then computed
from the logarithms and is always finite; an unnormalised one that is truly
beyond the double range raises a :class:`StructPrefError`.

Trees of more than ``max_nodes`` nodes are refused (see
:mod:`.inputs`)."""
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import INT, FlatTrees, SymbolTable, TreeArrays, offsets
from ..trees.convert import shared_symbols, tree_batch
from ..trees.forest import Forest
from . import _kernels
from .inputs import MAX_NODES, check_lambda, check_max_nodes, check_sigma, check_sizes, check_threads
from .numerics import cosine, finite_or_raise, log_cosine, log_parameters, with_logs

# Progress bars appear (on a terminal) from this many kernel evaluations on.
PROGRESS_MIN_PAIRS = 1_000_000


def pack(trees) -> "_kernels.PackedArrays":
    """The flat arrays the Cython loops read, from :class:`FlatTrees` or a
    sequence of TreeArrays: node children only (local ids), and each tree's
    nodes sorted by production in runs of equal production."""
    flat = trees if isinstance(trees, FlatTrees) else FlatTrees.from_trees(trees, None)
    n = len(flat)
    node_off, prod, children = flat.node_off, flat.prod, flat.children
    total = int(node_off[-1])
    is_node = children >= 0
    kid_count = offsets(is_node)
    kid_off = kid_count[flat.child_off].astype(INT)
    kids = children[is_node]
    tree_of = np.repeat(np.arange(n), np.diff(node_off))
    # one int64 key (tree, production), sorted stably: node ids ascend within a run
    by_prod = np.argsort(tree_of * (int(prod.max(initial=0)) + 1) + prod, kind="stable")
    sorted_tree, sorted_prod = tree_of[by_prod], prod[by_prod]
    order = (by_prod - node_off[sorted_tree]).astype(INT)
    new_run = np.ones(total, dtype=bool)
    new_run[1:] = (sorted_prod[1:] != sorted_prod[:-1]) | (sorted_tree[1:] != sorted_tree[:-1])
    run_pos = np.flatnonzero(new_run)
    run_start = np.append(run_pos, total).astype(INT)
    run_off = np.searchsorted(run_pos, node_off).astype(INT)
    return _kernels.PackedArrays(node_off.astype(INT), prod, kid_off, kids, run_off, sorted_prod[run_pos], run_start,
                                 order)


class TreeBatch:
    """Trees converted and packed once, with their self-kernels cached per
    (λ, σ): pass it to :func:`gram` repeatedly (e.g. a perceptron's support
    set) to avoid repacking and recomputing normalisers. A list of bracket
    strings is read straight into arrays (:func:`bracketed_to_arrays`);
    ``trees`` (TreeArrays) are built on first use. A tree of more than
    ``max_nodes`` nodes is refused (see :mod:`.inputs`)."""

    def __init__(self, trees, symbols: Optional[SymbolTable] = None, max_nodes: int = MAX_NODES) -> None:
        max_nodes = check_max_nodes(max_nodes)
        self.flat = tree_batch(trees, symbols)
        check_sizes(np.diff(self.flat.node_off), max_nodes, "tree",
                    "split it (a forest_parser's or attachment_predictor's max_length bounds their trees)")
        self.symbols = self.flat.symbols
        self.packed = pack(self.flat)
        self._self: Dict[Tuple[float, float], np.ndarray] = {}

    @property
    def trees(self) -> List[TreeArrays]:
        return self.flat.trees

    def __len__(self) -> int:
        return len(self.flat)

    def self_kernels(self, lam: float = 0.4, sigma: float = 1) -> np.ndarray:
        """K(t, t) of every tree (a :class:`StructPrefError` if one is
        beyond the double range: :meth:`log_self_kernels` has them all)."""
        return finite_or_raise(self._self_kernels(check_lambda(lam), check_sigma(sigma)), "self-kernel")

    def _self_kernels(self, lam: float, sigma: float) -> np.ndarray:
        key = (lam, sigma)
        if key not in self._self:
            self._self[key] = _kernels.self_kernels(self.packed, lam, sigma)
        return self._self[key]

    def log_self_kernels(self, lam: float = 0.4, sigma: float = 1) -> np.ndarray:
        """log K(t, t) of every tree, exact where K(t, t) overflows."""
        key = ("log", check_lambda(lam), check_sigma(sigma))
        if key not in self._self:
            K = self._self_kernels(key[1], key[2])
            idx = np.arange(len(self), dtype=INT)
            self._self[key] = with_logs(K, lambda bad: _kernels.log_pair_kernels(
                self.packed, self.packed, idx[bad], idx[bad], *log_parameters(key[1], key[2])))
        return self._self[key]


def _as_batch(items, symbols: Optional[SymbolTable], max_nodes: int) -> TreeBatch:
    if isinstance(items, TreeBatch):
        if symbols is not None and items.symbols is not symbols:
            raise StructPrefError("mismatched vocabularies: the two tree batches use different SymbolTables")
        return items
    return TreeBatch(items, symbols, max_nodes)


def _common_symbols(A, B) -> Optional[SymbolTable]:
    """The table both sides must share (None: neither side has one yet)."""
    items = []
    for side in (A, B):
        if isinstance(side, TreeBatch):
            items.append(side.flat)
        elif side is not None:
            items.extend(side)
    return shared_symbols(items) if items else None


def _raw_gram(A: TreeBatch, B: Optional[TreeBatch], lam: float, sigma: float, n_threads: int,
              progress) -> np.ndarray:
    symmetric = B is None
    B = A if symmetric else B
    out = np.zeros((len(A), len(B)))
    if not len(A) or not len(B):
        return out
    # Many small chunks, taken in order by whichever thread is free, balance
    # the shrinking rows of a symmetric matrix.
    chunk = max(1, min(64, len(A) // (8 * max(n_threads, 1))))
    chunks = [np.arange(s, min(s + chunk, len(A)), dtype=INT) for s in range(0, len(A), chunk)]

    def run(rows):
        _kernels.gram_rows(A.packed, B.packed, rows, lam, sigma, symmetric, out)
        return len(rows)

    n_pairs = len(A) * len(B) // (2 if symmetric else 1)
    if progress is None and n_pairs < PROGRESS_MIN_PAIRS:
        progress = False
    bar = None
    if progress is not False:
        from ..progress import progress_bar

        bar = progress_bar(total=len(A), desc="gram", unit="row")
    try:
        if n_threads <= 1:
            for rows in chunks:
                done = run(rows)
                if bar is not None:
                    bar.update(done)
        else:
            with ThreadPoolExecutor(max_workers=n_threads) as pool:
                for done in pool.map(run, chunks):
                    if bar is not None:
                        bar.update(done)
    finally:
        if bar is not None:
            bar.close()
    if symmetric:  # mirror the upper triangle, a band of rows at a time
        for s in range(0, len(A), 512):
            e = min(s + 512, len(A))
            out[s:e, :s] = out[:s, s:e].T
            block = out[s:e, s:e]
            block += np.triu(block, 1).T
    return out


def gram(A, B=None, lam: float = 0.4, normalize: bool = True, n_threads: int = 2, progress=None,
         sigma: float = 1, symbols: Optional[SymbolTable] = None, max_nodes: int = MAX_NODES) -> np.ndarray:
    """Kernel matrix ``K[i, j] = K(A[i], B[j])`` (``B=None``: the symmetric
    ``K(A, A)``, each pair computed once).

    ``A``/``B``: sequences of trees in any accepted form (converted with one
    shared SymbolTable), :class:`TreeBatch` objects, or sequences of
    :class:`Forest` (then the forest kernel is used). ``n_threads`` threads
    share the rows (the loops release the GIL). ``progress``: True/False, or
    None for a bar when the matrix is large (status lines when not on a terminal). ``normalize``:
    cosine normalisation with cached self-kernels. Trees (or forests) of
    more than ``max_nodes`` nodes are refused (see :mod:`.inputs`).
    """
    lam, sigma, n_threads = check_lambda(lam), check_sigma(sigma), check_threads(n_threads)
    A = A if isinstance(A, TreeBatch) else list(A)
    B = B if B is None or isinstance(B, TreeBatch) else list(B)
    if _has_forest(A) or (B is not None and _has_forest(B)):
        from .forests import forest_gram

        if sigma != 1:
            raise StructPrefError("the forest kernel is a subset-tree kernel: sigma must be 1")
        return forest_gram(A, B, lam=lam, normalize=normalize, symbols=symbols, max_nodes=max_nodes)
    if symbols is None:
        symbols = _common_symbols(A, B)
    batch_a = _as_batch(A, symbols, max_nodes)
    batch_b = None if B is None else _as_batch(B, batch_a.symbols, max_nodes)
    K = _raw_gram(batch_a, batch_b, lam, sigma, n_threads, progress)
    if not normalize:
        return finite_or_raise(K, "kernel")
    if batch_b is None:
        batch_a._self.setdefault((lam, sigma), np.diag(K).copy())
    other = batch_a if batch_b is None else batch_b
    da, db = batch_a._self_kernels(lam, sigma), other._self_kernels(lam, sigma)
    if np.isfinite(K).all() and np.isfinite(da).all() and np.isfinite(db).all():
        return cosine(K, da, db)
    rows, cols = np.indices(K.shape, dtype=INT)
    log_K = with_logs(K, lambda bad: _kernels.log_pair_kernels(batch_a.packed, other.packed, rows[bad], cols[bad],
                                                               *log_parameters(lam, sigma)))
    return log_cosine(log_K, batch_a.log_self_kernels(lam, sigma), other.log_self_kernels(lam, sigma))


def _has_forest(items) -> bool:
    return not isinstance(items, TreeBatch) and any(isinstance(x, Forest) for x in items)


def tree_kernel(t1, t2, lam: float = 0.4, sigma: float = 1, normalize: bool = False,
                symbols: Optional[SymbolTable] = None, max_nodes: int = MAX_NODES) -> float:
    """Subset-tree kernel (``sigma=1``) or subtree kernel (``sigma=0``) of two
    trees: TreeArrays, nltk.Tree, bracketed strings or Docs with constituents;
    a tree of more than ``max_nodes`` nodes is refused. For many pairs use
    :func:`gram`."""
    symbols = shared_symbols([t1, t2], symbols)
    return float(gram([t1], [t2], lam=lam, normalize=normalize, n_threads=1, progress=False,
                      sigma=sigma, symbols=symbols, max_nodes=max_nodes)[0, 0])

"""Subset-tree / subtree kernels (Collins & Duffy; SPEC §4), Gram matrices and
the composite reranking kernel, on top of the Cython loops in ``_kernels``."""
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import INT, SymbolTable, TreeArrays
from ..trees.forest import Forest
from . import _kernels
from .inputs import check_lambda, check_sigma, shared_symbols, tree_list

# Progress bars appear (on a terminal) from this many kernel evaluations on.
PROGRESS_MIN_PAIRS = 1_000_000


def pack(trees: Sequence[TreeArrays]) -> "_kernels.PackedArrays":
    """Concatenate trees into the flat arrays the Cython loops read: node
    children only (local ids), and each tree's nodes sorted by production in
    runs of equal production."""
    n = len(trees)
    sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
    node_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=node_off[1:])
    total = int(node_off[-1])
    if n == 0:
        empty = np.zeros(0, dtype=INT)
        one = np.zeros(1, dtype=INT)
        return _kernels.PackedArrays(one, empty, one, empty, one, empty, one, empty)
    prod = np.concatenate([t.prod for t in trees]).astype(INT)
    children = np.concatenate([t.children for t in trees])
    child_base = np.zeros(n, dtype=np.int64)
    np.cumsum([len(t.children) for t in trees[:-1]], out=child_base[1:])
    starts = np.concatenate([t.child_start[:-1] + child_base[i] for i, t in enumerate(trees)] + [[len(children)]])
    is_node = children >= 0
    kid_count = np.zeros(len(children) + 1, dtype=np.int64)
    np.cumsum(is_node, out=kid_count[1:])
    kid_off = kid_count[starts].astype(INT)
    kids = children[is_node].astype(INT)
    tree_of = np.repeat(np.arange(n), sizes)
    by_prod = np.lexsort((prod, tree_of))  # stable: node ids ascend within a run
    order = (by_prod - node_off[tree_of[by_prod]]).astype(INT)
    sorted_prod = prod[by_prod]
    new_run = np.ones(total, dtype=bool)
    new_run[1:] = (sorted_prod[1:] != sorted_prod[:-1]) | (tree_of[by_prod][1:] != tree_of[by_prod][:-1])
    run_pos = np.flatnonzero(new_run)
    run_start = np.append(run_pos, total).astype(INT)
    run_prod = sorted_prod[run_pos].astype(INT)
    run_off = np.searchsorted(run_pos, node_off).astype(INT)
    return _kernels.PackedArrays(node_off.astype(INT), prod, kid_off, kids, run_off, run_prod, run_start, order)


class TreeBatch:
    """Trees converted and packed once, with their self-kernels cached per
    (λ, σ): pass it to :func:`gram` repeatedly (e.g. a perceptron's support
    set) to avoid repacking and recomputing normalisers."""

    def __init__(self, trees, symbols: Optional[SymbolTable] = None) -> None:
        self.trees = tree_list(trees, symbols)
        self.symbols = self.trees[0].symbols if self.trees else shared_symbols([], symbols)
        self.packed = pack(self.trees)
        self._self: Dict[Tuple[float, float], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.trees)

    def self_kernels(self, lam: float = 0.4, sigma: float = 1) -> np.ndarray:
        key = (check_lambda(lam), check_sigma(sigma))
        if key not in self._self:
            self._self[key] = _kernels.self_kernels(self.packed, key[0], key[1])
        return self._self[key]


def _as_batch(items, symbols: Optional[SymbolTable]) -> TreeBatch:
    if isinstance(items, TreeBatch):
        if symbols is not None and items.symbols is not symbols:
            raise StructPrefError("mismatched vocabularies: the two tree batches use different SymbolTables")
        return items
    return TreeBatch(items, symbols)


def _common_symbols(A, B) -> Optional[SymbolTable]:
    """The table both sides must share (None: neither side has one yet)."""
    items = []
    for side in (A, B):
        if side is None:
            continue
        if isinstance(side, TreeBatch):
            items.append(side.trees[0] if side.trees else None)
        else:
            items.extend(side)
    return shared_symbols([x for x in items if x is not None]) if items else None


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
        from tqdm import tqdm

        # disable=None: tqdm shows the bar only on a terminal
        bar = tqdm(total=len(A), desc="gram", unit="row", disable=None if progress is None else not progress)
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
         sigma: float = 1, symbols: Optional[SymbolTable] = None) -> np.ndarray:
    """Kernel matrix ``K[i, j] = K(A[i], B[j])`` (``B=None``: the symmetric
    ``K(A, A)``, each pair computed once).

    ``A``/``B``: sequences of trees in any accepted form (converted with one
    shared SymbolTable), :class:`TreeBatch` objects, or sequences of
    :class:`Forest` (then the forest kernel is used). ``n_threads`` threads
    share the rows (the loops release the GIL). ``progress``: True/False, or
    None for a bar on terminals when the matrix is large. ``normalize``:
    cosine normalisation with cached self-kernels.
    """
    lam, sigma = check_lambda(lam), check_sigma(sigma)
    A = A if isinstance(A, TreeBatch) else list(A)
    B = B if B is None or isinstance(B, TreeBatch) else list(B)
    if _has_forest(A) or (B is not None and _has_forest(B)):
        from .forests import forest_gram

        if sigma != 1:
            raise StructPrefError("the forest kernel is a subset-tree kernel: sigma must be 1")
        return forest_gram(A, B, lam=lam, normalize=normalize, symbols=symbols)
    if symbols is None:
        symbols = _common_symbols(A, B)
    batch_a = _as_batch(A, symbols)
    batch_b = None if B is None else _as_batch(B, batch_a.symbols)
    K = _raw_gram(batch_a, batch_b, lam, sigma, n_threads, progress)
    if normalize:
        da = np.diag(K).copy() if batch_b is None else batch_a.self_kernels(lam, sigma)
        if batch_b is None:
            batch_a._self.setdefault((lam, sigma), da)
        db = da if batch_b is None else batch_b.self_kernels(lam, sigma)
        K /= np.sqrt(np.outer(da, db))
    return K


def _has_forest(items) -> bool:
    return not isinstance(items, TreeBatch) and any(isinstance(x, Forest) for x in items)


def tree_kernel(t1, t2, lam: float = 0.4, sigma: float = 1, normalize: bool = False,
                symbols: Optional[SymbolTable] = None) -> float:
    """Subset-tree kernel (``sigma=1``) or subtree kernel (``sigma=0``) of two
    trees: TreeArrays, nltk.Tree, bracketed strings or Docs with constituents.
    For many pairs use :func:`gram`."""
    symbols = shared_symbols([t1, t2], symbols)
    return float(gram([t1], [t2], lam=lam, normalize=normalize, n_threads=1, progress=False,
                      sigma=sigma, symbols=symbols)[0, 0])


def composite_kernel(x1, x2, log_p1: float, log_p2: float, lam: float = 0.4, b: float = 0.2,
                     normalize: bool = False, sigma: float = 1) -> float:
    """Reranking kernel ``K_λ(x1, x2) + b · log p(x1) · log p(x2)`` (SPEC §4);
    trees or forests (then the forest kernel is K)."""
    if isinstance(x1, Forest) or isinstance(x2, Forest):
        from .forests import forest_kernel

        if sigma != 1:
            raise StructPrefError("the forest kernel is a subset-tree kernel: sigma must be 1")
        k = forest_kernel(x1, x2, lam=lam, normalize=normalize)
    else:
        k = tree_kernel(x1, x2, lam=lam, sigma=sigma, normalize=normalize)
    return k + float(b) * float(log_p1) * float(log_p2)


def composite_gram(A, log_p_a, B=None, log_p_b=None, lam: float = 0.4, b: float = 0.2,
                   normalize: bool = True, **kwargs) -> np.ndarray:
    """:func:`gram` plus ``b · log p · log p'`` for every pair."""
    K = gram(A, B, lam=lam, normalize=normalize, **kwargs)
    log_p_a = np.asarray(log_p_a, dtype=float)
    log_p_b = log_p_a if B is None else np.asarray(log_p_b, dtype=float)
    if K.shape != (len(log_p_a), len(log_p_b)):
        raise StructPrefError(f"need one log probability per candidate: got {len(log_p_a)} and "
                              f"{len(log_p_b)} for a {K.shape[0]} x {K.shape[1]} kernel matrix")
    return K + float(b) * np.outer(log_p_a, log_p_b)

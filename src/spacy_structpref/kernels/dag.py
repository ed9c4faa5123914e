"""Hash-consed tree sets: candidate sets (k-best lists, attachment
alternatives, incremental prefix trees) share most subtrees. Storing each
distinct subtree once turns a set into a DAG, and a kernel block between two
sets then computes Δ once per distinct node pair (SPEC §5)."""
from collections import Counter
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import INT, SymbolTable, TreeArrays
from . import _kernels
from .inputs import check_lambda, check_sigma, tree_list
from .trees import TreeBatch, pack


class TreeSetDAG:
    """A list of trees stored as one DAG of distinct subtrees.

    A subtree is identified by its production and its node children's DAG
    ids (words are part of the production), so equal subtrees anywhere in
    the set share one DAG node. ``kernel_block(other)`` gives the matrix of
    tree kernels between the two sets.
    """

    def __init__(self, trees=(), symbols: Optional[SymbolTable] = None) -> None:
        trees = tree_list(trees, symbols)
        self.symbols = trees[0].symbols if trees else (symbols or SymbolTable())
        self.trees: List[TreeArrays] = []
        self._ids: Dict[Tuple[int, Tuple[int, ...]], int] = {}
        self._prod: List[int] = []
        self._kids: List[Tuple[int, ...]] = []
        self._occ: List[Counter] = []
        self.roots: List[int] = []  # DAG node of each tree's root
        self._packed = None
        self._batch = None
        for t in trees:
            self.add(t)

    def add(self, tree) -> int:
        """Add one tree; returns its index in the set."""
        (tree,) = tree_list([tree], self.symbols)
        prods, refs, cs = tree.prod.tolist(), tree.children.tolist(), tree.child_start.tolist()
        local = []
        ids = self._ids
        for i, p in enumerate(prods):
            key = (p, tuple(local[c] for c in refs[cs[i]:cs[i + 1]] if c >= 0))
            d = ids.get(key)
            if d is None:
                d = ids[key] = len(self._prod)
                self._prod.append(p)
                self._kids.append(key[1])
            local.append(d)
        self.trees.append(tree)
        self.roots.append(local[-1])
        self._occ.append(Counter(local))
        self._packed = self._batch = None
        return len(self.trees) - 1

    def __len__(self) -> int:
        return len(self.trees)

    @property
    def n_dag_nodes(self) -> int:
        return len(self._prod)

    @property
    def productions(self) -> List[int]:
        """Production id of each DAG node (children come before parents)."""
        return self._prod

    @property
    def children(self) -> List[Tuple[int, ...]]:
        """Node children (DAG ids) of each DAG node; words are in the production."""
        return self._kids

    @property
    def n_tree_nodes(self) -> int:
        return sum(t.n_nodes for t in self.trees)

    def _dag_packed(self):
        if self._packed is None:
            n = len(self._prod)
            child_start = np.zeros(n + 1, dtype=INT)
            np.cumsum([len(k) for k in self._kids], out=child_start[1:])
            children = np.fromiter((c for k in self._kids for c in k), dtype=INT, count=int(child_start[-1]))
            zeros = np.zeros(n, dtype=INT)
            dag = TreeArrays(zeros, np.asarray(self._prod, dtype=INT), zeros, zeros, child_start, children,
                             0, self.symbols)
            self._packed = pack([dag])
            # per distinct subtree: the trees it occurs in (ascending) and how often
            tree_of = np.repeat(np.arange(len(self._occ)), [len(c) for c in self._occ])
            node = np.fromiter((u for c in self._occ for u in c), dtype=INT, count=len(tree_of))
            cnt = np.fromiter((k for c in self._occ for k in c.values()), dtype=float, count=len(tree_of))
            order = np.argsort(node, kind="stable")
            self._by_node = (_offsets(node[order], n), tree_of[order].astype(INT), cnt[order])
        return self._packed

    def nbytes(self) -> int:
        """Memory held by the packed DAG and its occurrence lists."""
        packed = self._dag_packed()
        arrays = [packed.node_off, packed.prod, packed.kid_off, packed.kids, packed.run_off, packed.run_prod,
                  packed.run_start, packed.order, *self._by_node]
        return int(sum(a.nbytes for a in arrays))

    def self_kernels(self, lam: float = 0.4, sigma: float = 1) -> np.ndarray:
        if self._batch is None:
            self._batch = TreeBatch(self.trees, self.symbols)
        return self._batch.self_kernels(lam, sigma)

    def kernel_block(self, other: "TreeSetDAG" = None, lam: float = 0.4, sigma: float = 1,
                     normalize: bool = False, return_pairs: bool = False):
        """``K[a, b]`` = tree kernel between tree a of this set and tree b of
        ``other`` (default: this set). ``return_pairs`` also returns how many
        distinct node pairs Δ was computed for."""
        lam, sigma = check_lambda(lam), check_sigma(sigma)
        other = self if other is None else other
        if other.symbols is not self.symbols:
            raise StructPrefError("mismatched vocabularies: the two tree sets use different SymbolTables")
        if not len(self) or not len(other):
            K, n_pairs = np.zeros((len(self), len(other))), 0
        else:
            d1, d2 = self._dag_packed(), other._dag_packed()
            K, n_pairs = _kernels.dag_block(d1, d2, *self._by_node, *other._by_node, len(self), len(other),
                                            lam, sigma)
        if normalize:
            K /= np.sqrt(np.outer(self.self_kernels(lam, sigma), other.self_kernels(lam, sigma)))
        return (K, n_pairs) if return_pairs else K

    def weighted_sums(self, weights, other: "TreeSetDAG", lam: float = 0.4, sigma: float = 1,
                      normalize: bool = False) -> np.ndarray:
        """``Σ_a weights[a] K(a, b)`` for every tree b of ``other``: a learner's
        utilities over its support trees in one pass. The weights are folded
        into the DAG nodes (a distinct subtree weighs Σ weight × occurrences
        over the trees holding it), so the cost grows with the distinct
        subtrees of this set, not with its number of trees."""
        lam, sigma = check_lambda(lam), check_sigma(sigma)
        if other.symbols is not self.symbols:
            raise StructPrefError("mismatched vocabularies: the two tree sets use different SymbolTables")
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (len(self),):
            raise StructPrefError(f"{len(self)} trees but weights of shape {weights.shape}")
        if not len(self) or not len(other):
            return np.zeros(len(other))
        if normalize:
            weights = weights / np.sqrt(self.self_kernels(lam, sigma))
        packed = self._dag_packed()
        off, tree_of, cnt = self._by_node
        n = self.n_dag_nodes
        node_weight = np.bincount(np.repeat(np.arange(n), np.diff(off)), cnt * weights[tree_of],
                                  minlength=n)
        # ``other`` as the rows, this set collapsed into one weighted column
        K, _ = _kernels.dag_block(other._dag_packed(), packed, *other._by_node,
                                  np.arange(n + 1, dtype=INT), np.zeros(n, dtype=INT), node_weight,
                                  len(other), 1, lam, sigma)
        sums = K[:, 0]
        if normalize:
            sums /= np.sqrt(other.self_kernels(lam, sigma))
        return sums


def _offsets(sorted_keys: np.ndarray, n: int) -> np.ndarray:
    return np.searchsorted(sorted_keys, np.arange(n + 1)).astype(INT)

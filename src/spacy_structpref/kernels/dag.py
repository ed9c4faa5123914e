"""Hash-consed tree sets: candidate sets (k-best lists, attachment
alternatives, incremental prefix trees) share most subtrees. Storing each
distinct subtree once turns a set into a DAG, and a kernel block between two
sets then computes Δ once per distinct node pair (SPEC §5)."""
import operator
from collections.abc import Sequence
from typing import Dict, List, Optional, Tuple

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError
from ..trees.arrays import INT, SymbolTable, TreeArrays
from . import _kernels
from .inputs import check_lambda, check_sigma, shared_symbols, tree_list
from .trees import pack


class TreeSetDAG(Sequence):
    """A list of trees stored as one DAG of distinct subtrees.

    A subtree is identified by its production and its node children's DAG
    ids (words are part of the production), so equal subtrees anywhere in
    the set share one DAG node; DAG ids are topological (children first).
    Per tree only its root and its nodes' occurrence counts are kept:
    ``kernel_block(other)`` gives the matrix of tree kernels between two
    sets, ``self[i]`` rebuilds tree i. Builders that know the shared
    structure can skip trees altogether: ``intern`` nodes, then ``add_root``.
    """

    def __init__(self, trees=(), symbols: Optional[SymbolTable] = None) -> None:
        trees = list(trees)
        self.symbols = shared_symbols(trees, symbols)
        self._ids: Dict[Tuple[int, Tuple[int, ...]], int] = {}
        self._prod: List[int] = []
        self._kids: List[Tuple[int, ...]] = []
        self._occ: List[Dict[int, int]] = []
        self.roots: List[int] = []  # DAG node of each tree's root
        self._arrays = self._packed = None
        self._folded = None  # the last weights folded into node weights (see _node_weights)
        self._self: Dict[Tuple[float, float], np.ndarray] = {}  # self-kernels of the first trees
        for t in trees:
            self.add(t)

    def intern(self, prod: int, kids: Sequence[int]) -> int:
        """The DAG id of the node with production ``prod`` and node children
        ``kids`` (DAG ids, in order), created if new."""
        key = (prod, tuple(kids))
        d = self._ids.get(key)
        if d is None:
            if not 0 <= prod < len(self.symbols.productions):
                raise StructPrefError(f"production {prod} is not in the SymbolTable")
            arity = sum(1 for c in self.symbols.productions[prod][1] if c >= 0)
            if len(key[1]) != arity or not all(0 <= k < len(self._prod) for k in key[1]):
                raise StructPrefError(f"{self.symbols.production_str(prod)!r} needs {arity} node "
                                      f"children among the {len(self._prod)} DAG nodes, got {key[1]}")
            d = self._ids[key] = len(self._prod)
            self._prod.append(prod)
            self._kids.append(key[1])
            self._arrays = self._packed = self._folded = None
        return d

    def intern_tree(self, tree: Tree) -> int:
        """Hash-cons an nltk Tree's nodes (post-order); returns its root's DAG id."""
        symbols = self.symbols
        # iterative: deep trees must not hit the recursion limit; entries are
        # (node, its children still to visit, child symbols, node children's DAG ids)
        stack = [(tree, iter(tree), [], [])]
        while True:
            node, rest, syms, ids = stack[-1]
            for kid in rest:
                if isinstance(kid, Tree):
                    stack.append((kid, iter(kid), [], []))
                    break
                syms.append(-(symbols.word_id(str(kid)) + 1))
            else:
                stack.pop()
                if not syms:
                    raise StructPrefError(f"constituent {node.label()!r} has no children")
                label = symbols.label_id(node.label())
                d = self.intern(symbols.production_id(label, syms), ids)
                if not stack:
                    return d
                stack[-1][2].append(label)
                stack[-1][3].append(d)

    def _intern_arrays(self, tree: TreeArrays) -> int:
        local: List[int] = []
        refs, cs = tree.children.tolist(), tree.child_start.tolist()
        for i, p in enumerate(tree.prod.tolist()):
            local.append(self.intern(p, [local[c] for c in refs[cs[i]:cs[i + 1]] if c >= 0]))
        return local[-1]

    def add_root(self, root: int) -> int:
        """Add the tree whose root is DAG node ``root``; returns its index."""
        if not 0 <= root < len(self._prod):
            raise StructPrefError(f"no DAG node {root}: the DAG has {len(self._prod)} nodes")
        seen, stack = {root}, [root]
        while stack:
            for k in self._kids[stack.pop()]:
                if k not in seen:
                    seen.add(k)
                    stack.append(k)
        occ = dict.fromkeys(seen, 0)
        occ[root] = 1
        # parents have larger ids: descending order passes each count on complete
        for u in sorted(seen, reverse=True):
            for k in self._kids[u]:
                occ[k] += occ[u]
        return self._add_tree(root, occ)

    def _add_tree(self, root: int, occ: Dict[int, int]) -> int:
        self.roots.append(root)
        self._occ.append(occ)
        self._packed = self._folded = None
        return len(self.roots) - 1

    def add(self, tree) -> int:
        """Add one tree (anything the kernels accept); returns its index."""
        if isinstance(tree, Tree):
            return self.add_root(self.intern_tree(tree))
        (tree,) = tree_list([tree], self.symbols)
        return self.add_root(self._intern_arrays(tree))

    @classmethod
    def join(cls, parts: Sequence["TreeSetDAG"], symbols: Optional[SymbolTable] = None) -> "TreeSetDAG":
        """The trees of ``parts`` in order, as one DAG: each part's nodes are
        re-interned children first; cached self-kernels are carried over."""
        parts = list(parts)
        out = cls(symbols=symbols if symbols is not None else parts[0].symbols if parts else None)
        for part in parts:
            if part.symbols is not out.symbols:
                raise StructPrefError("mismatched vocabularies: the tree sets to join use different SymbolTables")
            remap: List[int] = []
            for prod, kids in zip(part._prod, part._kids):
                remap.append(out.intern(prod, [remap[k] for k in kids]))
            for root, occ in zip(part.roots, part._occ):
                out._add_tree(remap[root], {remap[u]: c for u, c in occ.items()})
        for key in set.intersection(*(set(p._self) for p in parts)) if parts else ():
            if all(len(p._self[key]) == len(p) for p in parts):
                out._self[key] = np.concatenate([p._self[key] for p in parts])
        return out

    def tree(self, i: int) -> Tree:
        """Tree ``i`` as a fresh nltk Tree (words from the productions)."""
        labels, words, productions = self.symbols.labels, self.symbols.words, self.symbols.productions
        # entries: [DAG node, children built so far, node children taken]
        stack = [[self.roots[i], [], 0]]
        while True:
            entry = stack[-1]
            u, built = entry[0], entry[1]
            label, syms = productions[self._prod[u]]
            while len(built) < len(syms) and syms[len(built)] < 0:
                built.append(words[-syms[len(built)] - 1])
            if len(built) < len(syms):
                stack.append([self._kids[u][entry[2]], [], 0])
                entry[2] += 1
                continue
            stack.pop()
            node = Tree(labels[label], built)
            if not stack:
                return node
            stack[-1][1].append(node)

    def __getitem__(self, i) -> Tree:
        i = operator.index(i)
        if not -len(self) <= i < len(self):
            raise IndexError(f"tree {i} of a set of {len(self)}")
        return self.tree(i % len(self))

    def __len__(self) -> int:
        return len(self.roots)

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
        return sum(sum(c.values()) for c in self._occ)

    @property
    def occurrences(self) -> List[Dict[int, int]]:
        """Per tree: how often each of its distinct DAG nodes occurs in it."""
        return self._occ

    def _dag_arrays(self):
        """Production, child offsets and node children of every DAG node."""
        if self._arrays is None:
            kid_off = np.zeros(len(self._prod) + 1, dtype=INT)
            np.cumsum([len(k) for k in self._kids], out=kid_off[1:])
            kids = np.fromiter((c for k in self._kids for c in k), dtype=INT, count=int(kid_off[-1]))
            self._arrays = (np.asarray(self._prod, dtype=INT), kid_off, kids)
        return self._arrays

    def _occurrence_arrays(self, start: int = 0):
        """Trees from ``start`` on: per entry (tree, node, count), tree by tree."""
        occ = self._occ[start:]
        tree_of = np.repeat(np.arange(len(occ)), [len(c) for c in occ])
        node = np.fromiter((u for c in occ for u in c), dtype=INT, count=len(tree_of))
        cnt = np.fromiter((k for c in occ for k in c.values()), dtype=float, count=len(tree_of))
        return tree_of, node, cnt

    def _dag_packed(self):
        if self._packed is None:
            prod, kid_off, kids = self._dag_arrays()
            n = len(prod)
            zeros = np.zeros(n, dtype=INT)
            # the whole DAG as one "tree" (kid_off doubles as child_start: no word refs)
            dag = TreeArrays(zeros, prod, zeros, zeros, kid_off, kids, 0, self.symbols)
            self._packed = pack([dag])
            # per distinct subtree: the trees it occurs in (ascending) and how often
            tree_of, node, cnt = self._occurrence_arrays()
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
        """K(t, t) of every tree, computed on the DAG and cached per (λ, σ)."""
        key = (check_lambda(lam), check_sigma(sigma))
        done = self._self.get(key, np.zeros(0))
        if len(done) < len(self):
            tree_of, node, cnt = self._occurrence_arrays(len(done))
            order = np.lexsort((node, tree_of))  # each tree's nodes ascending: children first
            tree_off = _offsets(tree_of, len(self) - len(done))
            new = _kernels.dag_self_kernels(*self._dag_arrays(), tree_off, node[order], cnt[order],
                                            key[0], key[1])
            done = self._self[key] = np.concatenate([done, new])
        return done

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

    def _node_weights(self, weights: np.ndarray, lam: float, sigma: float, normalize: bool):
        """Σ over the trees holding each DAG node of weight × occurrences. A
        support set is scored against many candidate sets with the same
        weights: the last folding is kept and reused while they are equal."""
        key = (lam, sigma, normalize)
        if self._folded is not None and self._folded[0] == key and \
                np.array_equal(self._folded[1], weights):
            return self._folded[2]
        folded = weights / np.sqrt(self.self_kernels(lam, sigma)) if normalize else weights
        self._dag_packed()
        off, tree_of, cnt = self._by_node
        n = self.n_dag_nodes
        node_weight = np.bincount(np.repeat(np.arange(n), np.diff(off)), cnt * folded[tree_of],
                                  minlength=n)
        self._folded = (key, weights.copy(), node_weight)
        return node_weight

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
        node_weight = self._node_weights(weights, lam, sigma, normalize)
        n = self.n_dag_nodes
        # ``other`` as the rows, this set collapsed into one weighted column
        K, _ = _kernels.dag_block(other._dag_packed(), self._dag_packed(), *other._by_node,
                                  np.arange(n + 1, dtype=INT), np.zeros(n, dtype=INT), node_weight,
                                  len(other), 1, lam, sigma)
        sums = K[:, 0]
        if normalize:
            sums /= np.sqrt(other.self_kernels(lam, sigma))
        return sums


def _offsets(sorted_keys: np.ndarray, n: int) -> np.ndarray:
    return np.searchsorted(sorted_keys, np.arange(n + 1)).astype(INT)

"""Hash-consed tree sets: candidate sets (k-best lists, attachment
alternatives, incremental prefix trees) share most subtrees. Storing each
distinct subtree once turns a set into a DAG, on which a kernel computes Δ
once per distinct node pair (see ``spacy_structpref.kernels.dag``) and a
recursive network computes each distinct subtree once."""
import operator
from itertools import chain
from collections.abc import Sequence
from typing import Dict, Hashable, List, Optional, Tuple

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError
from .arrays import INT, SymbolTable, TreeArrays, offsets
from .convert import shared_symbols, tree_list


class TreeSetDAG(Sequence):
    """A list of trees stored as one DAG of distinct subtrees.

    A subtree is identified by its production and its node children's DAG
    ids (words are part of the production), so equal subtrees anywhere in
    the set share one DAG node; DAG ids are topological (children first).
    Per tree only its root is kept; its nodes' occurrence counts are
    derived when first asked for (in compiled code, for all the trees added
    since); ``self[i]`` rebuilds tree i. Builders that know the shared structure can
    skip trees altogether: ``intern`` nodes, then ``add_root``. A DAG rebuilt
    from arrays (:meth:`from_arrays`) unpacks its nodes into Python lists only
    when something needs them (interning, ``children``, ``self[i]``): the
    kernels read the arrays.

    Consumers keep what they derive from the set in two caches: ``cache``
    (emptied whenever a node or a tree is added) and ``per_tree`` (arrays of
    one value per tree, computed for the first trees: adding trees leaves
    them valid, and :meth:`join` concatenates them).
    """

    def __init__(self, trees=(), symbols: Optional[SymbolTable] = None) -> None:
        trees = list(trees)
        self.symbols = shared_symbols(trees, symbols)
        self._ids: Dict[Tuple[int, Tuple[int, ...]], int] = {}
        self._prod: List[int] = []
        self._kids: List[Tuple[int, ...]] = []
        self._packed: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]] = None  # from_arrays, not unpacked yet
        # occurrence arrays (tree, node, count) of the first _occ_done trees, tree by tree
        self._occ_done = 0
        self._occ = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=INT), np.zeros(0))
        self.roots: List[int] = []  # DAG node of each tree's root
        self.cache: Dict[Hashable, object] = {}
        self.per_tree: Dict[Hashable, np.ndarray] = {}
        self._shared_per_tree = False  # per_tree is also a kept set's (from_arrays): copied before adding a tree
        for t in trees:
            self.add(t)

    def intern(self, prod: int, kids: Sequence[int]) -> int:
        """The DAG id of the node with production ``prod`` and node children
        ``kids`` (DAG ids, in order), created if new."""
        if self._packed is not None:  # checked here, not by a call: interning is the hot path
            self._unpack()
        key = (prod, tuple(kids))
        d = self._ids.get(key)
        if d is None:
            kids, d = key[1], len(self._prod)
            if not 0 <= prod < len(self.symbols.productions):
                raise StructPrefError(f"production {prod} is not in the SymbolTable")
            if len(kids) != self.symbols.node_arity(prod) or (kids and (min(kids) < 0 or max(kids) >= d)):
                raise StructPrefError(f"{self.symbols.production_str(prod)!r} needs "
                                      f"{self.symbols.node_arity(prod)} node children among the {d} DAG "
                                      f"nodes, got {kids}")
            self._ids[key] = d
            self._prod.append(prod)
            self._kids.append(kids)
            if self.cache:
                self.cache.clear()
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
        if not 0 <= root < self.n_dag_nodes:
            raise StructPrefError(f"no DAG node {root}: the DAG has {self.n_dag_nodes} nodes")
        if self._shared_per_tree:
            self.per_tree, self._shared_per_tree = dict(self.per_tree), False
        self.roots.append(int(root))
        self.cache.clear()
        return len(self.roots) - 1

    def add(self, tree) -> int:
        """Add one tree (an nltk Tree, or anything the kernels accept: a
        bracket string, a Doc with constituents, TreeArrays); returns its index."""
        if isinstance(tree, Tree):
            return self.add_root(self.intern_tree(tree))
        (tree,) = tree_list([tree], self.symbols)
        return self.add_root(self._intern_arrays(tree))

    @classmethod
    def join(cls, parts: Sequence["TreeSetDAG"], symbols: Optional[SymbolTable] = None) -> "TreeSetDAG":
        """The trees of ``parts`` in order, as one DAG: each part's nodes are
        re-interned children first; per-tree values every part holds in full
        are carried over."""
        parts = list(parts)
        out = cls(symbols=symbols if symbols is not None else parts[0].symbols if parts else None)
        for part in parts:
            if part.symbols is not out.symbols:
                raise StructPrefError("mismatched vocabularies: the tree sets to join use different SymbolTables")
            remap: List[int] = []
            for prod, kids in zip(part.productions, part.children):
                remap.append(out.intern(prod, [remap[k] for k in kids]))
            for root in part.roots:
                out.add_root(remap[root])
        for key in set.intersection(*(set(p.per_tree) for p in parts)) if parts else ():
            if all(len(p.per_tree[key]) == len(p) for p in parts):
                out.per_tree[key] = np.concatenate([p.per_tree[key] for p in parts])
        return out

    def to_arrays(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`dag_arrays` and the trees' roots, as int32 arrays: a few
        bytes a node, where the DAG object holds a dict entry and a tuple
        per node. A learner that passes over the same sets many times keeps
        these and rebuilds with :meth:`from_arrays`."""
        return (*self.dag_arrays(), np.asarray(self.roots, dtype=INT))

    @classmethod
    def from_arrays(cls, symbols: SymbolTable, prod: np.ndarray, kid_off: np.ndarray, kids: np.ndarray,
                    roots: np.ndarray, per_tree: Optional[Dict[Hashable, np.ndarray]] = None) -> "TreeSetDAG":
        """The DAG :meth:`to_arrays` gave, over the ``symbols`` it was built
        with (its productions are not checked again: they were when interned).
        ``per_tree``, kept beside the arrays, is shared: what consumers derive
        per tree (self-kernels) lands there for the next DAG rebuilt from the
        same arrays, until a tree is added (the DAG then takes a copy)."""
        out = cls(symbols=symbols)
        if per_tree is not None:
            out.per_tree, out._shared_per_tree = per_tree, True
        out._packed = (prod, kid_off, kids)
        out.roots = roots.tolist()
        return out

    def _unpack(self) -> None:
        """The nodes of :meth:`from_arrays`' arrays as the lists and index
        that interning extends (once: nothing to do after)."""
        if self._packed is None:
            return
        prod, kid_off, kids = self._packed
        self._packed = None
        flat, bounds = kids.tolist(), kid_off.tolist()
        self._prod = prod.tolist()
        self._kids = [tuple(flat[a:b]) for a, b in zip(bounds, bounds[1:])]
        self._ids = dict(zip(zip(self._prod, self._kids), range(len(self._prod))))
        self.cache.setdefault("dag_arrays", (prod, kid_off, kids))  # what dag_arrays would compute again

    def tree(self, i: int) -> Tree:
        """Tree ``i`` as a fresh nltk Tree (words from the productions)."""
        self._unpack()
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
        return len(self._packed[0]) if self._packed is not None else len(self._prod)

    @property
    def productions(self) -> List[int]:
        """Production id of each DAG node (children come before parents)."""
        self._unpack()
        return self._prod

    @property
    def children(self) -> List[Tuple[int, ...]]:
        """Node children (DAG ids) of each DAG node; words are in the production."""
        self._unpack()
        return self._kids

    @property
    def n_tree_nodes(self) -> int:
        return int(self._occurrences()[2].sum())

    @property
    def occurrences(self) -> List[Dict[int, int]]:
        """Per tree: how often each of its distinct DAG nodes occurs in it."""
        tree_of, node, cnt = self._occurrences()
        occ: List[Dict[int, int]] = [{} for _ in self.roots]
        for t, u, c in zip(tree_of.tolist(), node.tolist(), cnt.tolist()):
            occ[t][u] = int(c)
        return occ

    def _occurrences(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Occurrence arrays of every tree, computed for the trees added
        since the last call (adding nodes never changes an existing tree)."""
        if self._occ_done < len(self.roots):
            from ._dag import dag_occurrences  # compiled: loaded on first use (plugin imports stay cheap)

            _, kid_off, kids = self.dag_arrays()
            tree_of, node, cnt = dag_occurrences(kid_off, kids, np.asarray(self.roots[self._occ_done:], dtype=INT))
            tree_of += self._occ_done
            self._occ = tuple(np.concatenate([old, new]) for old, new in zip(self._occ, (tree_of, node, cnt)))
            self._occ_done = len(self.roots)
        return self._occ

    def dag_arrays(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(prod, kid_off, kids)``: production, child offsets and node
        children of every DAG node, as int32 arrays."""
        arrays = self.cache.get("dag_arrays", self._packed)
        if arrays is None:
            kid_off = offsets(np.fromiter(map(len, self._kids), dtype=INT, count=len(self._kids)), INT)
            kids = np.fromiter(chain.from_iterable(self._kids), dtype=INT, count=int(kid_off[-1]))
            arrays = self.cache["dag_arrays"] = (np.asarray(self._prod, dtype=INT), kid_off, kids)
        return arrays

    def occurrence_arrays(self, start: int = 0) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Trees from ``start`` on, one entry per (tree, distinct node):
        ``(tree - start, node, count)``, tree by tree, nodes ascending."""
        tree_of, node, cnt = self._occurrences()
        first = int(np.searchsorted(tree_of, start)) if start else 0
        return tree_of[first:] - start, node[first:], cnt[first:]

"""Compact array form of trees, the shape Cython code works on.

A tree's internal nodes (words are leaves, never nodes) are numbered in
post-order, so children always come before their parent and the root is the
last node. Per node: label id, production id, token span, and a slice
``children[child_start[i]:child_start[i + 1]]`` of child references. A child
reference ``c >= 0`` is an internal node; ``c < 0`` is the word at token index
``-c - 1``.

Label, word and production ids come from a :class:`SymbolTable` shared by all
the trees that are compared with each other (kernels compare production ids).
"""
from itertools import islice
from typing import Dict, Iterable, List, NamedTuple, Sequence, Tuple, Union

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError

INT = np.int32


def offsets(counts, dtype=np.int64) -> np.ndarray:
    """``[0, c0, c0 + c1, …, total]`` for ``counts`` (``len(counts) + 1``
    entries of ``dtype``): where each run of a concatenation starts, and its
    end (the CSR form's offsets)."""
    off = np.zeros(len(counts) + 1, dtype=dtype)
    np.cumsum(counts, out=off[1:])
    return off


def _intern(ids: dict, items: list, key) -> int:
    i = ids.get(key)
    if i is None:
        i = ids[key] = len(items)
        items.append(key)
    return i


def _intern_all(ids: dict, items: list, keys: Iterable) -> List[int]:
    """:func:`_intern` for many keys at C speed: ``ids`` maps ``items`` to
    their positions, so the new keys are the ones the dict gained (read
    from its end: as many steps as new keys, whatever the table's size)."""
    n = len(items)
    out = [ids.setdefault(k, len(ids)) for k in keys]
    items.extend(reversed(list(islice(reversed(ids), len(ids) - n))))
    return out


class ProductionArrays(NamedTuple):
    """Production i is label ``lhs[i]`` over the child symbols
    ``syms[sym_off[i]:sym_off[i + 1]]``, ``node_arity[i]`` of them nodes."""
    lhs: np.ndarray
    sym_off: np.ndarray
    syms: np.ndarray
    node_arity: np.ndarray


class SymbolTable:
    """Interns labels, words and productions to dense integer ids.

    A production is a label plus its children's symbols: a child that is a node
    contributes its label id ``>= 0``, a child that is a word contributes
    ``-(word_id + 1)``, so ``NN -> dog`` and ``NN -> NN`` never collide.
    """

    def __init__(self) -> None:
        self.labels: List[str] = []
        self.words: List[str] = []
        self.productions: List[Tuple[int, Tuple[int, ...]]] = []
        self._label_ids: Dict[str, int] = {}
        self._word_ids: Dict[str, int] = {}
        self._prod_ids: Dict[Tuple[int, Tuple[int, ...]], int] = {}
        self._node_arity: List[int] = []
        self._arrays = ProductionArrays(np.zeros(0, dtype=INT), np.zeros(1, dtype=np.int64),
                                        np.zeros(0, dtype=INT), np.zeros(0, dtype=np.int64))

    def label_id(self, label: str) -> int:
        return _intern(self._label_ids, self.labels, label)

    def word_id(self, word: str) -> int:
        return _intern(self._word_ids, self.words, word)

    def production_id(self, label_id: int, child_symbols: Sequence[int]) -> int:
        key = (int(label_id), tuple(map(int, child_symbols)))
        return _intern(self._prod_ids, self.productions, key)

    def label_ids(self, labels: Iterable[str]) -> List[int]:
        return _intern_all(self._label_ids, self.labels, labels)

    def word_ids(self, words: Iterable[str]) -> List[int]:
        return _intern_all(self._word_ids, self.words, words)

    def production_ids(self, keys: np.ndarray, key_off: np.ndarray) -> List[int]:
        """Ids of many productions, interned in order: production i is label
        ``keys[key_off[i]]`` with child symbols ``keys[key_off[i] + 1:key_off[i + 1]]``."""
        flat, off = keys.tolist(), key_off.tolist()
        return _intern_all(self._prod_ids, self.productions,
                           [(flat[a], tuple(flat[a + 1:b])) for a, b in zip(off, off[1:])])

    def node_arity(self, prod_id: int) -> int:
        """How many of production ``prod_id``'s children are nodes (not
        words); kept per production as productions are added."""
        arity = self._node_arity
        if prod_id >= len(arity):
            arity.extend(sum(1 for c in kids if c >= 0) for _, kids in self.productions[len(arity):])
        return arity[prod_id]

    def production_str(self, prod_id: int) -> str:
        label, kids = self.productions[prod_id]
        rhs = [self.labels[c] if c >= 0 else self.words[-c - 1] for c in kids]
        return f"{self.labels[label]} -> {' '.join(rhs)}"

    def production_arrays(self) -> "ProductionArrays":
        """The productions as arrays, for checking trees against the table in
        bulk. Productions are only ever added, so the arrays are extended by
        the new ones."""
        done = self._arrays
        new = self.productions[len(done.lhs):]
        if new:
            sizes = np.fromiter((len(kids) for _, kids in new), dtype=np.int64, count=len(new))
            syms = np.fromiter((c for _, kids in new for c in kids), dtype=INT, count=int(sizes.sum()))
            nodes = np.bincount(np.repeat(np.arange(len(new)), sizes)[syms >= 0], minlength=len(new))
            self._arrays = ProductionArrays(
                np.concatenate([done.lhs, np.fromiter((lab for lab, _ in new), dtype=INT, count=len(new))]),
                np.concatenate([done.sym_off, done.sym_off[-1] + np.cumsum(sizes)]),
                np.concatenate([done.syms, syms]), np.concatenate([done.node_arity, nodes]))
        return self._arrays

    def __len__(self) -> int:
        return len(self.productions)

    def to_dict(self) -> dict:
        return {
            "labels": list(self.labels),
            "words": list(self.words),
            "productions": [[lab, list(kids)] for lab, kids in self.productions],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "SymbolTable":
        table = cls()
        for label in data["labels"]:
            table.label_id(label)
        for word in data["words"]:
            table.word_id(word)
        for lab, kids in data["productions"]:
            table.production_id(lab, kids)
        return table


class TreeArrays:
    """One tree as flat int32 arrays (see the module docstring)."""

    __slots__ = ("label", "prod", "start", "end", "child_start", "children", "n_words", "symbols")

    def __init__(self, label, prod, start, end, child_start, children, n_words, symbols, check: bool = True):
        """``check``: validate every id against the arrays and ``symbols``
        (:func:`check_tree_arrays`); only code that built the arrays
        consistently (:meth:`from_tree`, views of checked
        :class:`FlatTrees`) skips it."""
        self.label = np.ascontiguousarray(label, dtype=INT)
        self.prod = np.ascontiguousarray(prod, dtype=INT)
        self.start = np.ascontiguousarray(start, dtype=INT)
        self.end = np.ascontiguousarray(end, dtype=INT)
        self.child_start = np.ascontiguousarray(child_start, dtype=INT)
        self.children = np.ascontiguousarray(children, dtype=INT)
        self.n_words = int(n_words)
        self.symbols = symbols
        if check:
            check_tree_arrays("TreeArrays", np.array([0, len(self.label)]), self.label, self.prod, self.start,
                              self.end, self.child_start, self.children, np.array([self.n_words]), symbols)

    @property
    def n_nodes(self) -> int:
        return len(self.label)

    @property
    def root(self) -> int:
        return self.n_nodes - 1

    def child_refs(self, node: int) -> np.ndarray:
        return self.children[self.child_start[node]:self.child_start[node + 1]]

    def is_preterminal(self) -> np.ndarray:
        """Boolean per node: every child is a word."""
        out = np.ones(self.n_nodes, dtype=bool)
        for i in range(self.n_nodes):
            out[i] = bool(np.all(self.child_refs(i) < 0))
        return out

    @classmethod
    def from_tree(cls, tree: Tree, symbols: SymbolTable) -> "TreeArrays":
        if not isinstance(tree, Tree):
            raise StructPrefError(f"expected an nltk.Tree, got {type(tree).__name__}")
        label: List[int] = []
        prod: List[int] = []
        start: List[int] = []
        end: List[int] = []
        child_start: List[int] = [0]
        children: List[int] = []
        n_words = 0
        # Iterative post-order walk: deep trees must not hit the recursion limit.
        # Stack entries: (node, next child position, child refs, child symbols).
        stack = [(tree, 0, [], [])]
        while stack:
            node, i, refs, kid_syms = stack[-1]
            if i < len(node):
                stack[-1] = (node, i + 1, refs, kid_syms)
                kid = node[i]
                if isinstance(kid, Tree):
                    stack.append((kid, 0, [], []))
                else:
                    refs.append(-(n_words + 1))
                    kid_syms.append(-(symbols.word_id(str(kid)) + 1))
                    n_words += 1
                continue
            stack.pop()
            if not refs:
                raise StructPrefError(f"constituent {node.label()!r} has no children")
            lab = symbols.label_id(node.label())
            idx = len(label)
            label.append(lab)
            prod.append(symbols.production_id(lab, kid_syms))
            start.append(start[refs[0]] if refs[0] >= 0 else -refs[0] - 1)
            end.append(end[refs[-1]] if refs[-1] >= 0 else -refs[-1])
            children.extend(refs)
            child_start.append(len(children))
            if stack:
                stack[-1][2].append(idx)
                stack[-1][3].append(lab)
        return cls(label, prod, start, end, child_start, children, n_words, symbols, check=False)

    def to_tree(self, words: Sequence[str] = None) -> Tree:
        """Rebuild an ``nltk.Tree``; words default to the interned production words."""
        built: List[Tree] = []
        for i in range(self.n_nodes):
            kids: List[Union[Tree, str]] = []
            _, kid_syms = self.symbols.productions[self.prod[i]]
            for r, sym in zip(self.child_refs(i), kid_syms):
                if r >= 0:
                    kids.append(built[r])
                else:
                    kids.append(words[-r - 1] if words is not None else self.symbols.words[-sym - 1])
            built.append(Tree(self.symbols.labels[self.label[i]], kids))
        return built[-1]


class FlatTrees:
    """Many trees' :class:`TreeArrays` laid end to end, one SymbolTable: tree
    i's nodes are ``node_off[i]:node_off[i + 1]`` of the per-node arrays
    (``label``, ``prod``, ``start``, ``end``), node g's child refs (local to
    its tree) are ``children[child_off[g]:child_off[g + 1]]``. ``self[i]``
    is tree i as TreeArrays viewing these arrays; ``trees`` lists them all,
    built on first use."""

    __slots__ = ("node_off", "label", "prod", "start", "end", "child_off", "children", "n_words", "symbols",
                 "_trees")

    def __init__(self, node_off, label, prod, start, end, child_off, children, n_words, symbols,
                 trees: List[TreeArrays] = None, check: bool = True):
        self.node_off = np.ascontiguousarray(node_off, dtype=np.int64)
        self.label = np.ascontiguousarray(label, dtype=INT)
        self.prod = np.ascontiguousarray(prod, dtype=INT)
        self.start = np.ascontiguousarray(start, dtype=INT)
        self.end = np.ascontiguousarray(end, dtype=INT)
        self.child_off = np.ascontiguousarray(child_off, dtype=np.int64)
        self.children = np.ascontiguousarray(children, dtype=INT)
        self.n_words = np.ascontiguousarray(n_words, dtype=np.int64)
        self.symbols = symbols
        self._trees = trees
        if check:  # see TreeArrays
            check_tree_arrays("FlatTrees", self.node_off, self.label, self.prod, self.start, self.end,
                              self.child_off, self.children, self.n_words, symbols)

    @classmethod
    def from_trees(cls, trees: Sequence[TreeArrays], symbols: SymbolTable) -> "FlatTrees":
        """Concatenate trees (all built with ``symbols``); ``trees`` stays the given list."""
        trees = list(trees)
        sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
        node_off = offsets(sizes)
        kid_base = offsets([len(t.children) for t in trees])
        child_off = np.empty(int(node_off[-1]) + 1, dtype=np.int64)
        child_off[-1] = kid_base[-1]

        def cat(name):
            return np.concatenate([getattr(t, name) for t in trees]) if trees else np.zeros(0, dtype=INT)

        if trees:
            child_off[:-1] = np.concatenate([t.child_start[:-1] for t in trees]) + np.repeat(kid_base[:-1], sizes)
        return cls(node_off, cat("label"), cat("prod"), cat("start"), cat("end"), child_off, cat("children"),
                   [t.n_words for t in trees], symbols, trees, check=False)  # each tree was checked

    def __len__(self) -> int:
        return len(self.node_off) - 1

    def __getitem__(self, i: int) -> TreeArrays:
        i = range(len(self))[i]
        a, b = int(self.node_off[i]), int(self.node_off[i + 1])
        c = self.child_off[a:b + 1]
        return TreeArrays(self.label[a:b], self.prod[a:b], self.start[a:b], self.end[a:b], c - c[0],
                          self.children[c[0]:c[-1]], self.n_words[i], self.symbols, check=False)

    @property
    def trees(self) -> List[TreeArrays]:
        if self._trees is None:
            self._trees = [self[i] for i in range(len(self))]
        return self._trees


def _offsets(what: str, name: str, off: np.ndarray, total: int) -> None:
    """``off`` rises from 0 to ``total``."""
    if len(off) == 0 or off[0] != 0 or off[-1] != total or np.any(np.diff(off) < 0):
        raise StructPrefError(f"{what} array {name!r} must rise from 0 to {total}")


def first_bad(what: str, name: str, bad: np.ndarray, values: np.ndarray, why: str) -> None:
    """Raise a :class:`StructPrefError` naming array ``name`` of ``what`` at
    its first entry where ``bad`` holds."""
    where = np.flatnonzero(bad)
    if len(where):
        raise StructPrefError(f"{what} array {name!r}: entry {where[0]} ({values[where[0]]}) {why}")


def check_tree_arrays(what: str, node_off, label, prod, start, end, child_off, children, n_words,
                      symbols: SymbolTable) -> None:
    """Raise a :class:`StructPrefError` naming the array unless the trees
    (laid out as in :class:`FlatTrees`; one tree: ``node_off = [0, n]``) are
    consistent, so that the compiled kernels never index out of range:
    label and production ids in ``symbols``; spans within the words; a
    node's child references within its tree, node children numbered below
    their parent; and each node's children those of its production (a tree
    without words, such as a DAG packed for the kernels, holds node children
    only, and its labels are not compared). Vectorised: cheap next to
    building the arrays."""
    if symbols is None:
        raise StructPrefError(f"{what} needs the SymbolTable its ids come from")
    n_trees, n = len(node_off) - 1, len(label)
    _offsets(what, "node_off", node_off, n)
    for name, arr in (("prod", prod), ("start", start), ("end", end)):
        if len(arr) != n:
            raise StructPrefError(f"{what} array {name!r} has {len(arr)} entries for {n} nodes")
    if len(child_off) != n + 1:
        raise StructPrefError(f"{what} array 'child offsets' has {len(child_off)} entries for {n} nodes")
    _offsets(what, "child offsets", child_off, len(children))
    if len(n_words) != n_trees or np.any(n_words < 0):
        raise StructPrefError(f"{what} needs a non-negative word count per tree")
    first_bad(what, "label", (label < 0) | (label >= len(symbols.labels)), label,
              f"is not a label id of the SymbolTable ({len(symbols.labels)} labels)")
    first_bad(what, "prod", (prod < 0) | (prod >= len(symbols.productions)), prod,
              f"is not a production id of the SymbolTable ({len(symbols.productions)} productions)")
    tree_of = np.repeat(np.arange(n_trees), np.diff(node_off))
    words = n_words[tree_of]
    first_bad(what, "start", (start < 0) | (start > end), start, "is negative or after its span's end")
    first_bad(what, "end", end > words, end, "lies past the tree's last word")
    kid_count = np.diff(child_off)
    owner = np.repeat(np.arange(n), kid_count)
    local = owner - node_off[tree_of[owner]]  # the parent's id within its tree
    is_node = children >= 0
    first_bad(what, "children", is_node & (children >= local), children,
              "refers to a node not numbered below its parent")
    first_bad(what, "children", ~is_node & (children < -words[owner]), children,
              "refers to a word outside its tree's sentence")
    lhs, sym_off, syms, node_arity = symbols.production_arrays()
    arity = np.diff(sym_off)
    has_words = words > 0
    counted = np.where(has_words, kid_count, np.bincount(owner[is_node], minlength=n))
    first_bad(what, "children", counted != np.where(has_words, arity[prod], node_arity[prod]), np.arange(n),
              "(a node) does not have its production's children")
    # the counts agree, so each child of a tree with words has its production symbol
    worded = has_words[owner]
    symbol = np.zeros(len(children), dtype=INT)
    symbol[worded] = syms[(sym_off[prod[owner]] + np.arange(len(children)) - child_off[owner])[worded]]
    first_bad(what, "children", worded & (is_node != (symbol >= 0)), children,
              "is a node where its production has a word, or the reverse")
    first_bad(what, "label", has_words & (label != lhs[prod]), label, "is not its production's label")
    kids = worded & is_node
    kid = np.where(kids, node_off[tree_of[owner]] + children, 0)  # a node child's id among all nodes
    first_bad(what, "children", kids & (label[kid] != symbol), children,
              "is a node whose label its parent's production does not have")
    # a tree: every node but the root the child of one node, every word one leaf, spans from the leaves
    is_root = np.zeros(n, dtype=bool)
    is_root[node_off[1:][np.diff(node_off) > 0] - 1] = True
    parents = np.bincount(kid[kids], minlength=n)
    first_bad(what, "children", has_words & (parents != ~is_root), np.arange(n),
              "(a node) is not the child of exactly one node (the root: of none)")
    word_off = offsets(n_words)
    leaves = np.bincount((word_off[tree_of[owner]] - children - 1)[worded & ~is_node], minlength=word_off[-1])
    first_bad(what, "children", leaves != 1, leaves, "(a word's leaves) is not exactly one leaf per word")
    first, last = child_off[:-1][kid_count > 0], child_off[1:][kid_count > 0] - 1
    span = np.zeros((2, n), dtype=np.int64)
    span[:, kid_count > 0] = (np.where(kids[first], start[kid[first]], -children[first] - 1),
                              np.where(kids[last], end[kid[last]], -children[last]))
    first_bad(what, "start", has_words & (kid_count > 0) & (start != span[0]), start,
              "is not its first child's start")
    first_bad(what, "end", has_words & (kid_count > 0) & (end != span[1]), end, "is not its last child's end")


def trees_to_arrays(trees: Iterable[Tree], symbols: SymbolTable = None) -> List[TreeArrays]:
    """Convert many trees against one (new or given) symbol table."""
    symbols = symbols if symbols is not None else SymbolTable()
    return [TreeArrays.from_tree(t, symbols) for t in trees]

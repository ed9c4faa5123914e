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
from typing import Dict, Iterable, List, Sequence, Tuple, Union

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError

INT = np.int32


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

    def label_id(self, label: str) -> int:
        return _intern(self._label_ids, self.labels, label)

    def word_id(self, word: str) -> int:
        return _intern(self._word_ids, self.words, word)

    def production_id(self, label_id: int, child_symbols: Sequence[int]) -> int:
        key = (int(label_id), tuple(int(c) for c in child_symbols))
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

    def production_str(self, prod_id: int) -> str:
        label, kids = self.productions[prod_id]
        rhs = [self.labels[c] if c >= 0 else self.words[-c - 1] for c in kids]
        return f"{self.labels[label]} -> {' '.join(rhs)}"

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

    def __init__(self, label, prod, start, end, child_start, children, n_words, symbols):
        self.label = np.ascontiguousarray(label, dtype=INT)
        self.prod = np.ascontiguousarray(prod, dtype=INT)
        self.start = np.ascontiguousarray(start, dtype=INT)
        self.end = np.ascontiguousarray(end, dtype=INT)
        self.child_start = np.ascontiguousarray(child_start, dtype=INT)
        self.children = np.ascontiguousarray(children, dtype=INT)
        self.n_words = int(n_words)
        self.symbols = symbols

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
        return cls(label, prod, start, end, child_start, children, n_words, symbols)

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
                 trees: List[TreeArrays] = None):
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

    @classmethod
    def from_trees(cls, trees: Sequence[TreeArrays], symbols: SymbolTable) -> "FlatTrees":
        """Concatenate trees (all built with ``symbols``); ``trees`` stays the given list."""
        trees = list(trees)
        sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
        node_off = np.zeros(len(trees) + 1, dtype=np.int64)
        np.cumsum(sizes, out=node_off[1:])
        kid_base = np.zeros(len(trees) + 1, dtype=np.int64)
        np.cumsum([len(t.children) for t in trees], out=kid_base[1:])
        child_off = np.empty(int(node_off[-1]) + 1, dtype=np.int64)
        child_off[-1] = kid_base[-1]

        def cat(name):
            return np.concatenate([getattr(t, name) for t in trees]) if trees else np.zeros(0, dtype=INT)

        if trees:
            child_off[:-1] = np.concatenate([t.child_start[:-1] for t in trees]) + np.repeat(kid_base[:-1], sizes)
        return cls(node_off, cat("label"), cat("prod"), cat("start"), cat("end"), child_off, cat("children"),
                   [t.n_words for t in trees], symbols, trees)

    def __len__(self) -> int:
        return len(self.node_off) - 1

    def __getitem__(self, i: int) -> TreeArrays:
        i = range(len(self))[i]
        a, b = int(self.node_off[i]), int(self.node_off[i + 1])
        c = self.child_off[a:b + 1]
        return TreeArrays(self.label[a:b], self.prod[a:b], self.start[a:b], self.end[a:b], c - c[0],
                          self.children[c[0]:c[-1]], self.n_words[i], self.symbols)

    @property
    def trees(self) -> List[TreeArrays]:
        if self._trees is None:
            self._trees = [self[i] for i in range(len(self))]
        return self._trees


def trees_to_arrays(trees: Iterable[Tree], symbols: SymbolTable = None) -> List[TreeArrays]:
    """Convert many trees against one (new or given) symbol table."""
    symbols = symbols if symbols is not None else SymbolTable()
    return [TreeArrays.from_tree(t, symbols) for t in trees]

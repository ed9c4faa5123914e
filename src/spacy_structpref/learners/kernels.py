"""Kernels as the learners use them: ``prepare`` converts a list of items
once (trees are hash-consed into a DAG, self-kernels cached), ``join``
concatenates prepared lists, ``block`` gives the matrix of kernel values
between two prepared lists and ``weighted_sums`` the vector
``Σ_i w_i K(a_i, b_j)`` summed over parts ``(a, w)`` (a learner's utilities
over a support held in several prepared lists);
``encode``/``decode`` (items as msgpack-ready data) let a learner save its
support, and ``settings`` is what a saved support is checked against."""
from collections.abc import Sequence as SequenceABC
from typing import Optional, Tuple

import numpy as np
from nltk.tree import Tree

from ..errors import SavedModelError, StructPrefError, check_number
from ..kernels.composite import reranking_kernel
from ..kernels.dag import dag_kernel_block, dag_weighted_sums_over
from ..kernels.forests import PreparedForest, forest_block
from ..kernels.inputs import check_lambda, check_log_probabilities, check_sigma, check_weight
from ..trees.arrays import SymbolTable
from ..trees.brackets import fold
from ..trees.convert import tree_list
from ..trees.dag import TreeSetDAG
from ..trees.forest import Forest


class TreeKernel:
    """Subset-tree (``sigma = 1``) or subtree (``sigma = 0``) kernel with decay
    ``lam``, cosine-normalised when ``normalize``; items are anything the
    kernels accept (nltk Trees, bracket strings, Docs, TreeArrays); a whole
    set may also come as a TreeSetDAG built with ``symbols``. Prepared
    lists are :class:`~spacy_structpref.trees.TreeSetDAG` objects: Δ is
    computed once per pair of distinct subtrees, and a support set's weights
    are folded into its DAG nodes, so utilities cost what the distinct
    subtrees cost, however many support trees share them."""

    def __init__(self, lam: float = 0.4, sigma: float = 1, normalize: bool = True,
                 symbols: Optional[SymbolTable] = None):
        self.lam, self.sigma = check_lambda(lam), check_sigma(sigma)
        self.normalize = normalize
        self.symbols = symbols if symbols is not None else SymbolTable()

    def prepare(self, items) -> TreeSetDAG:
        """A TreeSetDAG of the items; one given (e.g. ``PreferenceSet.dag``) is
        used as it is, and must be built with this kernel's ``symbols``."""
        if not isinstance(items, TreeSetDAG):
            return TreeSetDAG(items, self.symbols)
        if items.symbols is not self.symbols:
            raise StructPrefError("mismatched vocabularies: build candidate DAGs with the kernel's "
                                  "SymbolTable (kernel.symbols)")
        return items

    def join(self, parts) -> TreeSetDAG:
        return TreeSetDAG.join(parts, self.symbols)

    def block(self, a: TreeSetDAG, b: TreeSetDAG) -> np.ndarray:
        return dag_kernel_block(a, b, self.lam, self.sigma, self.normalize)

    def weighted_sums(self, parts, b: TreeSetDAG) -> np.ndarray:
        return dag_weighted_sums_over(parts, b, self.lam, self.sigma, self.normalize)

    def settings(self) -> dict:
        return {"kind": "tree", "lam": self.lam, "sigma": self.sigma, "normalize": self.normalize}

    def encode(self, items) -> list:
        """Trees as flat pre-order lists (words exact, not escaped; see
        ``_encode_tree``); nltk Trees (a perceptron's support) as they are,
        other items through the kernels' conversion."""
        items = list(items)
        others = iter(tree_list([t for t in items if not isinstance(t, Tree)], self.symbols))
        return [_encode_tree(t if isinstance(t, Tree) else next(others).to_tree()) for t in items]

    def decode(self, data: list) -> list:
        return [_decode_tree(x) for x in data]


class LinearKernel:
    """Dot products of explicit feature vectors (rows)."""

    def prepare(self, items) -> np.ndarray:
        return np.atleast_2d(np.asarray(items, dtype=float))

    def join(self, parts) -> np.ndarray:
        return np.vstack(parts)

    def block(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a @ b.T

    def weighted_sums(self, parts, b: np.ndarray) -> np.ndarray:
        return sum(((np.asarray(weights, dtype=float) @ a) @ b.T for a, weights in parts), np.zeros(len(b)))

    def settings(self) -> dict:
        return {"kind": "linear"}

    def encode(self, items) -> list:
        return np.asarray(items, dtype=float).tolist()

    def decode(self, data: list) -> list:
        rows = [np.asarray(x, dtype=float) for x in data]
        if any(row.ndim != 1 or len(row) != len(rows[0]) for row in rows):
            raise SavedModelError("saved feature vectors must be rows of one length")
        return rows


class ScoredTrees(SequenceABC):
    """A candidate set for :class:`CompositeKernel`: trees (a TreeSetDAG, e.g.
    a parser's k-best list, or a list) with each tree's log probability;
    candidate i is ``(trees[i], log_p[i])``."""

    def __init__(self, trees, log_p):
        self.trees, self.log_p = trees, check_log_probabilities(log_p, len(trees))

    def __len__(self) -> int:
        return len(self.trees)

    def __getitem__(self, i: int) -> Tuple[object, float]:
        return self.trees[i], float(self.log_p[i])


class CompositeKernel:
    """The reranking kernel ``K((x, log p), (x', log p')) = K(x, x') + b · log
    p · log p'`` (Collins & Duffy 2002; Menchetti et al. 2005, eq. 17) over
    another learner kernel K (a :class:`TreeKernel`: K_λ). Items are ``(tree,
    log_p)`` pairs; a whole set may also come as :class:`ScoredTrees` or as a
    ``(TreeSetDAG, log_p array)`` pair. Prepared lists are ``(prepared trees,
    log_p array)`` pairs."""

    def __init__(self, tree_kernel, b: float = 0.2):
        self.tree_kernel, self.b = tree_kernel, check_weight(b)

    @property
    def symbols(self) -> SymbolTable:
        """The tree kernel's SymbolTable: build candidate DAGs with it."""
        return self.tree_kernel.symbols

    def prepare(self, items) -> Tuple[object, np.ndarray]:
        if isinstance(items, ScoredTrees):
            trees, log_p = items.trees, items.log_p
        elif isinstance(items, tuple) and len(items) == 2 and isinstance(items[0], TreeSetDAG):
            trees, log_p = items
        else:
            pairs = list(items)
            trees, log_p = [x for x, _ in pairs], [p for _, p in pairs]
        return self.tree_kernel.prepare(trees), check_log_probabilities(log_p, len(trees))

    def join(self, parts) -> Tuple[object, np.ndarray]:
        return (self.tree_kernel.join([trees for trees, _ in parts]),
                np.concatenate([log_p for _, log_p in parts]))

    def block(self, x, y) -> np.ndarray:
        return reranking_kernel(self.tree_kernel.block(x[0], y[0]), x[1], y[1], self.b)

    def weighted_sums(self, parts, y) -> np.ndarray:
        # Σ_i w_i (K_ij + b lp_i lp'_j) = Σ_i w_i K_ij + b (Σ_i w_i lp_i) lp'_j, over every part
        parts = [(x, np.asarray(weights, dtype=float)) for x, weights in parts]
        return reranking_kernel(self.tree_kernel.weighted_sums([(x[0], w) for x, w in parts], y[0]),
                                sum((w @ x[1] for x, w in parts), 0.0), y[1], self.b)

    def settings(self) -> dict:
        return {"kind": "composite", "b": self.b, "tree_kernel": self.tree_kernel.settings()}

    def encode(self, items) -> list:
        items = list(items)
        trees = self.tree_kernel.encode([tree for tree, _ in items])
        return [[tree, float(p)] for tree, (_, p) in zip(trees, items)]

    def decode(self, data: list) -> list:
        return list(zip(self.tree_kernel.decode([tree for tree, _ in data]), (p for _, p in data)))


def _encode_tree(tree: Tree) -> list:
    """The tree in pre-order, a node as ``[label, number of children]``, a
    word as itself: flat, since msgpack refuses nesting past 511 levels."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Tree):
            out.append([node.label(), len(node)])
            stack.extend(reversed(node))
        else:
            out.append(node)
    return out


def _decode_tree(data: list) -> Tree:
    node_item = (list, tuple)  # msgpack may hand sequences back as tuples
    if data and isinstance(data[0], str):  # saved as nested [label, child, ...] lists before
        return fold(data, lambda x, kids: x if kids is None else Tree(x[0], kids),
                    lambda x: x[1:] if isinstance(x, node_item) else None)
    root = None
    stack = []  # [node, children still to come]
    for item in data:
        is_node = isinstance(item, node_item)
        if is_node and not (len(item) == 2 and isinstance(item[0], str) and type(item[1]) is int and item[1] > 0):
            raise SavedModelError(f"a saved tree holds {item!r} where a [label, number of children] node belongs")
        if root is not None and not stack:
            raise SavedModelError("a saved tree goes on after its root is complete")
        node = Tree(item[0], []) if is_node else item
        if stack:
            stack[-1][0].append(node)
            stack[-1][1] -= 1
        else:
            root = node
        if is_node:
            stack.append([node, item[1]])
        while stack and not stack[-1][1]:
            stack.pop()
    if stack or not isinstance(root, Tree):
        raise SavedModelError("a saved tree is cut short")
    return root


class ForestKernel:
    """A learner kernel over packed (sub-)forests: Zhang et al.'s forest
    kernel with decay ``lam``, cosine-normalised when ``normalize``. Items
    are :class:`~spacy_structpref.trees.Forest` objects interned in
    ``symbols`` (for reranking,
    :func:`~spacy_structpref.reranking.forest_kernel.compatible_subforest` of a
    candidate, already tempered by ``alpha``: the kernel keeps α so that a
    saved support is checked against it). Each kernel value is one forest
    kernel: a support of n forests costs n evaluations per candidate."""

    def __init__(self, lam: float = 0.4, alpha: float = 1.0, normalize: bool = True,
                 symbols: SymbolTable = None):
        alpha = check_number("the tempering exponent α", alpha, 0.0, above=True)
        self.lam, self.alpha, self.normalize = check_lambda(lam), alpha, normalize
        self.symbols = symbols if symbols is not None else SymbolTable()

    def prepare(self, items) -> list:
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
        return forest_block(a, b, self.lam, progress=False) / np.outer(self._norms(a), self._norms(b))

    def weighted_sums(self, parts, b) -> np.ndarray:
        # a zero weight costs no kernel row
        used = [(a[i], w) for a, weights in parts
                for i, w in enumerate(np.asarray(weights, dtype=float) / self._norms(a)) if w]
        K = forest_block([f for f, _ in used], b, self.lam, progress=False)
        return np.array([sum(w * K[k, j] for k, (_, w) in enumerate(used)) for j in range(len(b))]) / self._norms(b)

    def settings(self) -> dict:
        return {"kind": "forest", "lam": self.lam, "alpha": self.alpha, "normalize": self.normalize}

    def encode(self, items) -> list:
        return [(item.forest if hasattr(item, "forest") else item).to_dict() for item in items]

    def decode(self, data: list) -> list:
        return [Forest.from_dict(d, self.symbols).compute_inside_outside() for d in data]

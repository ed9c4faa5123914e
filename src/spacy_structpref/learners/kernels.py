"""Kernels as the learners use them: ``prepare`` converts a list of items
once (trees are hash-consed into a DAG, self-kernels cached), ``join``
concatenates prepared lists, ``block`` gives the matrix of kernel values
between two prepared lists and ``weighted_sum`` the vector
``Σ_i w_i K(a_i, b_j)`` (a learner's utilities over its support);
``to_dict``/:func:`kernel_from_dict` and ``encode``/``decode`` (items as
msgpack-ready data) let a learner save its support."""
from typing import Optional

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError
from ..kernels import TreeSetDAG
from ..kernels.inputs import check_lambda, check_sigma, tree_list
from ..trees.arrays import SymbolTable


class TreeKernel:
    """Subset-tree (``sigma = 1``) or subtree (``sigma = 0``) kernel with decay
    ``lam``, cosine-normalised when ``normalize``; items are anything the
    kernels accept (nltk Trees, bracket strings, Docs, TreeArrays); a whole
    set may also come as a TreeSetDAG built with ``symbols``. Prepared
    lists are :class:`~spacy_structpref.kernels.TreeSetDAG` objects: Δ is
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
        return a.kernel_block(b, self.lam, self.sigma, self.normalize)

    def weighted_sum(self, a: TreeSetDAG, weights, b: TreeSetDAG) -> np.ndarray:
        return a.weighted_sums(weights, b, self.lam, self.sigma, self.normalize)

    def to_dict(self) -> dict:
        return {"kind": "tree", "lam": self.lam, "sigma": self.sigma, "normalize": self.normalize}

    def encode(self, items) -> list:
        """Trees as nested ``[label, child, ...]`` lists (words exact, not escaped)."""
        return [_nested(t.to_tree()) for t in tree_list(items, self.symbols)]

    def decode(self, data: list) -> list:
        return [_from_nested(x) for x in data]


class LinearKernel:
    """Dot products of explicit feature vectors (rows)."""

    def prepare(self, items) -> np.ndarray:
        return np.atleast_2d(np.asarray(items, dtype=float))

    def join(self, parts) -> np.ndarray:
        return np.vstack(parts)

    def block(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a @ b.T

    def weighted_sum(self, a: np.ndarray, weights, b: np.ndarray) -> np.ndarray:
        return (np.asarray(weights, dtype=float) @ a) @ b.T

    def to_dict(self) -> dict:
        return {"kind": "linear"}

    def encode(self, items) -> list:
        return np.asarray(items, dtype=float).tolist()

    def decode(self, data: list) -> list:
        return [np.asarray(x, dtype=float) for x in data]


def kernel_from_dict(data: dict, symbols: Optional[SymbolTable] = None):
    """The kernel ``to_dict`` described; a tree kernel uses ``symbols`` (default: a new table)."""
    kind = data.get("kind")
    if kind == "tree":
        return TreeKernel(data["lam"], data["sigma"], data["normalize"], symbols=symbols)
    if kind == "linear":
        return LinearKernel()
    raise StructPrefError(f"unknown learner kernel {kind!r} (expected 'tree' or 'linear')")


def _nested(tree: Tree) -> list:
    return [tree.label()] + [_nested(k) if isinstance(k, Tree) else k for k in tree]


def _from_nested(data: list) -> Tree:
    return Tree(data[0], [_from_nested(k) if isinstance(k, list) else k for k in data[1:]])

"""Kernels as the learners use them: ``prepare`` converts a list of items
once (trees are packed, self-kernels cached), ``block`` gives the matrix of
kernel values between two prepared lists."""
from typing import Optional

import numpy as np

from ..kernels import TreeBatch, gram
from ..kernels.inputs import check_lambda, check_sigma
from ..trees.arrays import SymbolTable


class TreeKernel:
    """Subset-tree (``sigma = 1``) or subtree (``sigma = 0``) kernel with decay
    ``lam``, cosine-normalised when ``normalize``; items are anything the
    kernels accept (nltk Trees, bracket strings, Docs, TreeArrays)."""

    def __init__(self, lam: float = 0.4, sigma: float = 1, normalize: bool = True,
                 n_threads: int = 1, symbols: Optional[SymbolTable] = None):
        self.lam, self.sigma = check_lambda(lam), check_sigma(sigma)
        self.normalize = normalize
        self.n_threads = n_threads
        self.symbols = symbols if symbols is not None else SymbolTable()

    def prepare(self, items) -> TreeBatch:
        return items if isinstance(items, TreeBatch) else TreeBatch(items, self.symbols)

    def block(self, a: TreeBatch, b: TreeBatch) -> np.ndarray:
        return gram(a, b, lam=self.lam, sigma=self.sigma, normalize=self.normalize,
                    n_threads=self.n_threads, progress=False)


class LinearKernel:
    """Dot products of explicit feature vectors (rows)."""

    def prepare(self, items) -> np.ndarray:
        return np.atleast_2d(np.asarray(items, dtype=float))

    def block(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a @ b.T

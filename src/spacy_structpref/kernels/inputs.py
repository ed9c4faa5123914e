"""Checking kernel parameters. (Kernel inputs are converted to arrays by
:mod:`spacy_structpref.trees.convert`.)"""
from ..errors import StructPrefError


def check_lambda(lam: float) -> float:
    lam = float(lam)
    if not 0.0 < lam <= 1.0:
        raise StructPrefError(f"the kernel decay λ must lie in (0, 1], got {lam}")
    return lam


def check_sigma(sigma: float) -> float:
    if sigma not in (0, 1):
        raise StructPrefError(f"sigma must be 1 (subset-tree kernel) or 0 (subtree kernel), got {sigma}")
    return float(sigma)

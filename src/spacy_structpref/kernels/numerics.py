"""Numerics the tree, forest and DAG kernels share: cosine normalisation
that neither overflows nor underflows, the logarithmic recomputation of
values that left the double range, and the error for an unnormalised value
beyond it (kernel values grow like a product over a node's children,
Collins & Duffy 2002, eq. 6)."""
from typing import Tuple

import numpy as np

from ..errors import StructPrefError


def log_parameters(lam: float, sigma: float) -> Tuple[float, float]:
    """λ and σ as the ``Log`` arithmetic of ``_kernels`` takes them."""
    return float(np.log(lam)), 0.0 if sigma else -np.inf


def with_logs(values: np.ndarray, exact_logs) -> np.ndarray:
    """``log(values)``, where a value is not finite ``exact_logs(mask)``
    (the logarithms recomputed without overflow for the entries in mask)."""
    bad = ~np.isfinite(values)
    with np.errstate(divide="ignore"):
        out = np.log(np.where(bad, 1.0, values))
    if bad.any():
        out[bad] = exact_logs(bad)
    return out


def cosine(K: np.ndarray, da: np.ndarray, db: np.ndarray) -> np.ndarray:
    """``K[i, j] / sqrt(da[i] db[j])`` from finite values, in [0, 1]: the
    roots split into mantissa and exponent (the product of two self-kernels
    underflows at λ = 1e-300; scaling by powers of 2 is exact and keeps a
    symmetric K symmetric), rounding above 1 clipped (Cauchy–Schwarz), 0
    for a zero norm."""
    ma, ea = np.frexp(np.sqrt(da))
    mb, eb = np.frexp(np.sqrt(db))
    norm = ma[:, None] * mb[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.ldexp(K, -(ea[:, None] + eb[None, :])) / norm
    return np.clip(np.where(norm > 0, out, 0.0), 0.0, 1.0)


def log_cosine(log_K: np.ndarray, log_da: np.ndarray, log_db: np.ndarray) -> np.ndarray:
    """:func:`cosine` from the logarithms of K and the self-kernels."""
    log_norm = log_da[:, None] / 2 + log_db[None, :] / 2
    with np.errstate(invalid="ignore"):
        out = np.exp(log_K - log_norm)
    return np.clip(np.where(np.isfinite(log_norm), out, 0.0), 0.0, 1.0)


def finite_or_raise(values, what: str):
    """``values`` if all finite, else the error that says the kernel left the double range."""
    if not np.isfinite(values).all():
        raise StructPrefError(
            f"a {what} value is beyond the double range (Δ grows like a product over a node's children: "
            "very wide or repetitive trees): use normalize=True, computed without overflow, or a smaller lam")
    return values

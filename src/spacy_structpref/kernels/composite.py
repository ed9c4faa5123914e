"""The composite reranking kernel (Collins & Duffy 2002; Menchetti et al.
2005, eq. 17): a tree kernel plus the product of the base parser's log
probabilities,

    K_{λ,b}(x1, x2) = K_λ(x1, x2) + b · log p(x1) · log p(x2).

:func:`reranking_kernel` is the equation; :func:`composite_kernel`,
:func:`composite_gram` and the learners' ``CompositeKernel`` all compute it
through that one function; ``b`` must be finite and at least 0, the log
probabilities finite."""
import numpy as np

from ..errors import StructPrefError
from ..trees.forest import Forest
from .inputs import check_log_probabilities, check_weight
from .trees import gram, tree_kernel


def reranking_kernel(K, log_p_a, log_p_b, b: float):
    """``K + b · log p_a ⊗ log p_b`` from tree-kernel values ``K``: scalars
    (one pair), or a matrix with a vector of log probabilities per side; a
    side may also be one scalar (e.g. a weighted sum ``Σ_i w_i log p_i``
    against a vector of sums ``K``). A value beyond the double range (log
    probabilities of magnitude near 1e154) is a StructPrefError."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = K + float(b) * np.multiply.outer(log_p_a, log_p_b)
    if not np.isfinite(out).all():
        raise StructPrefError("the reranking kernel's b · log p · log p' is beyond the double range: "
                              "the log probabilities are not those of a parser")
    return out


def composite_kernel(x1, x2, log_p1: float, log_p2: float, lam: float = 0.4, b: float = 0.2,
                     normalize: bool = False, sigma: float = 1) -> float:
    """Reranking kernel ``K_λ(x1, x2) + b · log p(x1) · log p(x2)``;
    trees or forests (then the forest kernel is K)."""
    b = check_weight(b)
    log_p1, log_p2 = check_log_probabilities([log_p1, log_p2], 2)
    if isinstance(x1, Forest) or isinstance(x2, Forest):
        from .forests import forest_kernel

        if sigma != 1:
            raise StructPrefError("the forest kernel is a subset-tree kernel: sigma must be 1")
        k = forest_kernel(x1, x2, lam=lam, normalize=normalize)
    else:
        k = tree_kernel(x1, x2, lam=lam, sigma=sigma, normalize=normalize)
    return float(reranking_kernel(k, float(log_p1), float(log_p2), b))


def composite_gram(A, log_p_a, B=None, log_p_b=None, lam: float = 0.4, b: float = 0.2,
                   normalize: bool = True, **kwargs) -> np.ndarray:
    """:func:`~.trees.gram` plus ``b · log p · log p'`` for every pair."""
    b = check_weight(b)
    K = gram(A, B, lam=lam, normalize=normalize, **kwargs)
    log_p_a = check_log_probabilities(log_p_a, K.shape[0])
    log_p_b = log_p_a if B is None else check_log_probabilities(log_p_b, K.shape[1])
    return reranking_kernel(K, log_p_a, log_p_b, b)

"""Checking kernel parameters, and the cap on the size of a tree or forest
whose kernel is computed. (Kernel inputs are converted to arrays by
:mod:`spacy_structpref.trees.convert`.)

The Collins–Duffy recursion keeps a table of Δ over the node pairs of two
trees (forests: of D over their node pairs, Zhang et al. 2010), n1 × n2
doubles: two trees of 20,000 nodes need 4.8 GB. Trees and forests of more
than ``max_nodes`` nodes (:data:`MAX_NODES` unless given) are refused with
an error that says so; the parsers' length bounds keep their outputs far
below it."""
import numpy as np

from ..errors import StructPrefError, check_count, check_number

MAX_NODES = 10_000


def check_lambda(lam) -> float:
    return check_number("the kernel decay λ", lam, 0.0, 1.0, above=True)


def check_sigma(sigma) -> float:
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.integer, np.floating)) or sigma not in (0, 1):
        raise StructPrefError(f"sigma must be 1 (subset-tree kernel) or 0 (subtree kernel), got {sigma!r}")
    return float(sigma)


def check_weight(b) -> float:
    """The weight ``b`` of ``log p · log p'`` in the reranking kernel: finite, at least 0."""
    return check_number("the weight b of log p · log p'", b, 0.0)


def check_threads(n_threads) -> int:
    return check_count("n_threads", n_threads, 1)


def check_max_nodes(max_nodes) -> int:
    return check_count("max_nodes", max_nodes, 1)


def check_log_probabilities(log_p, n: int) -> np.ndarray:
    """``n`` finite log probabilities as a float array (a candidate of
    probability 0, or NaN, cannot be scored)."""
    try:
        log_p = np.asarray(log_p, dtype=float)
    except (TypeError, ValueError):
        raise StructPrefError(f"log probabilities must be numbers, got {log_p!r}") from None
    if log_p.shape != (n,):
        raise StructPrefError(f"need one log probability per candidate: {n} candidates, "
                              f"log probabilities of shape {log_p.shape}")
    if not np.isfinite(log_p).all():
        raise StructPrefError("log probabilities must be finite (a candidate of probability 0 "
                              "cannot be scored)")
    return log_p


def check_sizes(sizes, max_nodes: int, what: str, advice: str) -> None:
    """Refuse (see the module) when the largest of ``sizes`` (node counts
    of ``what``: "tree", "forest") is above ``max_nodes``; ``advice`` says
    how to get smaller ones."""
    largest = int(np.max(sizes, initial=0))
    if largest > max_nodes:
        raise StructPrefError(
            f"a {what} of {largest} nodes is above max_nodes={max_nodes}: its kernel against a {what} of its "
            f"size needs a table of {largest ** 2 * 8 / 1e9:.1f} GB; {advice} or pass a larger max_nodes")

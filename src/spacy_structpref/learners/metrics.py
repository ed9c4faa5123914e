"""The preference-learning metric of Menchetti et al. (2005), eq. 8: ``L_r``
is the fraction of sets whose best element is not ranked in the top ``r``
(``L_1``: the error rate)."""
from typing import Dict, Iterable, Optional, Sequence

import numpy as np

from ..errors import StructPrefError

# Utilities closer than this (relative) count as tied: mathematically equal
# utilities (e.g. two candidates with the same multiset of subtrees) then tie
# whatever order a kernel summed them in.
TIE_TOLERANCE = 1e-9


def at_least(u, reference: float):
    """``u >= reference`` up to :data:`TIE_TOLERANCE` (elementwise for arrays)."""
    return u >= reference - TIE_TOLERANCE * (1.0 + abs(reference))


def gold_rank(utilities: Sequence[float], gold: Optional[int]) -> float:
    """1-based rank of the gold candidate, counting ties (up to
    :data:`TIE_TOLERANCE`) against it (a set whose candidates all score the
    same ranks its gold last); ``inf`` when the set has no gold candidate."""
    if gold is None:
        return float("inf")
    u = np.asarray(utilities, dtype=float)
    if not 0 <= gold < len(u):
        raise StructPrefError(f"gold index {gold} is outside a set of {len(u)} candidates")
    return float(np.count_nonzero(at_least(u, u[gold])))


def loss_at_r(utilities: Iterable[Sequence[float]], gold: Iterable[Optional[int]],
              r: Sequence[int] = (1,)) -> Dict[int, float]:
    """``{r: L_r}`` over the sets, as fractions in [0, 1]."""
    ranks = np.array([gold_rank(u, g) for u, g in zip(utilities, gold)])
    if not len(ranks):
        raise StructPrefError("L_r needs at least one preference set")
    if any(k < 1 for k in r):
        raise StructPrefError(f"r must be >= 1, got {list(r)}")
    return {k: float(np.mean(ranks > k)) for k in r}


def pairwise_error(utilities: Iterable[Sequence[float]], gold: Iterable[Optional[int]]) -> float:
    """The pairwise error of Menchetti et al. (2005), eq. (14), as a fraction:
    of the pairs (best candidate, another candidate of its set), those the
    utilities do not order, ``U(other) >= U(best)`` (ties up to
    :data:`TIE_TOLERANCE` count as errors, as in :func:`gold_rank`, so a set's
    errors are its gold rank − 1). Sets without a gold candidate have no
    pairs and are left out (``L_r`` counts them as errors)."""
    errors = pairs = 0
    for u, g in zip(utilities, gold):
        if g is not None:
            errors += gold_rank(u, g) - 1
            pairs += len(u) - 1
    if not pairs:
        raise StructPrefError("the pairwise error needs a preference set with a gold candidate and a rival")
    return errors / pairs

"""Slow reference for the DISTRO decoders: every label sequence enumerated."""
import itertools

import numpy


def brute_force(S, T, P, gold=None, cost=0.0, allowed=None, mask=None):
    """Best (score, path) over every label sequence, or those allowed by
    ``mask`` (n x M booleans) and ``allowed`` (a forced label, or -1, per position)."""
    n, M = S.shape
    best, arg = -numpy.inf, None
    choices = [numpy.nonzero(row)[0] for row in mask] if mask is not None else [range(M)] * n
    for y in itertools.product(*choices):
        if allowed is not None and any(a >= 0 and a != t for a, t in zip(allowed, y)):
            continue
        s = P[y[0]] + sum(S[i, t] for i, t in enumerate(y)) + sum(T[a, b] for a, b in zip(y, y[1:]))
        if gold is not None:
            s += cost * sum(g >= 0 and g != t for g, t in zip(gold, y))
        if s > best:
            best, arg = s, y
    return best, arg

"""Decoding and the structured hinge loss for :class:`~.distro.DistroScores`.

The hinge loss of one sequence is ``max_y [score(y) + Δ(y, y*)] − score(y*)``
with Δ the Hamming distance, computed by loss-augmented Viterbi. Tokens whose
gold label is unknown (-1) carry no cost and are left free: ``y*`` is then the
best sequence consistent with the known labels (constrained Viterbi).
"""
from typing import Tuple

import numpy

from ..errors import TaggerError
from .distro import DistroScores


def _viterbi():
    from .viterbi import viterbi_batch  # compiled extension: imported on first use

    return viterbi_batch


def _np(x, dtype="f"):
    return numpy.ascontiguousarray(x if isinstance(x, numpy.ndarray) else numpy.asarray(x.get()),
                                   dtype=dtype)


def decode(scores: DistroScores) -> numpy.ndarray:
    """Best label id per token (int32, concatenated over the batch)."""
    paths, _ = _viterbi()(_np(scores.emissions), _np(scores.lengths, "i"),
                          _np(scores.transitions), _np(scores.initial))
    return paths


def sequence_score(scores: DistroScores, labels: numpy.ndarray) -> numpy.ndarray:
    """Score of given label sequences (one per doc), for tests and checks."""
    S, T, P = _np(scores.emissions), _np(scores.transitions), _np(scores.initial)
    out, start = [], 0
    for n in _np(scores.lengths, "i"):
        y = labels[start:start + n]
        s = S[numpy.arange(start, start + n), y].sum() if n else 0.0
        if n:
            s += P[y[0]] + T[y[:-1], y[1:]].sum()
        out.append(s)
        start += n
    return numpy.asarray(out, dtype="f")


def hinge_loss(scores: DistroScores, gold: numpy.ndarray, cost: float = 1.0
               ) -> Tuple[float, Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]]:
    """Summed structured hinge loss of the batch and its subgradient
    ``(dS, dT, dπ)`` (not normalised)."""
    viterbi = _viterbi()
    S, T, P = _np(scores.emissions), _np(scores.transitions), _np(scores.initial)
    lengths = _np(scores.lengths, "i")
    gold = numpy.ascontiguousarray(gold, dtype=numpy.int32)
    if gold.shape != (S.shape[0],):
        raise TaggerError(f"gold must have one label per token ({S.shape[0]}), got {gold.shape}")
    gold_path, gold_score = viterbi(S, lengths, T, P, allowed=gold)
    pred_path, pred_score = viterbi(S, lengths, T, P, cost_gold=gold, cost=cost)
    losses = numpy.maximum(pred_score - gold_score, 0.0)
    M = S.shape[1]
    dS = numpy.zeros_like(S)
    dT = numpy.zeros((M, M), dtype="f")
    dP = numpy.zeros((M,), dtype="f")
    active = numpy.repeat(losses > 0, lengths)
    if active.any():
        rows = numpy.nonzero(active)[0]
        numpy.add.at(dS, (rows, pred_path[rows]), 1.0)
        numpy.add.at(dS, (rows, gold_path[rows]), -1.0)
        starts = numpy.concatenate([[0], numpy.cumsum(lengths)[:-1]]).astype(int)
        first = numpy.zeros(len(S), dtype=bool)
        first[starts[lengths > 0]] = True
        heads = rows[first[rows]]
        numpy.add.at(dP, pred_path[heads], 1.0)
        numpy.add.at(dP, gold_path[heads], -1.0)
        inner = rows[~first[rows]]
        numpy.add.at(dT, (pred_path[inner - 1], pred_path[inner]), 1.0)
        numpy.add.at(dT, (gold_path[inner - 1], gold_path[inner]), -1.0)
    return float(losses.sum()), (dS, dT, dP)

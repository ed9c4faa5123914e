"""Decoding and the structured hinge loss for :class:`~.distro.DistroScores`.

The hinge loss of one sequence is ``max_y [score(y) + Δ(y, y*)] − score(y*)``
with Δ the Hamming distance, computed by loss-augmented Viterbi. Tokens whose
gold label is unknown (-1) carry no cost and are left free: ``y*`` is then the
best sequence consistent with the known labels (constrained Viterbi).

Every function takes an optional candidate ``mask`` (N, M) bool, e.g. from a
:class:`~.tag_dictionary.TagDictionary`: decoding is then restricted to each
token's candidates (:func:`.viterbi.viterbi_restricted`). In the hinge loss the
gold label is always added to its token's candidates, so that the loss stays
>= 0 and its subgradient is that of the restricted problem.
"""
from typing import Optional, Tuple

import numpy

from ..errors import TaggerError
from ..trees.arrays import offsets
from .distro import DistroScores
from .tag_dictionary import candidate_lists, restrict_to


def _viterbi():
    from .viterbi import viterbi_batch  # compiled extension: imported on first use

    return viterbi_batch


def _restricted(S, lengths, T, P, mask, **kwargs):
    from .viterbi import viterbi_restricted

    if mask.shape != S.shape:
        raise TaggerError(f"the candidate mask must be (tokens, labels) = {S.shape}, got {mask.shape}")
    offsets, labels = candidate_lists(mask)
    return viterbi_restricted(S, lengths, T, P, offsets, labels, **kwargs)


def _np(x, dtype="f"):
    return numpy.ascontiguousarray(x if isinstance(x, numpy.ndarray) else numpy.asarray(x.get()),
                                   dtype=dtype)


def decode(scores: DistroScores, mask: Optional[numpy.ndarray] = None) -> numpy.ndarray:
    """Best label id per token (int32, concatenated over the batch), among
    each token's candidates if ``mask`` is given."""
    args = (_np(scores.emissions), _np(scores.lengths, "i"), _np(scores.transitions),
            _np(scores.initial))
    paths, _ = _viterbi()(*args) if mask is None else _restricted(*args, mask)
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


def hinge_loss(scores: DistroScores, gold: numpy.ndarray, cost: float = 1.0,
               mask: Optional[numpy.ndarray] = None
               ) -> Tuple[float, Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]]:
    """Summed structured hinge loss of the batch and its subgradient
    ``(dS, dT, dπ)`` (not normalised), over each token's candidates (plus
    its gold label) if ``mask`` is given."""
    S, T, P = _np(scores.emissions), _np(scores.transitions), _np(scores.initial)
    lengths = _np(scores.lengths, "i")
    gold = numpy.ascontiguousarray(gold, dtype=numpy.int32)
    if gold.shape != (S.shape[0],):
        raise TaggerError(f"gold must have one label per token ({S.shape[0]}), got {gold.shape}")
    if (gold >= S.shape[1]).any():
        raise TaggerError(f"gold labels must be < {S.shape[1]}")
    M = S.shape[1]
    # the gold path: a single candidate where the label is known
    gold_path, gold_score = _restricted(S, lengths, T, P, restrict_to(mask, gold, M, only=True))
    if mask is None:
        pred_path, pred_score = _viterbi()(S, lengths, T, P, cost_gold=gold, cost=cost)
    else:
        pred_path, pred_score = _restricted(S, lengths, T, P,
                                            restrict_to(mask, gold, M, only=False),
                                            cost_gold=gold, cost=cost)
    losses = numpy.maximum(pred_score - gold_score, 0.0)
    dS = numpy.zeros_like(S)
    dT = numpy.zeros((M, M), dtype="f")
    dP = numpy.zeros((M,), dtype="f")
    active = numpy.repeat(losses > 0, lengths)
    if active.any():
        rows = numpy.nonzero(active)[0]
        numpy.add.at(dS, (rows, pred_path[rows]), 1.0)
        numpy.add.at(dS, (rows, gold_path[rows]), -1.0)
        starts = offsets(lengths)[:-1]
        first = numpy.zeros(len(S), dtype=bool)
        first[starts[lengths > 0]] = True
        heads = rows[first[rows]]
        numpy.add.at(dP, pred_path[heads], 1.0)
        numpy.add.at(dP, gold_path[heads], -1.0)
        inner = rows[~first[rows]]
        numpy.add.at(dT, (pred_path[inner - 1], pred_path[inner]), 1.0)
        numpy.add.at(dT, (gold_path[inner - 1], gold_path[inner]), -1.0)
    return float(losses.sum()), (dS, dT, dP)

"""Batched (loss-augmented, constrained) Viterbi against brute-force enumeration."""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.models.decode import hinge_loss, sequence_score
from spacy_structpref.models.distro import DistroScores
from spacy_structpref.models.viterbi import viterbi_batch

from tests.helpers.viterbi_reference import brute_force


@st.composite
def batches(draw):
    M = draw(st.integers(1, 3))
    lengths = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))
    N = sum(lengths)
    floats = st.floats(-3, 3, allow_nan=False, width=32)
    S = numpy.array(draw(st.lists(floats, min_size=N * M, max_size=N * M)), dtype="f").reshape(N, M)
    T = numpy.array(draw(st.lists(floats, min_size=M * M, max_size=M * M)), dtype="f").reshape(M, M)
    P = numpy.array(draw(st.lists(floats, min_size=M, max_size=M)), dtype="f")
    gold = numpy.array(draw(st.lists(st.integers(-1, M - 1), min_size=N, max_size=N)), dtype="i")
    return S, numpy.array(lengths, dtype="i"), T, P, gold


def _split(x, lengths):
    return numpy.split(x, numpy.cumsum(lengths)[:-1])


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from([0.0, 1.0, 2.5]))
def test_viterbi_matches_brute_force(batch, cost):
    S, lengths, T, P, gold = batch
    for kind in ("plain", "augmented", "constrained"):
        kw = {"plain": {}, "augmented": {"cost_gold": gold, "cost": cost},
              "constrained": {"allowed": gold}}[kind]
        paths, best = viterbi_batch(S, lengths, T, P, **kw)
        for b, (Sb, gb, pb) in enumerate(zip(_split(S, lengths), _split(gold, lengths),
                                              _split(paths, lengths))):
            if len(Sb) == 0:
                continue
            ref, _ = brute_force(Sb, T, P,
                                 gold=gb if kind == "augmented" else None, cost=cost,
                                 allowed=gb if kind == "constrained" else None)
            assert best[b] == pytest.approx(ref, abs=1e-3)
            # the returned path achieves the returned score
            got, _ = brute_force(Sb, T, P, gold=gb if kind == "augmented" else None, cost=cost,
                                 allowed=numpy.asarray(pb))
            assert got == pytest.approx(ref, abs=1e-3)


@settings(max_examples=100, deadline=None)
@given(batches())
def test_hinge_loss_matches_brute_force(batch):
    S, lengths, T, P, gold = batch
    gold = numpy.where(gold < 0, 0, gold).astype("i")  # fully labelled
    scores = DistroScores(S, lengths, T, P)
    loss, (dS, dT, dP) = hinge_loss(scores, gold)
    ref = 0.0
    gold_scores = sequence_score(scores, gold)
    for b, (Sb, gb) in enumerate(zip(_split(S, lengths), _split(gold, lengths))):
        if len(Sb):
            ref += brute_force(Sb, T, P, gold=gb, cost=1.0)[0] - gold_scores[b]
    assert loss == pytest.approx(ref, abs=1e-3)
    # the subgradient is a difference of two label-count vectors per doc
    assert dS.sum() == pytest.approx(0.0) and dT.sum() == pytest.approx(0.0)
    assert dP.sum() == pytest.approx(0.0)


def test_hinge_subgradient_by_hand():
    # one doc of two tokens, gold (0, 0); emission favours label 1 at token 1
    S = numpy.array([[0.5, 0.0], [0.0, 3.0]], dtype="f")
    T = numpy.zeros((2, 2), dtype="f")
    P = numpy.zeros(2, dtype="f")
    scores = DistroScores(S, numpy.array([2], dtype="i"), T, P)
    loss, (dS, dT, dP) = hinge_loss(scores, numpy.array([0, 0], dtype="i"))
    # best augmented path (1, 1): 0 + 1 + 3 + 1 = 5 (beats (0, 1): 4.5); gold scores 0.5
    assert loss == pytest.approx(4.5)
    assert dS.tolist() == [[-1, 1], [-1, 1]]
    assert dT.tolist() == [[-1, 0], [0, 1]]
    assert dP.tolist() == [-1, 1]


def test_bad_input_is_rejected():
    S = numpy.zeros((3, 2), dtype="f")
    with pytest.raises(ValueError, match="lengths sum"):
        viterbi_batch(S, [2], numpy.zeros((2, 2)), numpy.zeros(2))
    with pytest.raises(ValueError, match="trans must be"):
        viterbi_batch(S, [3], numpy.zeros((3, 3)), numpy.zeros(2))
    with pytest.raises(ValueError, match="one label per token"):
        hinge_loss(DistroScores(S, numpy.array([3], dtype="i"), numpy.zeros((2, 2), "f"),
                                numpy.zeros(2, "f")), numpy.zeros(2, dtype="i"))

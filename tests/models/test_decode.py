"""The structured hinge loss in DISTRO's multiclass (atomic) case: its
loss-augmented argmax and gradient against brute force."""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.models.decode import hinge_loss
from spacy_structpref.models.distro import DistroScores


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 10**6))
def test_multiclass_loss_augmented_argmax_is_brute_force(M, B, seed):
    # each document is one atomic part: a sequence of length 1
    rng = numpy.random.default_rng(seed)
    S = rng.normal(size=(B, M)).astype("f")
    P = rng.normal(size=M).astype("f")
    gold = rng.integers(0, M, size=B).astype("i")
    cost = float(rng.choice([0.5, 1.0, 2.0]))
    scores = DistroScores(S, numpy.ones(B, "i"), rng.normal(size=(M, M)).astype("f"), P)
    loss, (dS, _, dP) = hinge_loss(scores, gold, cost)
    ref, ref_dS = 0.0, numpy.zeros_like(S)
    for b in range(B):
        aug = [S[b, y] + P[y] + cost * (y != gold[b]) for y in range(M)]
        best = int(numpy.argmax(aug))
        margin = aug[best] - (S[b, gold[b]] + P[gold[b]])
        ref += max(margin, 0.0)
        if margin > 0:
            ref_dS[b, best] += 1
            ref_dS[b, gold[b]] -= 1
    assert loss == pytest.approx(ref, abs=1e-4)
    numpy.testing.assert_allclose(dS, ref_dS)

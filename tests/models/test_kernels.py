"""The compiled kernels of the DISTRO models against numpy: summed embedding
rows (fixed and ragged bags) and the candidate-restricted emission scores."""
import numpy
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.models._sparse import gather_sum, gather_sum_ragged
from spacy_structpref.models.tag_dictionary import candidate_lists
from spacy_structpref.models.viterbi import candidate_emissions


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10**6))
def test_kernels_match_numpy(seed):
    rng = numpy.random.default_rng(seed)
    V, d, N, K, M = 7, int(rng.integers(1, 9)), int(rng.integers(0, 6)), 3, int(rng.integers(1, 9))
    E = rng.normal(size=(V, d)).astype("f")
    rows = rng.integers(0, V, size=(N, K)).astype("i")
    numpy.testing.assert_allclose(gather_sum(E, rows), E[rows].sum(axis=1), atol=1e-5)
    counts = rng.integers(0, 4, size=N)
    flat = rng.integers(0, V, size=counts.sum()).astype("i")
    offsets = numpy.concatenate([[0], numpy.cumsum(counts)]).astype("i")
    ref = numpy.stack([E[flat[a:b]].sum(axis=0) for a, b in zip(offsets, offsets[1:])]) \
        if N else numpy.zeros((0, d), "f")
    numpy.testing.assert_allclose(gather_sum_ragged(E, flat, offsets), ref, atol=1e-5)
    X, A = rng.normal(size=(N, d)).astype("f"), rng.normal(size=(d, M)).astype("f")
    mask = rng.random((N, M)) < 0.5
    mask[numpy.arange(N), rng.integers(0, M, size=N)] = True
    got = candidate_emissions(X, A, *candidate_lists(mask))
    numpy.testing.assert_allclose(got[mask], (X @ A)[mask], atol=1e-4)
    assert (got[~mask & (mask.sum(1) * 4 <= M)[:, None]] == -numpy.inf).all()

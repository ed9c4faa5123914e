"""PPMI–SVD word vectors (spacy_structpref.models.word_vectors) against
brute-force counting, the PMI formula entry by entry and numpy's full SVD."""
import math
from collections import Counter

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.errors import StructPrefError
from spacy_structpref.models.word_vectors import (cooccurrences, ppmi, svd_vectors, train_word_vectors,
                                                  vocabulary)

sentences_strategy = st.lists(st.lists(st.sampled_from("abcdef"), max_size=9), min_size=1, max_size=6)


def brute_counts(sentences, words, window):
    counts = Counter()
    for s in sentences:
        for i, a in enumerate(s):
            for j, b in enumerate(s):
                if i != j and abs(i - j) <= window and a in words and b in words:
                    counts[a, b] += 1.0 / abs(i - j)
    return counts


@settings(max_examples=60, deadline=None)
@given(sentences_strategy, st.integers(1, 4), st.integers(1, 3))
def test_cooccurrences_are_the_weighted_pair_counts(sentences, window, min_count):
    words = vocabulary(sentences, min_count)
    matrix = cooccurrences(sentences, words, window).toarray()
    expected = brute_counts(sentences, set(words), window)
    for i, a in enumerate(words):
        for j, b in enumerate(words):
            assert matrix[i, j] == pytest.approx(expected[a, b])
    assert numpy.allclose(matrix, matrix.T)


def test_vocabulary_orders_by_frequency_then_alphabet():
    assert vocabulary([["b", "a", "c"], ["c", "a", "d"]], 1) == ["a", "c", "b", "d"]
    assert vocabulary([["b", "a", "c"], ["c", "a", "d"]], 2) == ["a", "c"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), min_size=4, max_size=4), min_size=4, max_size=4),
       st.sampled_from([0.5, 0.75, 1.0]))
def test_ppmi_is_the_formula_entry_by_entry(rows, smoothing):
    counts = numpy.asarray(rows, dtype=float)
    counts = counts + counts.T
    result = ppmi(counts, smoothing).toarray()
    word = counts.sum(axis=1)
    context = counts.sum(axis=0) ** smoothing
    for w in range(4):
        for c in range(4):
            if counts[w, c] == 0:
                assert result[w, c] == 0
                continue
            value = math.log(counts[w, c] * context.sum() / (word[w] * context[c]))
            assert result[w, c] == pytest.approx(max(0.0, value), abs=1e-9)


def test_ppmi_of_no_counts_is_empty_and_smoothing_is_checked():
    assert ppmi(numpy.zeros((3, 3))).nnz == 0
    with pytest.raises(StructPrefError, match="smoothing"):
        ppmi(numpy.ones((2, 2)), 0.0)


def test_svd_vectors_span_the_top_singular_subspace():
    rng = numpy.random.default_rng(0)
    matrix = rng.random((30, 30))
    matrix = matrix + matrix.T
    vectors = svd_vectors(matrix, 5, eigenvalue_weight=1.0)
    U, s, _ = numpy.linalg.svd(matrix)
    expected = U[:, :5] * s[:5]
    expected /= numpy.linalg.norm(expected, axis=1, keepdims=True)
    # the same rows up to the sign of each singular direction: equal Gram matrices
    assert numpy.allclose(vectors @ vectors.T, expected @ expected.T, atol=1e-4)
    assert numpy.allclose(numpy.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_svd_dimension_is_bounded_by_the_words():
    with pytest.raises(StructPrefError, match="dim 4 is above the 3 words"):
        svd_vectors(numpy.eye(3), 4)


def test_words_of_one_distribution_end_up_nearer_each_other():
    # "cat"/"dog" and "runs"/"sleeps" fill the same slots: each is nearest its twin
    rng = numpy.random.default_rng(1)
    def pick(*words):
        return words[rng.integers(len(words))]

    sentences = [["the", pick("cat", "dog"), pick("runs", "sleeps"), "today"] for _ in range(300)]
    sentences += [["a", pick("big", "small"), "house", "stands"] for _ in range(300)]
    words, vectors = train_word_vectors(sentences, dim=8, window=1, min_count=1)
    at = {w: i for i, w in enumerate(words)}
    for word, twin in (("cat", "dog"), ("runs", "sleeps"), ("big", "small")):
        similarity = vectors @ vectors[at[word]]
        similarity[at[word]] = -2
        assert words[int(similarity.argmax())] == twin


def test_no_frequent_word_is_an_error():
    with pytest.raises(StructPrefError, match="no word occurs 3 times"):
        train_word_vectors([["a", "b"], ["c"]], dim=1, min_count=3)

"""The Cython forest inside/outside, Viterbi inside and Viterbi merit
(``trees._forest``, behind ``Forest.compute_inside_outside`` and
``Forest.viterbi_merit``) against the slow reference and enumeration."""
import math

import numpy as np
import pytest
from hypothesis import given, settings

from spacy_structpref.errors import StructPrefError

from tests.helpers.forest_reference import random_forests, reference_scores


def assert_log_close(got, ref):
    assert np.array_equal(np.isfinite(got), np.isfinite(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-9, atol=1e-12)


def n_trees(forest):
    count = np.zeros(forest.n_nodes)
    for e in np.argsort(forest.head, kind="stable"):
        count[forest.head[e]] += np.prod([count[t] for t in forest.edge_tails(e) if t >= 0])
    return count[forest.root]


@settings(max_examples=300, deadline=None)
@given(random_forests())
def test_forest_scores_match_reference(forest_words):
    forest, words = forest_words
    inside, outside, viterbi, merit = reference_scores(forest)
    if inside[forest.root] == -np.inf:
        with pytest.raises(StructPrefError, match="zero inside probability"):
            forest.compute_inside_outside()
        return
    forest.compute_inside_outside()
    assert_log_close(forest.log_inside, inside)
    assert_log_close(forest.log_outside, outside)
    assert_log_close(forest.log_viterbi, viterbi)
    assert_log_close(forest.viterbi_merit(), merit)
    if n_trees(forest) <= 2000:
        probs = [p for p, _ in forest.trees(words)]
        assert forest.log_total == pytest.approx(math.log(sum(probs)), rel=1e-9)
        assert forest.log_viterbi[forest.root] == pytest.approx(math.log(max(probs)), rel=1e-9)


def test_scores_are_computed_on_demand():
    from spacy_structpref.trees.forest import ForestBuilder
    from spacy_structpref.trees.arrays import SymbolTable

    b = ForestBuilder(SymbolTable(), 1, ["w"])
    tag = b.add_node("A", 0, 1)
    top = b.add_node("B", 0, 1)
    b.add_edge(top, [tag], 0.5)  # added before the tag's edges: edges need not be grouped by head
    b.add_edge(tag, [-1], 0.2)
    b.add_edge(tag, [-1], 0.3)
    forest = b.build(top)
    assert forest.log_total == pytest.approx(math.log(0.25))
    assert forest.log_viterbi[top] == pytest.approx(math.log(0.15))
    np.testing.assert_allclose(np.exp(forest.viterbi_merit()), [0.15, 0.1, 0.15])

"""The span tree CRF chart (spacy_structpref.parsing.span_chart) against
brute-force enumeration of every canonical labelled binary tree (no right
child of two or more words with the empty label 0)."""
import itertools
import re
import subprocess
import sys
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.errors import StructPrefError
from spacy_structpref.kernels import forest_kernel, gram
from spacy_structpref.parsing.span_chart import kbest, log_partition, marginals, span_forest, viterbi
from spacy_structpref.parsing.span_trees import SpanLabels, spans_to_tree, tree_to_spans
from spacy_structpref.trees import SymbolTable, trees_to_arrays
from spacy_structpref.trees.brackets import parse_bracketed


@lru_cache(maxsize=None)
def bracketings(i, j):
    """Every full binary bracketing of [i, j) as a tuple of (i, j) cells."""
    if j - i == 1:
        return [((i, j),)]
    return [((i, j),) + left + right
            for k in range(i + 1, j) for left in bracketings(i, k) for right in bracketings(k, j)]


def is_right_child(cell, cells):
    """Whether ``cell`` is a right child in the bracketing ``cells``: some
    longer cell ends where it ends (its parent does)."""
    i, j = cell
    return any(b == j and a < i for a, b in cells)


def enumerate_trees(scores):
    """Every labelled binary tree, bracketing by bracketing: a list of
    ``(cells, table)`` where ``table[l_1, ..., l_m]`` is the score of the
    tree with the bracketing's cells labelled ``l_1 ... l_m`` (one axis per
    cell), i.e. all ``L ** (2n - 1)`` labellings of each bracketing, ``-inf``
    where a right child of two or more words has the empty label."""
    n, L = scores.shape[0], scores.shape[2]
    out = []
    for cells in bracketings(0, n):
        m = len(cells)
        table = np.zeros((L,) * m)
        for axis, (i, j) in enumerate(cells):
            shape = [1] * m
            shape[axis] = L
            row = scores[i, j].copy()
            if j - i > 1 and is_right_child((i, j), cells):
                row[0] = -np.inf
            table = table + row.reshape(shape)
        out.append((cells, table))
    return out


def tree_list(scores):
    """Every canonical labelled tree as ``(score, spans)``, spans ordered as the chart orders them."""
    out = []
    for cells, table in enumerate_trees(scores):
        for labels in itertools.product(range(scores.shape[2]), repeat=len(cells)):
            if table[labels] == -np.inf and not np.isneginf(scores[[i for i, _ in cells], [j for _, j in cells],
                                                                   list(labels)]).any():
                continue  # not canonical
            spans = sorted(((i, j, lab) for (i, j), lab in zip(cells, labels)), key=lambda s: (s[0], -s[1]))
            out.append((float(table[labels]), spans))
    return out


def logsumexp(values):
    values = np.asarray(values, dtype=float)
    m = values.max()
    return m if m == -np.inf else m + np.log(np.exp(values - m).sum())


def random_scores(seed, n, L, scale=2.0):
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=scale, size=(n, n + 1, L))
    # Entries outside 0 <= i < j <= n are never read.
    scores[np.tril_indices(n, m=n + 1)] = np.nan
    return scores


def check_against_enumeration(scores):
    n, L = scores.shape[0], scores.shape[2]
    tables = enumerate_trees(scores)
    log_z = logsumexp([logsumexp(table.ravel()) for _, table in tables])
    assert log_partition(scores) == pytest.approx(log_z, abs=1e-9)

    got_z, mu = marginals(scores)
    assert got_z == pytest.approx(log_z, abs=1e-9)
    expected = np.zeros((n, n + 1, L))
    for cells, table in tables:
        p = np.exp(table - log_z)
        for axis, (i, j) in enumerate(cells):
            expected[i, j] += p.sum(axis=tuple(a for a in range(len(cells)) if a != axis))
    np.testing.assert_allclose(mu, expected, atol=1e-10)

    best, spans = viterbi(scores)
    top = max(table.max() for _, table in tables)
    assert best == pytest.approx(top, abs=1e-9)
    assert sum(scores[i, j, lab] for i, j, lab in spans) == pytest.approx(best, abs=1e-9)
    cells = tuple(sorted(((i, j) for i, j, _ in spans), key=lambda c: (c[0], -c[1])))
    assert cells in {tuple(sorted(c, key=lambda c: (c[0], -c[1]))) for c, _ in tables}


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 3))
def test_inside_marginals_and_viterbi_equal_enumeration(seed, n, L):
    check_against_enumeration(random_scores(seed, n, L))


def test_enumeration_on_ties_and_large_scores():
    check_against_enumeration(np.zeros((5, 6, 3)))
    check_against_enumeration(random_scores(1, 4, 3, scale=300.0))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 6))
def test_marginals_count_the_spans_of_a_tree(seed, n, L):
    scores = random_scores(seed, n, L, scale=3.0)
    _, mu = marginals(scores)
    assert np.all(mu >= 0) and np.all(mu <= 1 + 1e-12)
    assert mu.sum() == pytest.approx(2 * n - 1)
    span = mu.sum(axis=2)
    assert span[0, n] == pytest.approx(1.0)
    for i in range(n):
        assert span[i, i + 1] == pytest.approx(1.0)
    # Every tree has the n one-word spans, the whole sentence and n - 1
    # spans of two or more words.
    lengths = np.arange(n + 1)[None, :] - np.arange(n)[:, None]  # j - i
    assert span[lengths >= 2].sum() == pytest.approx(n - 1)
    assert mu[np.tril_indices(n, m=n + 1)].sum() == 0.0


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 4))
def test_marginals_are_the_gradient_of_log_z(seed, n, L):
    scores = random_scores(seed, n, L)
    scores[np.tril_indices(n, m=n + 1)] = 0.0
    _, mu = marginals(scores)
    rng = np.random.default_rng(seed + 1)
    direction = rng.normal(size=scores.shape)
    direction[np.tril_indices(n, m=n + 1)] = 0.0
    eps = 1e-5
    numeric = (log_partition(scores + eps * direction) - log_partition(scores - eps * direction)) / (2 * eps)
    assert numeric == pytest.approx(float((mu * direction).sum()), abs=1e-6)


def test_loss_gradient_is_marginals_minus_gold():
    # -log p(gold) = log Z - S(gold); its gradient is mu - gold indicator.
    n, L = 4, 3
    scores = random_scores(7, n, L)
    gold = [(0, 4, 1), (0, 1, 0), (1, 4, 2), (1, 3, 0), (1, 2, 1), (2, 3, 0), (3, 4, 2)]
    indicator = np.zeros(scores.shape)
    for i, j, lab in gold:
        indicator[i, j, lab] = 1.0

    def loss(s):
        return log_partition(s) - sum(s[i, j, lab] for i, j, lab in gold)

    _, mu = marginals(scores)
    grad = mu - indicator
    clean = np.nan_to_num(scores)
    for i, j, lab in [(0, 4, 1), (1, 3, 2), (2, 4, 0), (0, 2, 1)]:
        bump = np.zeros(scores.shape)
        bump[i, j, lab] = 1e-6
        numeric = (loss(clean + bump) - loss(clean - bump)) / 2e-6
        assert numeric == pytest.approx(grad[i, j, lab], abs=1e-6)


def test_minus_infinity_forbids_labelled_spans():
    n, L = 4, 2
    scores = random_scores(3, n, L)
    scores[0, 2, :] = -np.inf  # no tree may hold [0, 2)
    scores[1, 2, 1] = -np.inf
    trees = [(s, sp) for s, sp in tree_list(scores) if s > -np.inf]
    assert log_partition(scores) == pytest.approx(logsumexp([s for s, _ in trees]))
    _, mu = marginals(scores)
    assert np.all(mu[0, 2] == 0) and mu[1, 2, 1] == 0
    best, spans = viterbi(scores)
    assert best == pytest.approx(max(s for s, _ in trees))
    assert all((i, j) != (0, 2) for i, j, _ in spans)


def test_long_sentences_stay_finite():
    n, L = 120, 8
    scores = random_scores(5, n, L, scale=30.0)
    log_z, mu = marginals(scores)
    assert np.isfinite(log_z)
    assert mu.sum() == pytest.approx(2 * n - 1)
    best, spans = viterbi(scores)
    assert best <= log_z and len(spans) == 2 * n - 1


def test_viterbi_spans_are_a_bracketing_in_order():
    scores = random_scores(11, 6, 3)
    _, spans = viterbi(scores)
    assert spans == sorted(spans, key=lambda s: (s[0], -s[1]))
    assert len({(i, j) for i, j, _ in spans}) == 11


def test_bad_scores_are_refused():
    with pytest.raises(StructPrefError, match="shape"):
        log_partition(np.zeros((3, 3, 2)))
    with pytest.raises(StructPrefError, match="shape"):
        log_partition(np.zeros((0, 1, 2)))
    with pytest.raises(StructPrefError, match="shape"):
        viterbi(np.zeros((2, 3)))
    with pytest.raises(StructPrefError, match="float array"):
        marginals([["a"]])
    scores = np.zeros((3, 4, 2))
    scores[1, 3, 0] = np.nan
    with pytest.raises(StructPrefError, match=r"span \[1, 3\) has NaN"):
        log_partition(scores)
    scores[1, 3, 0] = np.inf
    with pytest.raises(StructPrefError, match="NaN or \\+inf"):
        viterbi(scores)
    scores = np.zeros((3, 4, 2))
    scores[0, 3] = -np.inf
    with pytest.raises(StructPrefError, match="no tree"):
        marginals(scores)
    with pytest.raises(StructPrefError, match="no tree"):
        viterbi(scores)


def check_kbest(scores, k):
    trees = sorted(tree_list(scores), key=lambda t: -t[0])
    trees = [t for t in trees if t[0] > -np.inf]
    got = kbest(scores, k)
    assert len(got) == min(k, len(trees))
    got_scores = [s for s, _ in got]
    assert got_scores == sorted(got_scores, reverse=True)
    np.testing.assert_allclose(got_scores, [s for s, _ in trees[:len(got)]], atol=1e-9)
    by_spans = {tuple(sp): s for s, sp in trees}
    assert len({tuple(sp) for _, sp in got}) == len(got)
    for score, spans in got:
        assert spans == sorted(spans, key=lambda sp: (sp[0], -sp[1]))
        assert by_spans[tuple(spans)] == pytest.approx(score, abs=1e-9)
    return got


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(1, 3), st.integers(1, 60))
def test_kbest_equals_the_top_of_enumeration(seed, n, L, k):
    scores = random_scores(seed, n, L)
    got = check_kbest(scores, k)
    log_z = log_partition(scores)
    assert np.exp([s - log_z for s, _ in got]).sum() <= 1 + 1e-9
    best, spans = viterbi(scores)
    assert got[0][0] == pytest.approx(best)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 4), st.integers(1, 80), st.booleans())
def test_a_shorter_kbest_list_is_the_start_of_a_longer_one(seed, n, L, k, ties):
    # lists of different lengths agree: a 10-best list is the 50-best list's start, ties included
    scores = random_scores(seed, n, L)
    if ties:
        scores = np.round(scores / 2)
    longest = kbest(scores, k)
    for d in sorted(d for d in {1, 2, 3, k // 3, k // 2, k - 1} if 0 < d <= k):
        assert kbest(scores, d) == longest[:d]


def test_kbest_with_ties_gives_the_same_multiset_of_scores():
    scores = np.round(random_scores(4, 4, 3, scale=1.0))
    check_kbest(scores, 200)
    check_kbest(np.zeros((3, 4, 2)), 40)


def test_kbest_on_five_words_and_every_tree():
    scores = random_scores(9, 5, 2)
    count = len(tree_list(scores))
    # per bracketing, 2 labels on each span but 1 on its right children of 2+ words
    assert count == sum(np.prod([1 if j - i > 1 and is_right_child((i, j), cells) else 2 for i, j in cells])
                        for cells in bracketings(0, 5))
    got = check_kbest(scores, count + 5)  # every tree, then nothing more
    assert len(got) == count
    log_z = log_partition(scores)
    assert np.exp([s - log_z for s, _ in got]).sum() == pytest.approx(1.0)


def test_kbest_skips_forbidden_spans():
    scores = random_scores(2, 4, 3)
    scores[1, 3, :2] = -np.inf
    scores[0, 1, 0] = -np.inf
    check_kbest(scores, 100)
    scores = np.full((2, 3, 2), -np.inf)
    scores[:, :, 0] = 0.0
    assert [s for s, _ in kbest(scores, 5)] == [0.0]


def test_kbest_keeps_only_the_labels_it_needs():
    # With fewer trees wanted than labels, only each span's k best labels are
    # read; the list must not change.
    scores = random_scores(5, 3, 6)
    full = [s for s, _ in tree_list(scores)]
    np.testing.assert_allclose([s for s, _ in kbest(scores, 4)], sorted(full, reverse=True)[:4], atol=1e-9)


def test_kbest_refuses_bad_k():
    for k in (0, -1, 2.5, True, "3"):
        with pytest.raises(StructPrefError, match="k must be"):
            kbest(np.zeros((2, 3, 1)), k)
    scores = np.zeros((2, 3, 1))
    scores[0, 2] = -np.inf
    with pytest.raises(StructPrefError, match="no tree"):
        kbest(scores, 3)


# ------------------------------------------------------------------ forest
FOREST_LABELS = SpanLabels(["", "NP", "S+VP", "VP"])
UNCAPPED = 10**6  # max_expansions no test sentence reaches: the forest is exact


def hyperedges(tree):
    """The forest hyperedges a treebank tree uses, as (head, tails) of node
    keys: a node is keyed by its span and the labels of the unary chain from
    it down to a node of two or more children or over a preterminal (the
    chain nodes are shared by span and chain suffix), a preterminal by its
    position, a word by ("word", i)."""
    out = []

    def visit(node, start):
        if isinstance(node[0], str):
            out.append(((start, "pre"), (("word", start),)))
            return (start, "pre"), start + 1
        end, kids = start, []
        for kid in node:
            key, end = visit(kid, end)
            kids.append(key)
        if node.label() == "TOP":
            key = ("TOP",)
        elif len(node) == 1 and not isinstance(node[0][0], str):
            key = (start, end, node.label() + "+" + kids[0][2])
        else:
            key = (start, end, node.label())
        out.append((key, tuple(kids)))
        return key, end

    visit(tree, 0)
    return out


def labelled_tree(spans, labels, words, tags):
    """The treebank tree of chart spans ``(i, j, label id)`` with ``labels``' names."""
    return spans_to_tree(words, tags, [(i, j, labels.labels[lab]) for i, j, lab in spans])


def reference_forest_trees(scores, labels, words, tags, threshold, keep=()):
    """Treebank trees of the pruned CRF with their probabilities, by
    enumeration: labelled spans and splits are kept by their marginals over
    all trees (with those of the Viterbi tree and the trees in ``keep``), the
    binary trees using only kept ones are un-binarised and their
    probabilities summed per tree and renormalised; then the trees that use a
    hyperedge of posterior below the threshold (other than the Viterbi
    tree's and the kept trees') are dropped and the rest renormalised:
    ``{bracketed tree: probability}``."""
    trees = tree_list(scores)
    log_z = logsumexp([s for s, _ in trees])
    span_mu, split_mu = {}, {}
    for score, spans in trees:
        p = np.exp(score - log_z)
        cells = {(i, j) for i, j, _ in spans}
        for i, j, lab in spans:
            span_mu[i, j, lab] = span_mu.get((i, j, lab), 0.0) + p
            for k in range(i + 1, j):
                if (i, k) in cells and (k, j) in cells:
                    split_mu[i, k, j] = split_mu.get((i, k, j), 0.0) + p
    protected = [viterbi(scores)[1]] + list(keep)
    keep_spans = {key for key, p in span_mu.items() if p >= threshold and p > 0}
    keep_splits = {key for key, p in split_mu.items() if p >= threshold and p > 0}
    for best in protected:
        best_cells = {(i, j) for i, j, _ in best}
        keep_spans |= set(best)
        keep_splits |= {(i, k, j) for i, j, _ in best for k in range(i + 1, j)
                        if (i, k) in best_cells and (k, j) in best_cells}
    restricted = {}
    for score, spans in trees:
        cells = {(i, j) for i, j, _ in spans}
        splits = {(i, k, j) for i, j, _ in spans for k in range(i + 1, j) if (i, k) in cells and (k, j) in cells}
        if set(spans) <= keep_spans and splits <= keep_splits:
            tree = labelled_tree(spans, labels, words, tags)
            key = str(tree)
            restricted[key] = restricted.get(key, 0.0) + np.exp(score - log_z)
    total = sum(restricted.values())
    edge_mu = {}
    for key, p in restricted.items():
        for edge in set(hyperedges(parse_bracketed(key))):
            edge_mu[edge] = edge_mu.get(edge, 0.0) + p / total
    best_edges = {edge for best in protected
                  for edge in hyperedges(labelled_tree(best, labels, words, tags))}
    out = {key: p for key, p in restricted.items()
           if all(edge_mu[e] >= threshold or e in best_edges for e in hyperedges(parse_bracketed(key)))}
    total = sum(out.values())
    return {key: p / total for key, p in out.items()}


def forest_trees(forest, words):
    out = {}
    for p, tree in forest.trees(words):
        key = str(tree)
        assert key not in out, "two derivations of one tree"
        out[key] = float(p)
    return out


def forest_case(seed, n, scale=2.0, labels=FOREST_LABELS):
    scores = random_scores(seed, n, len(labels), scale=scale)
    scores[:, :, 0] = 0.0
    scores[np.tril_indices(n, m=n + 1)] = np.nan
    words = [f"w{i % 3}" for i in range(n)]
    tags = [["DT", "NN", "VB"][i % 3] for i in range(n)]
    return scores, words, tags


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.sampled_from([0.0, 0.0, 0.02, 0.1, 0.3, 1.0]))
def test_forest_trees_are_the_pruned_crf_distribution(seed, n, threshold):
    scores, words, tags = forest_case(seed, n)
    forest = span_forest(scores, FOREST_LABELS, words, tags, threshold=threshold, max_expansions=UNCAPPED)
    got = forest_trees(forest, words)
    expected = reference_forest_trees(scores, FOREST_LABELS, words, tags, threshold)
    assert set(got) == set(expected)
    for key, p in expected.items():
        assert got[key] == pytest.approx(p, rel=1e-9, abs=1e-12)
    assert forest.log_total == pytest.approx(0.0, abs=1e-9)
    # The Viterbi tree is always in the forest.
    _, best = viterbi(scores)
    assert str(labelled_tree(best, FOREST_LABELS, words, tags)) in got


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 4), st.sampled_from([0.05, 0.3, 1.0]), st.integers(1, 12))
def test_a_forest_keeps_the_k_best_trees_it_is_given(seed, n, threshold, k):
    # A k-best list of the chart and its pruned forest agree: every listed tree is in the forest, whose
    # distribution is the CRF's over what the pruning (with the listed trees' hyperedges) keeps.
    scores, words, tags = forest_case(seed, n)
    listed = kbest(scores, k)
    forest = span_forest(scores, FOREST_LABELS, words, tags, threshold=threshold, max_expansions=UNCAPPED,
                         keep=[spans for _, spans in listed])
    got = forest_trees(forest, words)
    expected = reference_forest_trees(scores, FOREST_LABELS, words, tags, threshold,
                                      keep=[spans for _, spans in listed])
    assert set(got) == set(expected)
    for key, p in expected.items():
        assert got[key] == pytest.approx(p, rel=1e-9, abs=1e-12)
    for _, spans in listed:
        assert str(labelled_tree(spans, FOREST_LABELS, words, tags)) in got


def test_the_k_best_trees_survive_the_expansion_cap():
    labels = SpanLabels(["", "NP"])
    for seed in range(5):
        scores, words, tags = forest_case(seed, 6, scale=0.5, labels=labels)
        listed = [spans for _, spans in kbest(scores, 20)]
        got = forest_trees(span_forest(scores, labels, words, tags, threshold=0.5, max_expansions=1, keep=listed),
                           words)
        for spans in listed:
            assert str(labelled_tree(spans, labels, words, tags)) in got


def test_kept_trees_must_be_trees_of_the_chart():
    scores, words, tags = forest_case(1, 3)
    good = kbest(scores, 2)[1][1]
    assert span_forest(scores, FOREST_LABELS, words, tags, keep=[good]).n_nodes > 0
    bad_trees = [
        good[:-1],  # a span missing
        good + [(0, 1, 1)],  # one too many
        [(0, 3, 0), (0, 1, 1), (1, 3, 0), (1, 2, 1), (2, 3, 1)],  # a right child of two words without a label
        [(0, 3, 0), (0, 2, 1), (0, 1, 1), (1, 2, 1), (1, 3, 1)],  # the right child starts in the wrong place
        [(0, 3, 9), (0, 1, 1), (1, 3, 1), (1, 2, 1), (2, 3, 1)],  # no label 9
        [(0, 3, 0), (0, 3, 1), (0, 1, 1), (1, 2, 1), (2, 3, 1)],  # a left child as long as its parent
        ["(0, 3)"],
    ]
    for bad in bad_trees:
        with pytest.raises(StructPrefError, match="kept tree|binary span tree"):
            span_forest(scores, FOREST_LABELS, words, tags, keep=[bad])
    forbidden = scores.copy()
    forbidden[1, 3, 1] = -np.inf
    zero = [(0, 3, 0), (0, 1, 1), (1, 3, 1), (1, 2, 1), (2, 3, 1)]
    with pytest.raises(StructPrefError, match="probability zero"):
        span_forest(forbidden, FOREST_LABELS, words, tags, keep=[zero])
    with pytest.raises(StructPrefError, match=re.escape(f"probability zero (a -inf span score): {zero!r}")):
        span_forest(forbidden, FOREST_LABELS, words, tags, keep=[good, zero, good])  # the one named


@pytest.mark.parametrize("threshold", [0.0, 0.01])
def test_pruned_forests_of_four_words(threshold):
    labels = SpanLabels(["", "NP", "S+NP"])
    scores, words, tags = forest_case(3, 4, labels=labels)
    got = forest_trees(span_forest(scores, labels, words, tags, threshold=threshold, max_expansions=UNCAPPED), words)
    expected = reference_forest_trees(scores, labels, words, tags, threshold)
    assert set(got) == set(expected)
    assert all(got[key] == pytest.approx(p, rel=1e-9) for key, p in expected.items())


def test_threshold_zero_holds_every_tree_with_its_crf_probability():
    scores, words, tags = forest_case(3, 3)
    got = forest_trees(span_forest(scores, FOREST_LABELS, words, tags, threshold=0.0, max_expansions=UNCAPPED), words)
    log_z = log_partition(scores)
    expected = {}
    for score, spans in tree_list(scores):
        key = str(labelled_tree(spans, FOREST_LABELS, words, tags))
        expected[key] = expected.get(key, 0.0) + np.exp(score - log_z)
    assert set(got) == set(expected)
    assert all(got[key] == pytest.approx(p, rel=1e-9) for key, p in expected.items())


def test_forest_of_one_word_and_threshold_one():
    scores, words, tags = forest_case(1, 1)
    got = forest_trees(span_forest(scores, FOREST_LABELS, words, tags, threshold=0.0, max_expansions=UNCAPPED), words)
    assert set(got) == {"(TOP (DT w0))", "(TOP (NP (DT w0)))", "(TOP (S (VP (DT w0))))", "(TOP (VP (DT w0)))"}
    scores, words, tags = forest_case(8, 5, scale=1.0)
    forest = span_forest(scores, FOREST_LABELS, words, tags, threshold=1.0)
    _, best = viterbi(scores)
    assert forest_trees(forest, words) == {
        str(labelled_tree(best, FOREST_LABELS, words, tags)): 1.0}


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(1, 3), st.sampled_from([0.05, 0.2]),
       st.sampled_from([0.3, 1.0]))
def test_forest_kernel_on_span_forests_is_the_expected_tree_kernel(seed, n1, n2, threshold, lam):
    symbols = SymbolTable()
    sides = []
    for offset, n in ((0, n1), (1, n2)):
        scores, words, tags = forest_case(seed + offset, n)
        forest = span_forest(scores, FOREST_LABELS, words, tags, threshold=threshold, symbols=symbols,
                             max_expansions=UNCAPPED)
        ref = reference_forest_trees(scores, FOREST_LABELS, words, tags, threshold)
        sides.append((forest, [parse_bracketed(t) for t in ref], np.array(list(ref.values()))))
    (f1, t1, p1), (f2, t2, p2) = sides
    K = gram(trees_to_arrays(t1, symbols), trees_to_arrays(t2, symbols), lam=lam, normalize=False, n_threads=1,
             progress=False)
    assert forest_kernel(f1, f2, lam=lam) == pytest.approx(float(p1 @ K @ p2), rel=1e-9)


def test_a_capped_forest_is_still_a_distribution_over_some_of_the_trees():
    labels = SpanLabels(["", "NP"])
    scores, words, tags = forest_case(6, 5, scale=0.5, labels=labels)
    full = forest_trees(span_forest(scores, labels, words, tags, threshold=0.0, max_expansions=UNCAPPED), words)
    capped = span_forest(scores, labels, words, tags, threshold=0.0, max_expansions=2)
    got = forest_trees(capped, words)
    assert set(got) < set(full)
    assert sum(got.values()) == pytest.approx(1.0)


def test_long_sentence_forest_is_normalised_and_shares_symbols():
    n = 40
    scores = random_scores(12, n, len(FOREST_LABELS), scale=6.0)
    scores[:, :, 0] = 0.0
    words, tags = [f"w{i}" for i in range(n)], ["NN"] * n
    symbols, rule_ids = SymbolTable(), {}
    f1 = span_forest(scores, FOREST_LABELS, words, tags, threshold=1e-3, symbols=symbols, rule_ids=rule_ids)
    f2 = span_forest(scores * 0.5, FOREST_LABELS, words, tags, threshold=1e-3, symbols=symbols, rule_ids=rule_ids)
    assert f1.symbols is symbols and f2.symbols is symbols
    assert f1.log_total == pytest.approx(0.0, abs=1e-9)
    assert symbols.labels[f1.label[f1.root]] == "TOP" and f1.start[f1.root] == 0 and f1.end[f1.root] == n
    assert 0.0 < forest_kernel(f1, f2, normalize=True) <= 1.0 + 1e-9


def test_span_forest_refuses_bad_arguments():
    scores, words, tags = forest_case(2, 3)
    with pytest.raises(StructPrefError, match="SpanLabels"):
        span_forest(scores, SpanLabels(["", "NP"]), words, tags)
    with pytest.raises(StructPrefError, match="SpanLabels"):
        span_forest(scores, ["", "NP", "S+VP", "VP"], words, tags)
    with pytest.raises(StructPrefError, match="3 words"):
        span_forest(scores, FOREST_LABELS, words[:2], tags)
    with pytest.raises(StructPrefError, match="3 words"):
        span_forest(scores, FOREST_LABELS, words, tags + ["NN"])
    for bad in (-0.1, 1.5, "0.1", None):
        with pytest.raises(StructPrefError, match="threshold"):
            span_forest(scores, FOREST_LABELS, words, tags, threshold=bad)
    with pytest.raises(StructPrefError, match="max_expansions"):
        span_forest(scores, FOREST_LABELS, words, tags, max_expansions=0)


def test_importing_the_chart_loads_no_compiled_code():
    # spaCy imports plugin entry points eagerly; modules that import these
    # must load even where an extension is broken.
    code = ("import sys\n"
            "import spacy_structpref.parsing.span_chart, spacy_structpref.parsing.span_trees\n"
            "print([m for m, mod in sys.modules.items() if m.startswith('spacy_structpref')\n"
            "       and getattr(mod, '__file__', '') and mod.__file__.endswith(('.so', '.pyd'))])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_viterbi_tree_survives_the_expansion_cap():
    labels = SpanLabels(["", "NP"])
    for seed in range(5):
        scores, words, tags = forest_case(seed, 5, scale=0.5, labels=labels)
        _, best = viterbi(scores)
        forest = span_forest(scores, labels, words, tags, threshold=0.0, max_expansions=1)
        assert str(labelled_tree(best, labels, words, tags)) in forest_trees(forest, words)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_canonical_binary_trees_are_the_treebank_trees_one_to_one(n):
    # Every canonical labelled binary tree un-binarises to a treebank tree
    # whose left-factored spans are that binary tree again, so no two of them
    # are one treebank tree and k-best lists hold distinct trees.
    scores, words, tags = forest_case(0, n)
    names = FOREST_LABELS.labels
    seen = set()
    for _, spans in tree_list(scores):
        tree = spans_to_tree(words, tags, [(i, j, names[lab]) for i, j, lab in spans])
        back = sorted(((i, j, FOREST_LABELS.index(lab)) for i, j, lab in tree_to_spans(tree)[2]),
                      key=lambda s: (s[0], -s[1]))
        assert back == spans
        seen.add(str(tree))
    assert len(seen) == len(tree_list(scores))

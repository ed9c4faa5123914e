"""The fast path of incremental parsing: a perceptron's utilities over a
candidate set (``dag_weighted_sums`` through the support's production index,
``kernels._kernels.dag_node_sums``) and the occurrence counts of a candidate
DAG (``trees._dag.dag_occurrences``) against slow references: the weighted
column of ``dag_block`` (bit for bit: the sums run in the same order),
per-tree Python walks, and the plain subset-tree kernel on nltk trees; and
greedy parsing with the fast path against greedy parsing with those slow
utilities."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.incremental import (CandidateSets, CPInventory, IncrementalParser,
                                         preference_sets, preference_sets_of)
from spacy_structpref.kernels import _kernels, dag_weighted_sums, gram
from spacy_structpref.kernels.dag import _node_weights, _packed, _self_kernels
from spacy_structpref.kernels.inputs import MAX_NODES
from spacy_structpref.learners import KernelPerceptron, TreeKernel, fit
from spacy_structpref.trees import TreeSetDAG
from spacy_structpref.trees._dag import dag_occurrences
from spacy_structpref.trees.arrays import INT

from tests.helpers.fixtures import slow_fixture
from tests.helpers.strategies import trees


def column_sums(a: TreeSetDAG, weights, b: TreeSetDAG, lam: float, sigma: float, normalize: bool):
    """The utilities as ``dag_weighted_sums`` computed them before the
    production index: ``b`` as the rows of ``dag_block``, ``a`` collapsed
    into one weighted column."""
    node_weight = _node_weights(a, np.asarray(weights, float), lam, sigma, normalize, MAX_NODES)
    n = a.n_dag_nodes
    pb = _packed(b)
    K, _ = _kernels.dag_block(pb[0], _packed(a)[0], *pb[1], np.arange(n + 1, dtype=INT), np.zeros(n, dtype=INT),
                              node_weight, len(b), 1, lam, sigma)
    sums = K[:, 0]
    return sums / np.sqrt(_self_kernels(b, lam, sigma, MAX_NODES)) if normalize else sums


def reference_occurrences(dag: TreeSetDAG):
    """Per tree, each distinct node's count: every path from the root, walked."""
    occ = []
    for root in dag.roots:
        counts, stack = {}, [root]
        while stack:
            u = stack.pop()
            counts[u] = counts.get(u, 0) + 1
            stack.extend(dag.children[u])
        occ.append(counts)
    return occ


@slow_fixture
def trained():
    """A perceptron trained on the reduced preference sets of 25 PTB trees,
    with the inventory of 60, and the sets of 6 dev trees."""
    train = ptb_trees("train")[:60]
    inventory = CPInventory.from_trees(train)
    learner = KernelPerceptron(TreeKernel(lam=0.4, normalize=True))
    sets = preference_sets_of(train[:25], inventory)
    fit(learner, CandidateSets(sets, learner.kernel.symbols, reduced=True), [s.gold for s in sets])
    dev = ptb_trees("dev")[:6]
    return learner, inventory, dev


def test_utilities_equal_the_weighted_column_bit_for_bit(trained):
    learner, inventory, dev = trained
    kernel, chunk = learner.kernel, learner.chunks[0]
    weights = learner._coefficients(chunk, True)
    n = 0
    for tree in dev:
        for s in preference_sets(tree, inventory):
            fast = dag_weighted_sums(chunk.prepared, weights, s.dag(kernel.symbols, True), kernel.lam, kernel.sigma,
                                     kernel.normalize)
            slow = column_sums(chunk.prepared, weights, s.dag(kernel.symbols, True), kernel.lam, kernel.sigma,
                               kernel.normalize)
            assert np.array_equal(fast, slow)
            n += 1
    assert n > 100


def test_utilities_equal_the_tree_kernel(trained):
    learner, inventory, dev = trained
    kernel, chunk = learner.kernel, learner.chunks[0]
    weights = learner._coefficients(chunk, True)
    support = [chunk.prepared[i] for i in range(len(chunk.prepared))]
    for s in preference_sets(dev[0], inventory)[:8]:
        expected = weights @ gram(support, s.trees(reduced=True), lam=kernel.lam, n_threads=1)
        np.testing.assert_allclose(learner.utilities(s.dag(kernel.symbols, True)), expected, rtol=1e-9,
                                   atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(trees(max_depth=3), min_size=1, max_size=5), st.lists(trees(max_depth=3), min_size=1, max_size=5),
       st.sampled_from([0.4, 1.0]), st.sampled_from([0, 1]), st.booleans(), st.integers(0, 2**32 - 1))
def test_random_sets_bit_for_bit(set1, set2, lam, sigma, normalize, seed):
    a = TreeSetDAG(set1 + [Tree("S", [t.copy(deep=True) for t in set1])])
    b = TreeSetDAG(set2 + [Tree("S", [t.copy(deep=True) for t in set2 + set1])], a.symbols)
    w = np.random.default_rng(seed).normal(size=len(a))
    assert np.array_equal(dag_weighted_sums(a, w, b, lam, sigma, normalize), column_sums(a, w, b, lam, sigma, normalize))


@settings(max_examples=40, deadline=None)
@given(st.lists(trees(max_depth=4), min_size=1, max_size=6))
def test_occurrences_equal_the_walks(parts):
    dag = TreeSetDAG(parts + [Tree("S", [t.copy(deep=True) for t in parts])])
    assert dag.occurrences == reference_occurrences(dag)
    tree_of, node, cnt = dag.occurrence_arrays()
    assert np.all(np.diff(tree_of) >= 0) and dag.n_tree_nodes == sum(sum(c.values()) for c in dag.occurrences)
    for t in range(len(dag)):  # nodes ascending within a tree
        assert list(node[tree_of == t]) == sorted(reference_occurrences(dag)[t])
    later = dag.occurrence_arrays(len(dag) - 1)
    assert list(later[1]) == sorted(dag.occurrences[-1]) and not later[0].any()


def test_occurrences_reject_a_bad_root():
    with pytest.raises(ValueError, match="not one of"):
        dag_occurrences(np.zeros(2, dtype=INT), np.zeros(0, dtype=INT), np.array([3], dtype=INT))


def test_greedy_parsing_with_the_fast_path_equals_the_slow_utilities(trained):
    learner, inventory, dev = trained
    kernel, chunk = learner.kernel, learner.chunks[0]
    weights = learner._coefficients(chunk, True)
    support = [chunk.prepared[i] for i in range(len(chunk.prepared))]

    def slow(candidates, foot, i):
        return weights @ gram(support, [candidates[j] for j in range(len(candidates))], lam=kernel.lam, n_threads=1)

    def fast(candidates, foot, i):
        return learner.utilities(candidates)

    for tree in dev[:3]:
        words, tags = zip(*tree.pos())
        got = IncrementalParser(inventory, fast, reduced=True, symbols=kernel.symbols).parse(words, tags)
        want = IncrementalParser(inventory, slow, reduced=True, symbols=kernel.symbols).parse(words, tags)
        assert got.tree == want.tree and [s.cp for s in got.steps] == [s.cp for s in want.steps]

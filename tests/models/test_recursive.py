"""The recursive neural network over trees and DAGs (Menchetti et al. 2005,
§4): hand-computed values, hash-consed DAG = separate trees, gradients against
finite differences, and clear errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree
from thinc.api import Adam, decaying

from spacy_structpref.errors import StructPrefError
from spacy_structpref.learners import RecursiveNetLearner, Schedule, fit
from spacy_structpref.learners.recursive import set_losses
from spacy_structpref.trees import TreeSetDAG
from spacy_structpref.models.recursive import (UNKNOWN, WORD, WORD_KEY, RecursiveNet, build_label_dag,
                                               concat_label_dags, label_vocab)
from spacy_structpref.trees import SymbolTable

from tests.helpers.strategies import trees


def network(vocab, width=4, max_children=3, scale=0.5, seed=0, dtype="f"):
    model = RecursiveNet(width, max_children, len(vocab) + 2, init_scale=scale, seed=seed).initialize()
    for name in ("E", "W", "b", "o"):
        model.set_param(name, model.get_param(name).astype(dtype))
    return model


def reference_utility(model, tree, vocab, max_children):
    """u(v) by plain recursion over the tree, straight from the formula."""
    E, W, b, o = (model.get_param(n).astype(float) for n in ("E", "W", "b", "o"))

    def u(t, under_preterminal=False):
        if not isinstance(t, Tree):
            word = vocab.get(WORD_KEY + t) if under_preterminal else None
            return np.tanh(b + E[vocab.get(t, WORD) if word is None else word])
        pre = b + E[vocab.get(t.label(), UNKNOWN)]
        for k, child in enumerate(t[:max_children]):
            pre = pre + W[k] @ u(child, len(t) == 1)
        return np.tanh(pre)

    return float(o @ u(tree))


def test_words_get_their_own_inputs_by_hand():
    sets = [[Tree.fromstring("(NP (DT the) (NN dog))"), Tree.fromstring("(NP (DT the) (NN cat))")],
            [Tree.fromstring("(NP (DT the) NN)")]]
    assert label_vocab(sets) == {"DT": 2, "NN": 3, "NP": 4}
    # "the" is in both sets, "dog" and "cat" in one; the bare label NN is no word
    assert label_vocab(sets, 2) == {"DT": 2, "NN": 3, "NP": 4, WORD_KEY + "the": 5}
    vocab = label_vocab(sets, 1)
    assert set(vocab) == {"DT", "NN", "NP", *(WORD_KEY + w for w in ("cat", "dog", "the"))}
    dag = build_label_dag([[Tree.fromstring("(NP (DT the) (NN emu) NN)")]], vocab, 3)
    assert sorted(dag.labels.tolist()) == sorted([vocab["NP"], vocab["DT"], vocab[WORD_KEY + "the"],
                                                  vocab["NN"], WORD, vocab["NN"]])


def test_single_node_by_hand():
    vocab = {"NP": 2}
    model = network(vocab, width=3)
    E, b, o = model.get_param("E"), model.get_param("b"), model.get_param("o")
    dag = build_label_dag([["NP"]], vocab, 3)  # a bare label leaf
    assert dag.labels.tolist() == [2] and dag.roots.tolist() == [0]
    np.testing.assert_allclose(model.predict(dag), [o @ np.tanh(b + E[2])], rtol=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(trees(), min_size=1, max_size=4), min_size=1, max_size=3),
       st.integers(1, 3), st.integers(0, 2))
def test_dag_equals_separate_trees_and_recursion(sets, max_children, min_word_sets):
    vocab = label_vocab([s[:1] for s in sets], min_word_sets)  # some labels unknown on purpose
    model = network(vocab, max_children=max_children)
    shared = build_label_dag(sets, vocab, max_children)
    separate = build_label_dag(sets, vocab, max_children, share=False)
    assert shared.n_nodes <= separate.n_nodes
    u = model.predict(shared)
    np.testing.assert_allclose(u, model.predict(separate), rtol=1e-5, atol=1e-7)
    flat = [t for s in sets for t in s]
    np.testing.assert_allclose(u, [reference_utility(model, t, vocab, max_children) for t in flat],
                               rtol=1e-4, atol=1e-6)
    assert shared.set_starts.tolist() == np.cumsum([0] + [len(s) for s in sets]).tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(trees(), min_size=1, max_size=4), min_size=1, max_size=3),
       st.integers(1, 3), st.integers(0, 2))
def test_label_dags_from_tree_set_dags_and_by_concatenation(sets, max_children, min_word_sets):
    symbols = SymbolTable()
    dag_sets = [TreeSetDAG(s, symbols) for s in sets]
    assert label_vocab(dag_sets, min_word_sets) == label_vocab(sets, min_word_sets)
    vocab = label_vocab([s[:1] for s in sets], min_word_sets)
    model = network(vocab, max_children=max_children)
    from_trees = build_label_dag(sets, vocab, max_children)
    u = model.predict(from_trees)
    from_dags = build_label_dag(dag_sets, vocab, max_children)
    joined = concat_label_dags([build_label_dag([s], vocab, max_children) for s in sets])
    assert from_dags.n_nodes == from_trees.n_nodes
    for dag in (from_dags, joined):
        assert dag.set_starts.tolist() == from_trees.set_starts.tolist()
        np.testing.assert_allclose(model.predict(dag), u, rtol=1e-5, atol=1e-7)
    with pytest.raises(StructPrefError, match="share=False"):
        build_label_dag(dag_sets, vocab, max_children, share=False)


@pytest.mark.parametrize("loss", ["setwise", "pairwise"])
def test_gradients_match_finite_differences(loss):
    sets = [[Tree.fromstring("(S (NP (DT a) (NN b)) (VP (VB c)))"), Tree.fromstring("(S (NP (DT a)) (VP (VB c) (NP (NN b))))")],
            [Tree.fromstring("(NP (NP (NN a)) (PP (IN b) (NP (NN c))))"), Tree.fromstring("(NP (NN a))"), "NP"]]
    gold = [1, 0]
    vocab = label_vocab(sets)
    model = network(vocab, width=3, max_children=2, dtype="float64")
    dag = build_label_dag(sets, vocab, 2)

    def objective():
        return set_losses(model.predict(dag), dag.set_starts, gold, loss)[0]

    scores, backprop = model.begin_update(dag)
    backprop(set_losses(scores, dag.set_starts, gold, loss)[1])
    for name in ("E", "W", "b", "o"):
        param = model.get_param(name)
        grad = model.get_grad(name).copy()
        numeric = np.zeros_like(param)
        for idx in np.ndindex(param.shape):
            old = param[idx]
            param[idx] = old + 1e-6
            up = objective()
            param[idx] = old - 1e-6
            down = objective()
            param[idx] = old
            numeric[idx] = (up - down) / 2e-6
        np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8, err_msg=name)


def test_bad_input():
    with pytest.raises(StructPrefError, match="loss must be"):
        RecursiveNetLearner(loss="listwise")
    with pytest.raises(StructPrefError, match="min_word_sets must be >= 0"):
        RecursiveNetLearner(min_word_sets=-1)
    with pytest.raises(StructPrefError, match="not trained"):
        RecursiveNetLearner().utilities(["NP"])
    with pytest.raises(StructPrefError, match="no preference set"):
        fit(RecursiveNetLearner(), [[Tree.fromstring("(NP (NN a))")]], [0], schedule=Schedule(optimizer=Adam(0.01)))
    with pytest.raises(StructPrefError, match="fixed settings, not schedules: learn_rate"):
        Schedule(optimizer=Adam(decaying(0.01, 1e-4)))
    with pytest.raises(StructPrefError, match="stepped by an optimizer"):
        fit(RecursiveNetLearner(), [[Tree.fromstring("(NP (NN a))")]], [0])
    with pytest.raises(StructPrefError, match="width"):
        RecursiveNet(width=0)
    model = network({"NP": 2})
    with pytest.raises(StructPrefError, match="outside the network's 3 labels"):
        model.predict(build_label_dag([["VP"]], {"VP": 7}, 3))


def test_log_p_input_with_zero_scale_is_the_plain_network():
    sets = [[Tree.fromstring("(S (NP a) (VP b))"), Tree.fromstring("(S (NP a) (NP b))")]]
    vocab = label_vocab(sets)
    dag = build_label_dag(sets, vocab, 3)
    dag.log_p = np.array([-3.0, -5.0])
    plain = RecursiveNet(4, 3, len(vocab) + 2, init_scale=0.5).initialize()
    zero = RecursiveNet(4, 3, len(vocab) + 2, init_scale=0.5, log_p_input=True, log_p_a=0.0,
                        log_p_b=0.0).initialize()
    np.testing.assert_array_equal(plain.predict(dag), zero.predict(dag))
    scaled = RecursiveNet(4, 3, len(vocab) + 2, init_scale=0.5, log_p_input=True, log_p_a=2.0,
                          log_p_b=1.0).initialize()
    np.testing.assert_allclose(scaled.predict(dag), plain.predict(dag) + 2 * dag.log_p + 1, rtol=1e-6)
    _, backprop = scaled.begin_update(dag)
    backprop(np.array([1.0, 0.0], dtype="f"))
    assert scaled.get_grad("v")[0] == pytest.approx(2 * -3.0 + 1)

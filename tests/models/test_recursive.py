"""The recursive neural network over trees and DAGs (Menchetti et al. 2005,
§4): hand-computed values, hash-consed DAG = separate trees, gradients against
finite differences, the batched passes (float32, level by level) against the
node-by-node reference (double precision) on random DAGs, and clear errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree
from thinc.api import Adam, Ops, decaying

from spacy_structpref.errors import StructPrefError
from spacy_structpref.learners import RecursiveNetLearner, Schedule, fit
from spacy_structpref.learners.recursive import set_losses
from spacy_structpref.trees import TreeSetDAG
from spacy_structpref.models.recursive import (UNKNOWN, WORD, WORD_KEY, LabelDAG, RecursiveNet, build_label_dag,
                                               concat_label_dags, label_vocab, node_states)
from spacy_structpref.trees import SymbolTable

from tests.helpers.strategies import trees


def network(vocab, width=4, max_children=3, scale=0.5, seed=0, dtype="f", batched=True):
    model = RecursiveNet(width, max_children, len(vocab) + 2, init_scale=scale, seed=seed, batched=batched).initialize()
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


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("loss", ["setwise", "pairwise"])
def test_gradients_match_finite_differences(loss, batched):
    sets = [[Tree.fromstring("(S (NP (DT a) (NN b)) (VP (VB c)))"), Tree.fromstring("(S (NP (DT a)) (VP (VB c) (NP (NN b))))")],
            [Tree.fromstring("(NP (NP (NN a)) (PP (IN b) (NP (NN c))))"), Tree.fromstring("(NP (NN a))"), "NP"]]
    gold = [1, 0]
    vocab = label_vocab(sets)
    model = network(vocab, width=3, max_children=2, dtype="float64", batched=batched)
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


def label_dag(labels, children, roots, set_starts, width, log_p=None):
    """A LabelDAG of nodes given children first."""
    heights = []
    for kids in children:
        heights.append(max((heights[c] + 1 for c in kids), default=0))
    table = np.full((len(labels), width), -1, dtype=np.int64)
    for i, kids in enumerate(children):
        table[i, :len(kids)] = kids
    return LabelDAG(np.asarray(labels, dtype=np.int64), table, np.asarray(heights, dtype=np.int64),
                    np.asarray(roots, dtype=np.int64),
                    np.asarray(set_starts, dtype=np.int64), None if log_p is None else np.asarray(log_p))


@st.composite
def random_dags(draw):
    """Random label DAGs: every node's children among the nodes before it
    (shared by several parents, at one or several positions, repeated),
    roots anywhere (a root may be another's child, or a root twice)."""
    n_labels, width = draw(st.integers(2, 6)), draw(st.integers(1, 4))
    n = draw(st.integers(1, 25))
    children = [draw(st.lists(st.integers(0, i - 1), max_size=width)) if i else [] for i in range(n)]
    labels = draw(st.lists(st.integers(0, n_labels - 1), min_size=n, max_size=n))
    roots = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8))
    cut = draw(st.integers(0, len(roots)))
    log_p = draw(st.lists(st.floats(-20, 0), min_size=len(roots), max_size=len(roots)))
    return n_labels, width, label_dag(labels, children, roots, [0, cut, len(roots)], width, log_p)


def passes(model, dag, d_scores):
    """Scores and every parameter's gradient after one backward pass."""
    for name in model.param_names:
        if model.has_grad(name):
            model.set_grad(name, np.zeros_like(model.get_grad(name)))
    scores, backprop = model.begin_update(dag)
    backprop(np.asarray(d_scores))
    return np.asarray(scores), {name: model.get_grad(name).copy() for name in model.param_names}


def assert_batched_equals_node_by_node(dag, n_labels, width, log_p_input=False, d_scores=None, state=4,
                                       array_path=False):
    """The batched passes (the Cython kernels with numpy ops; height by
    height through the array module with Thinc's generic ops, as cupy's on
    a GPU) give the node-by-node values and gradients."""
    models = [RecursiveNet(state, width, n_labels, init_scale=0.8, seed=3, log_p_input=log_p_input,
                           log_p_a=0.5, log_p_b=1.0, batched=batched).initialize() for batched in (True, False)]
    if array_path:
        models[0].ops = Ops()
    assert all(m.get_param("E").dtype == np.float32 for m in models)
    if d_scores is None:
        d_scores = np.random.default_rng(len(dag.roots)).normal(size=len(dag.roots))
    (fast, grads), (slow, reference) = (passes(m, dag, d_scores) for m in models)
    assert fast.dtype == np.float32
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-5)
    assert set(grads) == set(reference) == ({"E", "W", "b", "o", "v"} if log_p_input else {"E", "W", "b", "o"})
    for name, grad in grads.items():
        assert grad.dtype == np.float32
        np.testing.assert_allclose(grad, reference[name], rtol=1e-4, atol=1e-5, err_msg=name)


@settings(max_examples=80, deadline=None)
@given(random_dags(), st.booleans(), st.booleans())
def test_batched_passes_equal_node_by_node_on_random_dags(drawn, log_p_input, array_path):
    n_labels, width, dag = drawn
    assert_batched_equals_node_by_node(dag, n_labels, width, log_p_input, array_path=array_path)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(trees(), min_size=1, max_size=4), min_size=1, max_size=4), st.integers(1, 4),
       st.booleans())
def test_batched_passes_equal_node_by_node_on_tree_sets(sets, max_children, array_path):
    vocab = label_vocab(sets)
    dag = concat_label_dags([build_label_dag([s], vocab, max_children) for s in sets])
    assert_batched_equals_node_by_node(dag, len(vocab) + 2, max_children, state=13, array_path=array_path)


@pytest.mark.parametrize("state", [25, 37])
def test_weight_gradients_over_many_pairs_equal_node_by_node(state):
    """Positions with hundreds of pairs (the weight gradient's chunks of
    128), a state past 32 floats (two column blocks) and not a multiple of
    its row tiles; the DAG in shallow layers (deep random DAGs amplify
    float32's rounding past any tolerance)."""
    rng = np.random.default_rng(state)
    layer, depth, width = 500, 4, 3
    children = [[] for _ in range(layer)]
    for d in range(1, depth):
        below = range((d - 1) * layer, d * layer)
        children += [sorted(rng.choice(below, size=rng.integers(1, width + 1), replace=False).tolist())
                     for _ in range(layer)]
    roots = rng.choice(range((depth - 1) * layer, depth * layer), size=40, replace=False).tolist()
    dag = label_dag(rng.integers(0, 5, len(children)).tolist(), children, roots, [0, 17, 40], width)
    assert int((dag.layout.pair_bounds[:, -1] - dag.layout.pair_bounds[:, 0]).max()) > 2 * 128
    assert_batched_equals_node_by_node(dag, 5, width, state=state)


@settings(max_examples=60, deadline=None)
@given(st.lists(random_dags(), min_size=1, max_size=4))
def test_a_batch_merges_its_parts_layouts_into_that_of_their_concatenation(drawn):
    """A minibatch's layout, merged from its parts' own, is the layout of
    the parts' nodes concatenated: the same rows in the same order, the
    same fills and pair blocks, each block the same (child, position)
    pairs; the passes over either give the same states bit for bit and the
    same gradients."""
    parts = [dag for _, _, dag in drawn]
    batch = concat_label_dags(parts)
    joined = LabelDAG(batch.labels, batch.children, batch.heights, batch.roots, batch.set_starts, batch.log_p)
    merged, direct = batch.layout, joined.layout
    for name in ("order", "position", "fills", "level_ends", "labels", "pair_bounds"):
        np.testing.assert_array_equal(getattr(merged, name), getattr(direct, name), err_msg=name)

    def edges(layout):
        """Each row's k-th edge as its pair's child row."""
        rows, ks = np.nonzero(layout.pair_of >= 0)
        return sorted(zip(rows.tolist(), ks.tolist(), layout.pair_child[layout.pair_of[rows, ks]].tolist()))

    assert edges(merged) == edges(direct)
    for k, bounds in enumerate(direct.pair_bounds):
        for a, b in zip(bounds[:-1], bounds[1:]):
            assert sorted(merged.pair_child[a:b]) == sorted(direct.pair_child[a:b])
    n_labels, width = max(d[0] for d in drawn), max(d[1] for d in drawn)
    model = RecursiveNet(5, width, n_labels, init_scale=0.8, seed=2).initialize()
    d_scores = np.random.default_rng(0).normal(size=len(batch.roots))
    (fast, grads), (slow, reference) = passes(model, batch, d_scores), passes(model, joined, d_scores)
    np.testing.assert_array_equal(node_states(model, batch), node_states(model, joined))
    np.testing.assert_array_equal(fast, slow)
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, reference[name], rtol=1e-6, atol=1e-7, err_msg=name)


def test_overlapping_passes_keep_their_own_work_arrays():
    """The kernels reuse their work arrays between passes: two
    ``begin_update`` before either backprop (and a predict between them)
    give each pass its own, so the gradients equal those of passes one
    after the other; a backprop runs once."""
    dags = [label_dag([1, 0, 2, 2, 1], [[], [], [0, 1], [1, 0, 0], [2, 3, 1]], [4, 2, 4], [0, 2, 3], 3),
            label_dag([0, 1, 2], [[], [0], [1, 0]], [2, 1], [0, 2], 3)]
    d_scores = [np.array([1.0, -2.0, 0.5], dtype="f"), np.array([0.3, -1.0], dtype="f")]
    model = RecursiveNet(6, 3, 3, init_scale=0.8, seed=4).initialize()
    one_by_one = [passes(model, dag, d)[1] for dag, d in zip(dags, d_scores)]
    (first, back_first), (second, back_second) = (model.begin_update(dag) for dag in dags)
    model.predict(dags[0])
    for backprop, d, expected in ((back_second, d_scores[1], one_by_one[1]), (back_first, d_scores[0], one_by_one[0])):
        for name in model.param_names:
            model.set_grad(name, np.zeros_like(model.get_grad(name)))
        backprop(d)
        for name, grad in expected.items():
            np.testing.assert_allclose(model.get_grad(name), grad, rtol=1e-6, atol=1e-7, err_msg=name)
    with pytest.raises(StructPrefError, match="once"):
        back_first(d_scores[0])


def test_batched_kernels_saturate_and_match_tanh():
    """Pre-activations near 0 (the kernels' tanh returns tiny inputs as they
    are), in its curved part, and far in both tails (it clamps them; there
    1 − u² keeps only a few single-precision digits, hence the looser
    gradients) on a state wider than one block of eight."""
    dag = label_dag([1, 0, 2, 2, 1], [[], [], [0, 1], [1, 0, 0], [2, 3, 1]], [4, 2, 4], [0, 2, 3], 3)
    for scale, grad_rtol in ((1e-5, 1e-4), (0.3, 1e-4), (30.0, 1e-2)):
        models = [RecursiveNet(19, 3, 3, init_scale=scale, seed=5, batched=batched).initialize()
                  for batched in (True, False)]
        (fast, grads), (slow, reference) = (passes(m, dag, [1.0, -2.0, 0.5]) for m in models)
        np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-6 * scale ** 2)
        for name, grad in grads.items():
            np.testing.assert_allclose(grad, reference[name], rtol=grad_rtol,
                                       atol=grad_rtol * np.abs(reference[name]).max(), err_msg=name)


def test_batched_passes_by_hand():
    """Leaves 0, 1; node 2 = (0, 1); node 3 = (1, 0, 0); node 4 = (2, 3, 1):
    child 0 is shared at positions 0, 1 and 2, node 1 at 0, 1 and 2; roots 4,
    2 (a child of 4) and 4 again."""
    dag = label_dag([1, 0, 2, 2, 1], [[], [], [0, 1], [1, 0, 0], [2, 3, 1]], [4, 2, 4], [0, 2, 3], 3)
    assert_batched_equals_node_by_node(dag, 3, 3, d_scores=[1.0, -2.0, 0.5])
    model = RecursiveNet(2, 3, 3, init_scale=0.8, seed=1).initialize()
    E, W, b = (model.get_param(n).astype(float) for n in ("E", "W", "b"))
    u = {0: np.tanh(b + E[1]), 1: np.tanh(b + E[0])}
    u[2] = np.tanh(b + E[2] + W[0] @ u[0] + W[1] @ u[1])
    u[3] = np.tanh(b + E[2] + W[0] @ u[1] + W[1] @ u[0] + W[2] @ u[0])
    u[4] = np.tanh(b + E[1] + W[0] @ u[2] + W[1] @ u[3] + W[2] @ u[1])
    np.testing.assert_allclose(node_states(model, dag), np.stack([u[i] for i in range(5)]), rtol=1e-5)


def test_levels_must_put_nodes_above_their_children():
    dag = label_dag([0, 1], [[], [0]], [1], [0, 1], 1)
    dag.heights = np.array([0, 0])  # the child on its parent's level
    with pytest.raises(StructPrefError, match="above its children"):
        RecursiveNet(2, 1, 2).initialize().predict(dag)

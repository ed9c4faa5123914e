"""Kernel perceptron over preference sets and the L_r metric (Menchetti et al.
2005, §3.1, §5.3 and eq. 8): the dual learner against a primal averaged
perceptron on explicit vectors, and on real attachment sets with tree
kernels."""
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree
from thinc.api import Adam

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.incremental import CandidateSets, foot_class, preference_sets_of, set_classes
from spacy_structpref.kernels import gram
from spacy_structpref.learners import (KernelPerceptron, LinearKernel, RecursiveNetLearner, Schedule,
                                       SpecialisedLearner, TreeKernel, fit, gold_rank, loss_at_r)
from spacy_structpref.trees import SymbolTable


def primal_perceptron(sets, gold, loss, epochs, seed, w=None, w_sum=None, T=0):
    """Reference: the averaged perceptron with an explicit weight vector,
    w_sum accumulating w after every example (pair or set)."""
    dim = sets[0].shape[1]
    w = np.zeros(dim) if w is None else w
    w_sum = np.zeros(dim) if w_sum is None else w_sum
    order = [i for i, g in enumerate(gold) if g is not None and len(sets[i]) > 1]
    rng = random.Random(seed)
    for epoch in range(epochs):
        if epoch:
            rng.shuffle(order)
        for i in order:
            X, g = sets[i], gold[i]
            wrong = [j for j in range(len(X)) if j != g]
            if loss == "setwise":
                u = X @ w
                j = max(wrong, key=lambda k: u[k])
                if u[j] >= u[g]:
                    w = w + X[g] - X[j]
                T += 1
                w_sum = w_sum + w
            else:
                for j in wrong:
                    if X[j] @ w >= X[g] @ w:
                        w = w + X[g] - X[j]
                    T += 1
                    w_sum = w_sum + w
    return w, w_sum, T


@st.composite
def problems(draw, dim=None):
    dim = draw(st.integers(2, 5)) if dim is None else dim
    n_sets = draw(st.integers(1, 12))
    sets, gold = [], []
    for _ in range(n_sets):
        k = draw(st.integers(1, 5))
        X = draw(st.lists(st.lists(st.integers(-2, 2), min_size=dim, max_size=dim),
                          min_size=k, max_size=k))
        sets.append(np.array(X, dtype=float))
        gold.append(draw(st.one_of(st.none(), st.integers(0, k - 1))))
    return sets, gold


@settings(max_examples=200, deadline=None)
@given(problems(), st.sampled_from(["pairwise", "setwise"]), st.integers(1, 3),
       st.integers(0, 5), st.integers(1, 4))
def test_dual_equals_primal(problem, loss, epochs, seed, batch_size):
    """fit's batches cut a pass, and do not change it: the perceptron updates set by set."""
    sets, gold = problem
    learner = KernelPerceptron(LinearKernel(), loss=loss, seed=seed)
    fit(learner, sets, gold, schedule=Schedule(epochs=epochs, batch_size=batch_size))
    w, w_sum, T = primal_perceptron(sets, gold, loss, epochs, seed)
    assert learner.n_examples == T
    last = KernelPerceptron(LinearKernel(), loss=loss, seed=seed, average=False)
    fit(last, sets, gold, schedule=Schedule(epochs=epochs))
    for X in sets:
        np.testing.assert_allclose(learner.utilities(X), X @ w_sum / max(T, 1), atol=1e-9)
        np.testing.assert_allclose(last.utilities(X), X @ w, atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(st.data(), st.sampled_from(["pairwise", "setwise"]))
def test_fit_again_goes_on(data, loss):
    first = data.draw(problems(dim=3))
    second = data.draw(problems(dim=3))
    learner = KernelPerceptron(LinearKernel(), loss=loss)
    fit(fit(learner, *first), *second)
    w, w_sum, T = primal_perceptron(*first, loss, 1, 0)
    w, w_sum, T = primal_perceptron(*second, loss, 1, 0, w, w_sum, T)
    for X in first[0] + second[0]:
        np.testing.assert_allclose(learner.utilities(X), X @ w_sum / max(T, 1), atol=1e-9)


def test_loss_at_r_by_hand():
    utilities = [[0.1, 0.9, 0.5], [0.3, 0.3], [2.0], [1.0, 0.0, 3.0, 2.0], []]
    gold = [1, 0, 0, 0, None]
    # ranks: 1; 2 (a tie counts against the gold); 1; 3; none (error everywhere)
    assert [gold_rank(u, g) for u, g in zip(utilities, gold)] == [1, 2, 1, 3, float("inf")]
    assert loss_at_r(utilities, gold, r=(1, 2, 3)) == {1: 3 / 5, 2: 2 / 5, 3: 1 / 5}
    # equal up to rounding (summation order) is a tie; a real difference is not
    assert gold_rank([0.3, 0.1 + 0.2], 0) == 2 and gold_rank([1e6, 1e6 * (1 - 1e-12)], 1) == 2
    assert gold_rank([0.3, 0.3 - 1e-7], 0) == 1


def test_bad_input():
    with pytest.raises(StructPrefError, match="loss must be"):
        KernelPerceptron(LinearKernel(), loss="listwise")
    with pytest.raises(StructPrefError, match="epochs"):
        Schedule(epochs=0)
    learner = KernelPerceptron(LinearKernel())
    with pytest.raises(StructPrefError, match="outside a set of 2"):
        fit(learner, [np.eye(2)], [2])
    with pytest.raises(StructPrefError, match="2 preference sets but 1 gold"):
        fit(learner, [np.eye(2), np.eye(2)], [0])
    with pytest.raises(StructPrefError, match="takes no keys"):
        fit(learner, [np.eye(2)], [0], ["a"])
    with pytest.raises(StructPrefError, match="steps by itself"):
        fit(learner, [np.eye(2)], [0], schedule=Schedule(optimizer=Adam(0.01)))
    with pytest.raises(StructPrefError, match="patience"):
        fit(learner, [np.eye(2)], [0], validation=([np.eye(2)], [0]))
    with pytest.raises(StructPrefError, match="patience"):
        fit(learner, [np.eye(2)], [0], schedule=Schedule(patience=1))
    with pytest.raises(StructPrefError, match="at least one preference set"):
        loss_at_r([], [])
    with pytest.raises(StructPrefError, match="r must be >= 1"):
        loss_at_r([[1.0]], [0], r=(0,))
    assert learner.predict([[]]) == [None]


@pytest.mark.parametrize("loss", ["setwise", "pairwise"])
def test_tree_kernel_perceptron_learns_attachment(attachment_sets, loss):
    (train, train_gold), (dev, dev_gold) = attachment_sets
    kernel = TreeKernel(lam=0.4)
    learner = fit(KernelPerceptron(kernel, loss=loss), train, train_gold)
    assert learner.n_updates > 0 and [len(c.items) for c in learner.chunks] == [learner.n_support]
    utilities = [learner.utilities(c) for c in dev]
    L = loss_at_r(utilities, dev_gold, r=(1, 5))
    # chance: a uniformly random pick is wrong with probability 1 - 1/|set|
    chance = np.mean([1 - 1 / len(c) if g is not None else 1 for c, g in zip(dev, dev_gold)])
    assert L[1] < 0.6 * chance and L[5] < L[1]
    # the chunked support pool gives the utilities of one flat sum over all support
    items = [item for chunk in learner.chunks for item in chunk.items]
    coef = np.concatenate([learner._coefficients(chunk, True) for chunk in learner.chunks])
    K = gram(items, dev[0], lam=0.4, normalize=True)
    np.testing.assert_allclose(utilities[0], coef @ K, rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def ptb_preference_sets(ptb_inventory_300):
    inventory = ptb_inventory_300
    train = preference_sets_of(ptb_trees("train")[:100], inventory)
    dev = preference_sets_of(ptb_trees("dev")[:5], inventory)
    return train, dev


@pytest.mark.parametrize("loss,n_sets", [("setwise", None), ("pairwise", 300)])
def test_dag_sets_train_like_trees(ptb_preference_sets, loss, n_sets, tmp_path):
    train, dev = ptb_preference_sets
    train, gold = train[:n_sets], [s.gold for s in train[:n_sets]]
    by_trees = fit(KernelPerceptron(TreeKernel(lam=0.4), loss=loss), [s.trees(True) for s in train], gold)
    kernel = TreeKernel(lam=0.4)
    by_dags = fit(KernelPerceptron(kernel, loss=loss), [s.dag(kernel.symbols, True) for s in train], gold)
    assert by_dags.n_updates == by_trees.n_updates > 0 and by_dags.n_support == by_trees.n_support
    assert [c.items for c in by_dags.chunks] == [c.items for c in by_trees.chunks]
    by_dags.to_disk(tmp_path / "vp")
    loaded = KernelPerceptron(TreeKernel(lam=0.4)).from_disk(tmp_path / "vp")
    for s in dev:
        expected = by_trees.utilities(s.trees(True))
        np.testing.assert_allclose(by_dags.utilities(s.dag(kernel.symbols, True)), expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(loaded.utilities(s.trees(True)), expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(StructPrefError, match="kernel.symbols"):
        by_dags.utilities(dev[0].dag(SymbolTable(), True))


def test_sets_built_on_access(ptb_preference_sets):
    train, dev = ptb_preference_sets
    train, gold = train[:300], [s.gold for s in train[:300]]
    kernel = TreeKernel(lam=0.4)
    lazy = CandidateSets(train, kernel.symbols, reduced=True)
    assert len(lazy) == 300 and len(lazy[10:20]) == 10
    assert list(lazy[3]) == train[3].trees(True) and list(lazy[10:20][2]) == train[12].trees(True)
    assert lazy.sizes() == [len(lazy[i]) for i in range(300)] and lazy[10:20].sizes() == lazy.sizes()[10:20]
    by_list = fit(KernelPerceptron(kernel), [s.dag(kernel.symbols, True) for s in train], gold)
    by_access = fit(KernelPerceptron(kernel), lazy, gold)
    assert by_access.n_updates == by_list.n_updates > 0
    for s in dev:
        np.testing.assert_allclose(by_access.utilities(s.dag(kernel.symbols, True)),
                                   by_list.utilities(s.dag(kernel.symbols, True)), rtol=1e-12)
    spec = fit(SpecialisedLearner(KernelPerceptron(kernel)), lazy, gold, set_classes(train))
    assert set(spec.learners) <= {foot_class(s.foot) for s in train} and len(spec.learners) > 3


def test_specialised_learner_saves_and_loads(ptb_preference_sets, tmp_path):
    train, dev = ptb_preference_sets
    train, keys = train[:300], set_classes(train[:300])
    gold = [s.gold for s in train]
    symbols = SymbolTable()
    spec = SpecialisedLearner(KernelPerceptron(TreeKernel(0.4, symbols=symbols)))
    fit(spec, CandidateSets(train, symbols, reduced=True), gold, keys)
    spec.to_disk(tmp_path / "vp")
    loaded = SpecialisedLearner(KernelPerceptron(TreeKernel(0.4))).from_disk(tmp_path / "vp")
    assert sorted(loaded.learners) == sorted(spec.learners)
    shared = loaded.learners[keys[0]].kernel.symbols  # one table: one DAG per set serves all
    assert all(x.kernel.symbols is shared for x in loaded.learners.values())
    for s in dev:
        key = foot_class(s.foot)
        np.testing.assert_allclose(loaded.utilities(s.dag(shared, True), key),
                                   spec.utilities(s.dag(symbols, True), key), rtol=1e-12)
    teacher = next(s for s in train if s.gold is not None and len(s) > 1)
    fit(loaded, [teacher.trees(True)], [teacher.gold], ["a key never seen"])  # a clone of the prototype
    assert loaded.learners["a key never seen"].kernel.symbols is shared
    with pytest.raises(StructPrefError, match="not a KernelPerceptron"):
        KernelPerceptron(TreeKernel(0.4)).from_disk(tmp_path / "vp")
    rnn = fit(SpecialisedLearner(RecursiveNetLearner()), [s.trees(True) for s in train[:60]], gold[:60], keys[:60],
              schedule=Schedule(optimizer=Adam(0.01)))
    rnn.to_disk(tmp_path / "rnn")
    again = SpecialisedLearner(RecursiveNetLearner()).from_disk(tmp_path / "rnn")
    for s in dev[:10]:
        key = foot_class(s.foot)
        np.testing.assert_allclose(again.utilities(s.trees(True), key),
                                   rnn.utilities(s.trees(True), key), rtol=1e-6)
    rnn.learners[3] = rnn.learners.pop(keys[0])
    with pytest.raises(StructPrefError, match="only string keys"):
        rnn.to_disk(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_save_and_load(attachment_sets, tmp_path):
    (train, train_gold), (dev, _) = attachment_sets
    learner = fit(KernelPerceptron(TreeKernel(lam=0.3)), train[:200], train_gold[:200])
    learner.to_disk(tmp_path / "vp")
    loaded = KernelPerceptron(TreeKernel(lam=0.3)).from_disk(tmp_path / "vp")
    assert loaded.n_support == learner.n_support and loaded.kernel.lam == 0.3
    for cands in dev[:20]:
        np.testing.assert_allclose(loaded.utilities(cands), learner.utilities(cands), rtol=1e-12)
    # a word that bracket strings would escape survives exactly
    odd = [Tree.fromstring("(S (NP (NN x)) (VP (VB y)))"), Tree.fromstring("(S (NP (NN x)))")]
    odd[0][0][0][0] = "("
    fit(KernelPerceptron(TreeKernel()), [odd], [0]).to_disk(tmp_path / "odd")
    assert KernelPerceptron(TreeKernel()).from_disk(tmp_path / "odd").chunks[0].items[0].leaves()[0] == "("
    linear = fit(KernelPerceptron(LinearKernel(), loss="pairwise"), [np.eye(3)], [1])
    linear.to_disk(tmp_path / "linear")
    np.testing.assert_allclose(KernelPerceptron(LinearKernel()).from_disk(tmp_path / "linear").utilities(np.eye(3)),
                               linear.utilities(np.eye(3)))
    with pytest.raises(StructPrefError, match="holds a saved KernelPerceptron, not a RecursiveNetLearner"):
        RecursiveNetLearner().from_disk(tmp_path / "vp")
    with pytest.raises(StructPrefError, match="does not hold a saved KernelPerceptron"):
        KernelPerceptron(TreeKernel(lam=0.3)).from_disk(tmp_path)


def test_specialised_learner_routes_sets_by_key():
    # class "a" prefers a high feature 0, class "b" a low one: no single
    # linear utility ranks both, one learner per class does
    rng = np.random.default_rng(0)
    sets, gold, keys = [], [], []
    for i in range(120):
        X = rng.normal(size=(4, 2))
        key = "ab"[i % 2]
        sets.append(X)
        gold.append(int(np.argmax(X[:, 0] if key == "a" else -X[:, 0])))
        keys.append(key)
    sets.append(rng.normal(size=(3, 2)))  # a class with nothing to teach gets no learner
    gold.append(None)
    keys.append("c")
    spec = fit(SpecialisedLearner(KernelPerceptron(LinearKernel())), sets, gold, keys, schedule=Schedule(epochs=3))
    assert sorted(spec.learners) == ["a", "b"]
    # each class's learner is exactly a learner trained on that class alone
    for key in "ab":
        alone = fit(KernelPerceptron(LinearKernel()), [X for X, k in zip(sets, keys) if k == key],
                    [g for g, k in zip(gold, keys) if k == key], schedule=Schedule(epochs=3))
        np.testing.assert_allclose(spec.utilities(sets[0], key), alone.utilities(sets[0]))
    test = [rng.normal(size=(4, 2)) for _ in range(100)]
    test_keys = ["ab"[i % 2] for i in range(100)]
    truth = [int(np.argmax(X[:, 0] if k == "a" else -X[:, 0])) for X, k in zip(test, test_keys)]
    accuracy = np.mean([p == t for p, t in zip(spec.predict(test, test_keys), truth)])
    single = fit(KernelPerceptron(LinearKernel()), sets[:-1], gold[:-1], schedule=Schedule(epochs=3))
    single_accuracy = np.mean([p == t for p, t in zip(single.predict(test), truth)])
    assert accuracy > 0.95 and single_accuracy < 0.7
    np.testing.assert_array_equal(spec.utilities(sets[-1], "c"), np.zeros(3))
    with pytest.raises(StructPrefError, match="one of each per set"):
        fit(spec, sets, gold, keys[:-1])
    with pytest.raises(StructPrefError, match="give keys"):
        fit(spec, sets, gold)

"""The recursive neural network over trees and DAGs (Menchetti et al. 2005,
§4): hand-computed values, hash-consed DAG = separate trees, gradients against
finite differences, set losses, and learning real attachment preferences."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree
from thinc.api import Adam, decaying

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.learners import RecursiveNetLearner, loss_at_r
from spacy_structpref.learners.recursive import set_losses
from spacy_structpref.trees import TreeSetDAG
from spacy_structpref.models.recursive import (UNKNOWN, WORD, WORD_KEY, RecursiveNet, build_label_dag,
                                               concat_label_dags, label_vocab)
from spacy_structpref.trees import SymbolTable

from tests.helpers.attachment_data import candidates_and_gold
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


def test_set_losses_by_hand():
    scores = np.array([1.0, 0.0, 2.0, 5.0])
    starts = np.array([0, 3, 4])
    total, d = set_losses(scores, starts, [0, None], "setwise")
    z = np.exp([1.0, 0.0, 2.0])
    assert total == pytest.approx(-np.log(z[0] / z.sum()))
    np.testing.assert_allclose(d, list(z / z.sum() - [1, 0, 0]) + [0.0])
    total, d = set_losses(scores, starts, [0, None], "pairwise")
    assert total == pytest.approx(np.log1p(np.exp(-1.0)) + np.log1p(np.exp(1.0)))
    s1, s2 = 1 / (1 + np.exp(1.0)), 1 / (1 + np.exp(-1.0))
    np.testing.assert_allclose(d, [-(s1 + s2), s1, s2, 0.0])


def test_bad_input():
    with pytest.raises(StructPrefError, match="loss must be"):
        RecursiveNetLearner(loss="listwise")
    with pytest.raises(StructPrefError, match="min_word_sets must be >= 0"):
        RecursiveNetLearner(min_word_sets=-1)
    with pytest.raises(StructPrefError, match="not trained"):
        RecursiveNetLearner().utilities(["NP"])
    with pytest.raises(StructPrefError, match="no preference set"):
        RecursiveNetLearner(optimizer=Adam(0.01)).fit([[Tree.fromstring("(NP (NN a))")]], [0])
    with pytest.raises(StructPrefError, match="fixed settings, not schedules .*: learn_rate"):
        RecursiveNetLearner(optimizer=Adam(decaying(0.01, 1e-4)))
    with pytest.raises(StructPrefError, match="width"):
        RecursiveNet(width=0)
    model = network({"NP": 2})
    with pytest.raises(StructPrefError, match="outside the network's 3 labels"):
        model.predict(build_label_dag([["VP"]], {"VP": 7}, 3))


def test_learns_attachment(tmp_path, ptb_inventory_300):
    inventory = ptb_inventory_300

    (train, train_gold), (dev, dev_gold) = (candidates_and_gold(ptb_trees("train")[:40], inventory),
                                            candidates_and_gold(ptb_trees("dev")[:10], inventory))
    learner = RecursiveNetLearner(epochs=4, optimizer=Adam(0.01), seed=0).fit(train, train_gold)
    assert learner.losses[-1] < learner.losses[0]
    # candidate sets given as DAGs (no trees built) train the same network
    symbols = SymbolTable()
    by_dags = RecursiveNetLearner(epochs=4, optimizer=Adam(0.01), seed=0).fit(
        *candidates_and_gold(ptb_trees("train")[:40], inventory, symbols))
    # (the same sums in another order: float32 rounding drifts slowly over the epochs)
    assert by_dags.losses[0] == pytest.approx(learner.losses[0], rel=1e-5)
    np.testing.assert_allclose(by_dags.losses, learner.losses, rtol=2e-3)
    for c, d in zip(dev[:20], candidates_and_gold(ptb_trees("dev")[:10], inventory, symbols)[0]):
        np.testing.assert_allclose(learner.utilities(d), learner.utilities(c), rtol=1e-5, atol=1e-6)
    L = loss_at_r([learner.utilities(c) for c in dev], dev_gold, r=(1, 5))
    chance = np.mean([1 - 1 / len(c) if g is not None else 1 for c, g in zip(dev, dev_gold)])
    assert L[1] < 0.6 * chance and L[5] < L[1]
    learner.to_disk(tmp_path / "rnn")
    loaded = RecursiveNetLearner().from_disk(tmp_path / "rnn")
    assert loaded.vocab == learner.vocab and loaded.losses == pytest.approx(learner.losses)
    for cands in dev[:20]:
        np.testing.assert_allclose(loaded.utilities(cands), learner.utilities(cands), rtol=1e-6)
    with pytest.raises(StructPrefError, match="nothing to save"):
        RecursiveNetLearner().to_disk(tmp_path / "untrained")
    assert not (tmp_path / "untrained").exists()
    # words as inputs of their own: the saved vocabulary carries them
    lexical = RecursiveNetLearner(epochs=1, optimizer=Adam(0.01), min_word_sets=2).fit(train, train_gold)
    words = {key for key in lexical.vocab if key.startswith(WORD_KEY)}
    assert {WORD_KEY + "the", WORD_KEY + "of"} <= words and len(lexical.vocab) > len(learner.vocab)
    with pytest.raises(StructPrefError, match="min_word_sets = 2, this learner 0"):
        RecursiveNetLearner().from_bytes(lexical.to_bytes())
    reloaded = RecursiveNetLearner(min_word_sets=2).from_bytes(lexical.to_bytes())
    assert reloaded.vocab == lexical.vocab
    for cands in dev[:20]:
        np.testing.assert_allclose(reloaded.utilities(cands), lexical.utilities(cands), rtol=1e-6)


def test_early_stopping_keeps_the_best_validation_epoch(ptb_inventory_300):
    """Menchetti et al. (2005, §6.3.1): early stopping on validation sets.
    The kept weights are those of the best epoch, checked against a net of
    the same seed trained for exactly that many epochs without validation;
    ``patience`` stops where the full curve says it should."""
    from spacy_structpref.learners import SpecialisedLearner

    inventory = ptb_inventory_300
    symbols = SymbolTable()

    (train, train_gold), (val, val_gold) = (candidates_and_gold(ptb_trees("train")[:15], inventory, symbols),
                                            candidates_and_gold(ptb_trees("dev")[:5], inventory, symbols))

    def net(epochs, patience=0):
        return RecursiveNetLearner(width=6, epochs=epochs, batch_size=4, optimizer=Adam(0.05), seed=1,
                                   patience=patience)

    full = net(8).fit(train, train_gold, validation=(val, val_gold))
    curve = full.validation_losses
    assert len(curve) == len(full.losses) == 8
    assert len(set(curve)) > 2  # each epoch's own weights are scored (not the best so far)
    best = int(np.argmin(curve)) + 1  # the first of equal minima
    assert full.best_epoch == best
    # each recorded error is L_1 of the weights then; the kept ones give the best of them
    assert loss_at_r([full.utilities(c) for c in val], val_gold)[1] == pytest.approx(curve[best - 1])
    reference = net(best).fit(train, train_gold)
    for cands in val[:30]:
        np.testing.assert_allclose(full.utilities(cands), reference.utilities(cands), rtol=1e-5, atol=1e-6)
    # the saved weights are the kept ones
    loaded = RecursiveNetLearner(width=6).from_bytes(full.to_bytes())
    np.testing.assert_allclose(loaded.utilities(val[0]), full.utilities(val[0]), rtol=1e-6)
    # patience p stops after p epochs in a row without a new best
    for patience in (1, 2):
        stopped = net(8, patience).fit(train, train_gold, validation=(val, val_gold))
        run, best_so_far, since = 0, np.inf, 0
        for error in curve:
            run += 1
            best_so_far, since = (error, 0) if error < best_so_far else (best_so_far, since + 1)
            if since >= patience:
                break
        assert stopped.validation_losses == pytest.approx(curve[:run])
    # specialised: each class's net stops on the validation sets of its class
    keys = [len(c) % 2 for c in train]
    val_keys = [len(c) % 2 for c in val]
    spec = SpecialisedLearner(net(3)).fit(train, train_gold, keys, validation=(val, val_gold, val_keys))
    for key, learner in spec.learners.items():
        members = [i for i, k in enumerate(val_keys) if k == key]
        assert len(learner.validation_losses) == 3
        assert loss_at_r([learner.utilities(val[i]) for i in members],
                         [val_gold[i] for i in members])[1] == pytest.approx(min(learner.validation_losses))
    with pytest.raises(StructPrefError, match="patience"):
        RecursiveNetLearner(patience=-1)
    with pytest.raises(StructPrefError, match="validation is a pair"):
        net(1).fit(train, train_gold, validation=(val,))

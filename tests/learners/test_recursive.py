"""The recursive-network learner (Menchetti et al. 2005, §4 and §6.3.1):
set losses by hand, learning real attachment preferences, and early stopping
on validation sets."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thinc.api import Adam

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.learners import RecursiveNetLearner, Schedule, fit, loss_at_r
from spacy_structpref.learners.recursive import set_losses
from spacy_structpref.models.recursive import WORD_KEY
from spacy_structpref.trees import SymbolTable

from tests.helpers.attachment_data import candidates_and_gold


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


def set_losses_one_by_one(scores, starts, gold, loss):
    """The set losses set by set, straight from their formulas."""
    d_scores, total = np.zeros(len(scores)), 0.0
    for s, g in enumerate(gold):
        lo, hi = starts[s], starts[s + 1]
        if g is None:
            continue
        u = np.asarray(scores[lo:hi], dtype=float)
        if loss == "setwise":
            p = np.exp(u - u.max())
            p /= p.sum()
            total -= np.log(p[g])
            d_scores[lo:hi] = p - np.eye(hi - lo)[g]
        else:
            wrong = np.arange(hi - lo) != g
            total += np.log1p(np.exp(u[wrong] - u[g])).sum()
            sig = 1 / (1 + np.exp(u[g] - u[wrong]))
            d_scores[lo:hi][wrong] = sig
            d_scores[lo + g] = -sig.sum()
    return total, d_scores


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.floats(-30, 30), max_size=6), min_size=1, max_size=6), st.data(),
       st.sampled_from(["setwise", "pairwise"]))
def test_set_losses_equal_them_set_by_set(sets, data, loss):
    """Sets of any size (empty ones included), with or without a gold candidate."""
    gold = [data.draw(st.none() | st.integers(0, len(s) - 1)) if s else None for s in sets]
    scores = np.array([x for s in sets for x in s])
    starts = np.cumsum([0] + [len(s) for s in sets])
    total, d = set_losses(scores, starts, gold, loss)
    ref_total, ref_d = set_losses_one_by_one(scores, starts, gold, loss)
    assert total == pytest.approx(ref_total, rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(d, ref_d, rtol=1e-9, atol=1e-12)


def test_learns_attachment(tmp_path, ptb_inventory_300, attachment_sets):
    inventory = ptb_inventory_300
    (train, train_gold), (dev, dev_gold) = attachment_sets
    learner = fit(RecursiveNetLearner(seed=0), train, train_gold, schedule=Schedule(epochs=4, optimizer=Adam(0.01)))
    assert learner.log.losses[-1] < learner.log.losses[0]
    # candidate sets given as DAGs (no trees built) train the same network
    symbols = SymbolTable()
    by_dags = fit(RecursiveNetLearner(seed=0), *candidates_and_gold(ptb_trees("train")[:40], inventory, symbols),
                  schedule=Schedule(epochs=4, optimizer=Adam(0.01)))
    # (the same sums in another order: float32 rounding drifts slowly over the epochs)
    assert by_dags.log.losses[0] == pytest.approx(learner.log.losses[0], rel=1e-5)
    np.testing.assert_allclose(by_dags.log.losses, learner.log.losses, rtol=5e-3)
    for c, d in zip(dev[:20], candidates_and_gold(ptb_trees("dev")[:10], inventory, symbols)[0]):
        np.testing.assert_allclose(learner.utilities(d), learner.utilities(c), rtol=1e-5, atol=1e-6)
    L = loss_at_r([learner.utilities(c) for c in dev], dev_gold, r=(1, 5))
    chance = np.mean([1 - 1 / len(c) if g is not None else 1 for c, g in zip(dev, dev_gold)])
    assert L[1] < 0.6 * chance and L[5] < L[1]
    learner.to_disk(tmp_path / "rnn")
    loaded = RecursiveNetLearner().from_disk(tmp_path / "rnn")
    assert loaded.vocab == learner.vocab and loaded.log.losses == pytest.approx(learner.log.losses)
    for cands in dev[:20]:
        np.testing.assert_allclose(loaded.utilities(cands), learner.utilities(cands), rtol=1e-6)
    with pytest.raises(StructPrefError, match="nothing to save"):
        RecursiveNetLearner().to_disk(tmp_path / "untrained")
    assert not (tmp_path / "untrained").exists()
    # words as inputs of their own: the saved vocabulary carries them
    lexical = fit(RecursiveNetLearner(min_word_sets=2), train, train_gold, schedule=Schedule(optimizer=Adam(0.01)))
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

    def net():
        return RecursiveNetLearner(width=6, seed=1)

    def schedule(epochs, patience=0):
        return Schedule(epochs=epochs, batch_size=4, optimizer=Adam(0.05), patience=patience)

    full = fit(net(), train, train_gold, validation=(val, val_gold), schedule=schedule(8))
    curve = full.log.validation
    assert len(curve) == len(full.log.losses) == 8
    assert len(set(curve)) > 2  # each epoch's own weights are scored (not the best so far)
    best = int(np.argmin(curve)) + 1  # the first of equal minima
    assert full.log.best_epoch == best
    # each recorded error is L_1 of the weights then; the kept ones give the best of them
    assert loss_at_r([full.utilities(c) for c in val], val_gold)[1] == pytest.approx(curve[best - 1])
    reference = fit(net(), train, train_gold, schedule=schedule(best, None))
    for cands in val[:30]:
        np.testing.assert_allclose(full.utilities(cands), reference.utilities(cands), rtol=1e-5, atol=1e-6)
    # the saved weights are the kept ones
    loaded = RecursiveNetLearner(width=6).from_bytes(full.to_bytes())
    np.testing.assert_allclose(loaded.utilities(val[0]), full.utilities(val[0]), rtol=1e-6)
    # patience p stops after p epochs in a row without a new best
    for patience in (1, 2):
        stopped = fit(net(), train, train_gold, validation=(val, val_gold), schedule=schedule(8, patience))
        run, best_so_far, since = 0, np.inf, 0
        for error in curve:
            run += 1
            best_so_far, since = (error, 0) if error < best_so_far else (best_so_far, since + 1)
            if since >= patience:
                break
        assert stopped.log.validation == pytest.approx(curve[:run])
    # specialised: each class's net stops on the validation sets of its class
    keys = [len(c) % 2 for c in train]
    val_keys = [len(c) % 2 for c in val]
    spec = fit(SpecialisedLearner(net()), train, train_gold, keys, validation=(val, val_gold, val_keys),
               schedule=schedule(3))
    for key, learner in spec.learners.items():
        members = [i for i, k in enumerate(val_keys) if k == key]
        assert len(learner.log.validation) == 3
        assert loss_at_r([learner.utilities(val[i]) for i in members],
                         [val_gold[i] for i in members])[1] == pytest.approx(min(learner.log.validation))
    with pytest.raises(StructPrefError, match="patience"):
        Schedule(patience=-1)
    with pytest.raises(StructPrefError, match="validation is"):
        fit(net(), train, train_gold, validation=(val,), schedule=schedule(1))


def test_batched_and_node_by_node_nets_train_alike_and_share_saves(ptb_inventory_300):
    """The batched network (float32, level by level) and its node-by-node
    reference (double precision) take the same steps from the same seed,
    up to float32 rounding, and read each other's saves; weights of another
    dtype are refused."""
    from thinc.api import Model

    symbols = SymbolTable()
    train, gold = candidates_and_gold(ptb_trees("train")[:12], ptb_inventory_300, symbols)
    # Adam's eps well above float32 rounding: with the default 1e-8 a gradient component near zero moves
    # its weight by ±lr on the sign of its rounding error, and the two runs drift apart by chance
    nets = [fit(RecursiveNetLearner(width=6, seed=2, batched=batched), train, gold,
                schedule=Schedule(epochs=3, batch_size=8, optimizer=Adam(0.01, eps=1e-4))) for batched in (True, False)]
    assert nets[1].log.losses[-1] < nets[1].log.losses[0] - 0.05
    np.testing.assert_allclose(nets[0].log.losses, nets[1].log.losses, rtol=1e-5)
    for cands in train[:10]:
        np.testing.assert_allclose(nets[0].utilities(cands), nets[1].utilities(cands), rtol=1e-4, atol=1e-4)
    slow = RecursiveNetLearner(width=6, batched=False).from_bytes(nets[0].to_bytes())
    assert slow.model.get_param("E").dtype == np.float32
    for cands in train[:10]:
        np.testing.assert_allclose(slow.utilities(cands), nets[0].utilities(cands), rtol=1e-5, atol=1e-6)
    half = RecursiveNetLearner(width=6).from_bytes(nets[0].to_bytes())
    model: Model = half.model
    for name in model.param_names:
        model.set_param(name, model.get_param(name).astype(np.float16))
    with pytest.raises(StructPrefError, match="float16"):
        RecursiveNetLearner(width=6).from_bytes(half.to_bytes())

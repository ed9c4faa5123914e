"""The linear feature ranker: utilities against a slow reference over the
feature strings, AdaGrad steps against a loop written out, the average of
the weights against snapshots, learning a preference from examples,
save/load, an ensemble of rankers reading bracketed candidates, and bad
settings and saves refused."""
import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from nltk.tree import Tree
from spacy.util import registry

from spacy_structpref.errors import SavedModelError, StructPrefError
from spacy_structpref.learners import EnsembleLearner, FeatureRanker, ScoredTrees, Schedule, fit
from spacy_structpref.learners.features import hashed
from spacy_structpref.reranking.scorers import candidate_set
from spacy_structpref.trees.features import tree_features

from tests.helpers.strategies import trees

CANDIDATES = ["(S (NP (DT the) (NN dog)) (VP (VBZ barks)))",
              "(S (NP (DT the)) (VP (NN dog) (VBZ barks)))",
              "(S (DT the) (NN dog) (VBZ barks))"]


def scored(candidates=CANDIDATES, log_p=(-1.0, -2.0, -2.5)):
    return ScoredTrees(list(candidates), list(log_p))


def reference_utilities(ranker, candidates, log_p):
    """w·f + a·log p + c·n from the feature strings, hashed here by CRC-32."""
    w, (a, c) = ranker.averaged()
    out = []
    for text, lp in zip(candidates, log_p):
        features, n = tree_features(Tree.fromstring(text))
        ids = [zlib.crc32(f.encode("utf8")) & ((1 << ranker.hash_bits) - 1) for f in features]
        out.append(sum(w[i] for i in ids) + a * lp + c * n)
    return np.array(out)


def test_hashed_ids_are_stable_and_in_range():
    ids = hashed(["R:S>NP VP", "HW:NP:dog"], 12)
    assert ids.tolist() == [zlib.crc32(b"R:S>NP VP") & 4095, zlib.crc32(b"HW:NP:dog") & 4095]


def test_untrained_ranker_is_the_parser():
    ranker = FeatureRanker(hash_bits=12)
    assert np.allclose(ranker.utilities(scored()), [-1.0, -2.0, -2.5])


def test_one_step_is_adagrad_on_the_set_loss():
    ranker = FeatureRanker(hash_bits=12, learn_rate=0.5, l2=0.1)
    fs = ranker.feature_set(scored())
    ranker.update([fs], [1])
    # the step written out: softmax of the starting scores (a = 1: the log p), gradient p − e_gold
    p = np.exp([-1.0, -2.0, -2.5])
    p /= p.sum()
    d = p - np.eye(3)[1]
    grad = {}
    for k, ids in enumerate(fs.features):
        for i in ids:
            grad[int(i)] = grad.get(int(i), 0.0) + d[k]
    for i, g in grad.items():  # w was 0: the l2 term is 0, AdaGrad's first step is lr·g/|g|
        assert ranker.w[i] == pytest.approx(-0.5 * g / (abs(g) + 1e-8))
    assert ranker.ac[0] == pytest.approx(1.0 - 0.5 * np.sign(d @ fs.log_p))
    assert ranker.ac[1] == pytest.approx(-0.5 * np.sign(d @ fs.sizes))


def test_utilities_average_the_weights_of_every_step():
    ranker = FeatureRanker(hash_bits=12, learn_rate=0.3)
    sets = [scored(), scored(log_p=(-3.0, -1.0, -0.5))]
    snapshots = []
    for s, g in zip(sets * 2, [1, 0, 2, 1]):
        ranker.update([s], [g])
        snapshots.append((ranker.w.copy(), ranker.ac.copy()))
    w = np.mean([s[0] for s in snapshots], axis=0)
    ac = np.mean([s[1] for s in snapshots], axis=0)
    fs = ranker.feature_set(sets[0])
    expected = [w[f].sum() + ac[0] * lp + ac[1] * n for f, lp, n in zip(fs.features, fs.log_p, fs.sizes)]
    assert np.allclose(ranker.utilities(sets[0]), expected)
    assert np.allclose(ranker.utilities(sets[0]), reference_utilities(ranker, CANDIDATES, [-1.0, -2.0, -2.5]))


@settings(max_examples=25, deadline=None)
@given(st.lists(trees(), min_size=2, max_size=5), st.data())
def test_utilities_match_the_reference(candidate_trees, data):
    texts = [t.pformat(margin=10**6) for t in candidate_trees]
    log_p = data.draw(st.lists(st.floats(-30, 0), min_size=len(texts), max_size=len(texts)))
    gold = data.draw(st.integers(0, len(texts) - 1))
    ranker = FeatureRanker(hash_bits=10, learn_rate=0.2, l2=0.01)
    ranker.update([scored(texts, log_p)] * 3, [gold] * 3)
    assert np.allclose(ranker.utilities(scored(texts, log_p)), reference_utilities(ranker, texts, log_p))


def test_learns_a_preference_the_log_p_disagrees_with():
    # the parser prefers the flat tree; the gold candidate is the one with an NP
    flat, good = "(S (DT a) (NN cat) (VBZ sits))", "(S (NP (DT a) (NN cat)) (VP (VBZ sits)))"
    sets = [scored([flat.replace("cat", w), good.replace("cat", w)], [-1.0, -1.5])
            for w in ("cat", "dog", "hen", "fox", "owl", "yak")]
    ranker = fit(FeatureRanker(hash_bits=14, learn_rate=0.5, seed=1), sets[:4], [1] * 4,
                 schedule=Schedule(epochs=5))
    assert ranker.predict(sets[4:]) == [1, 1]


def test_save_and_load(tmp_path):
    ranker = FeatureRanker(hash_bits=12, l2=0.01)
    ranker.update([scored(), scored(log_p=(-3.0, -1.0, -0.5))], [1, 2])
    loaded = FeatureRanker(hash_bits=12, l2=0.01).from_bytes(ranker.to_bytes())
    assert np.allclose(loaded.utilities(scored()), ranker.utilities(scored()))
    ranker.to_disk(tmp_path / "ranker")
    from_disk = FeatureRanker(hash_bits=12, l2=0.01).from_disk(tmp_path / "ranker")
    assert np.allclose(from_disk.utilities(scored()), ranker.utilities(scored()))
    with pytest.raises(StructPrefError, match="settings"):
        FeatureRanker(hash_bits=13, l2=0.01).from_bytes(ranker.to_bytes())


def test_bad_saves_are_refused():
    ranker = FeatureRanker(hash_bits=8)
    good = ranker._weights()
    for bad in ({**good, "ids": [300], "values": [1.0]}, {**good, "ids": [1], "values": []},
                {**good, "a": float("nan")}, {**good, "n_steps": -1}):
        with pytest.raises(SavedModelError):
            FeatureRanker(hash_bits=8)._set_weights(bad)


def test_an_ensemble_of_rankers_reads_bracketed_candidates():
    ensemble = EnsembleLearner.of_clones(FeatureRanker(hash_bits=12), 2)
    candidates = candidate_set(ensemble, CANDIDATES, [-1.0, -2.0, -2.5])
    assert isinstance(candidates, ScoredTrees) and list(candidates.trees) == CANDIDATES
    fit(ensemble, [candidates] * 2, [1, 1], schedule=Schedule(epochs=2))
    assert np.allclose(ensemble.utilities(candidates),
                       np.mean([m.utilities(candidates) for m in ensemble.members], axis=0))


@pytest.mark.parametrize("kwargs", [{"hash_bits": 4}, {"hash_bits": 25}, {"learn_rate": 0.0}, {"l2": -1.0},
                                    {"log_p_weight": float("inf")}, {"seed": -1}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(StructPrefError):
        FeatureRanker(**kwargs)


def test_bad_candidates_are_refused():
    ranker = FeatureRanker(hash_bits=8)
    with pytest.raises(StructPrefError, match="log probabilit"):
        ranker.utilities(scored(log_p=(-1.0, float("-inf"), -2.0)))
    with pytest.raises(StructPrefError, match="trees"):
        ranker.utilities(ScoredTrees([1, 2], [-1.0, -2.0]))
    with pytest.raises(StructPrefError, match="pairs"):
        ranker.utilities(CANDIDATES)  # trees without their log probabilities
    assert np.allclose(ranker.utilities(list(zip(CANDIDATES, [-1.0, -2.0, -2.5]))), [-1.0, -2.0, -2.5])


def test_registered():
    make = registry.misc.get("spacy_structpref.FeatureRanker.v1")
    ranker = make(hash_bits=10, learn_rate=0.2, l2=0.001, log_p_weight=0.5, seed=3)
    assert ranker.settings() == {"hash_bits": 10, "learn_rate": 0.2, "l2": 0.001, "log_p_weight": 0.5}
    assert ranker.seed == 3 and ranker.clone(seed=4).seed == 4


def test_sets_coming_again_under_their_ids_are_read_once():
    sets, gold = [scored(), scored(log_p=(-3.0, -1.0, -0.5))], [1, 2]
    plain, cached = FeatureRanker(hash_bits=12), FeatureRanker(hash_bits=12)
    reads = []
    read = cached.feature_set
    cached.feature_set = lambda candidates: reads.append(1) or read(candidates)
    for _ in range(3):
        plain.update(sets, gold)
        cached.update(sets, gold, ids=["a", "b"])
    assert len(reads) == 2
    assert np.array_equal(plain.w, cached.w) and np.array_equal(plain.ac, cached.ac)
    with pytest.raises(StructPrefError, match="set ids"):
        cached.update(sets, gold, ids=["a"])


def test_prepared_sets_are_read_as_given_and_not_kept():
    # fit prepares every set before its epochs and gives each a fresh id: a prepared set is used as it
    # comes, so a later fit's sets under an id seen before are not shadowed by the first's
    first, second = FeatureRanker(hash_bits=12), FeatureRanker(hash_bits=12)
    a, b = first.feature_set(scored()), first.feature_set(scored(log_p=(-3.0, -1.0, -0.5)))
    first.update([a], [1], ids=["x"])
    first.update([b], [2], ids=["x"])
    second.update([a], [1])
    second.update([b], [2])
    assert np.array_equal(first.w, second.w) and np.array_equal(first.ac, second.ac)

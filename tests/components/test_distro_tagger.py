"""The distro_tagger component: training on a PTB slice, schedule, nuclear
norm, serialisation, multiprocessing, the label space."""
import random

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.errors import TaggerError
from spacy_structpref.models.distro import effective_rank

from tests.helpers.fixtures import slow_fixture

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _train(nlp, examples, epochs, seed=0):
    opt = nlp.initialize(lambda: examples)
    rng = random.Random(seed)
    examples = list(examples)
    for _ in range(epochs):
        rng.shuffle(examples)
        for i in range(0, len(examples), 16):
            nlp.update(examples[i:i + 16], sgd=opt)
    return opt


def _examples(nlp, split, limit):
    return [Example(Doc(nlp.vocab, words=[t.text for t in d]), d)
            for d in corpus_docs("ptb", split, nlp.vocab, limit=limit)]


@slow_fixture
def trained():
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger", config={"w_steps": 20, "a_steps": 5, "model": {"rank": 12}})
    train = _examples(nlp, "train", 400)
    _train(nlp, train, epochs=4)
    return nlp


def test_learns_ptb_slice(trained):
    dev = _examples(trained, "dev", 150)
    scores = trained.evaluate(dev)
    assert scores["tag_acc"] > 0.85
    doc = trained("The company said it expects a loss .")
    assert [t.tag_ for t in doc][:2] == ["DT", "NN"]
    assert doc[-1].tag_ == "."


def test_label_space(trained):
    tagger = trained.get_pipe("distro_tagger")
    vectors = tagger.label_vectors
    assert set(vectors) == set(tagger.labels) and len(tagger.labels) > 30
    for v in vectors.values():
        assert v.shape == (12,) and numpy.linalg.norm(v) == pytest.approx(1.0, abs=1e-4)
    sims = tagger.most_similar("NN", n=3)
    assert len(sims) == 3 and "NN" not in [t for t, _ in sims]
    # reference: cosine of the raw columns
    ref = sorted(((float(vectors["NN"] @ v), t) for t, v in vectors.items() if t != "NN"),
                 reverse=True)[:3]
    assert [t for t, _ in sims] == [t for _, t in ref]
    with pytest.raises(KeyError, match="unknown tag"):
        tagger.most_similar("NOT-A-TAG")


def test_serialisation_round_trip(trained, tmp_path):
    texts = ["Stocks fell sharply in heavy trading .", "He said so ."]
    before = [[t.tag_ for t in d] for d in trained.pipe(texts)]
    trained.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert [[t.tag_ for t in d] for d in loaded.pipe(texts)] == before
    tagger = trained.get_pipe("distro_tagger")
    fresh = spacy.blank("en").add_pipe("distro_tagger", config={"model": {"rank": 12}})
    fresh.from_bytes(tagger.to_bytes())
    assert fresh.labels == tagger.labels
    numpy.testing.assert_array_equal(fresh.label_matrix, tagger.label_matrix)


def test_every_sublayer_round_trips(trained, tmp_path):
    tagger = trained.get_pipe("distro_tagger")
    tagger.to_disk(tmp_path / "tagger")
    fresh = spacy.blank("en").add_pipe("distro_tagger", config={"model": {"rank": 12}})
    fresh.from_disk(tmp_path / "tagger")
    nodes = list(tagger.model.walk())
    assert [n.name for n in fresh.model.walk()] == [n.name for n in nodes]
    assert {n.name for n in nodes} >= {"sparse_features", "distro_weights", "distro_labels"}
    for old, new in zip(nodes, fresh.model.walk()):
        assert old.param_names == new.param_names
        for name in old.param_names:
            numpy.testing.assert_array_equal(new.get_param(name), old.get_param(name))


def test_multiprocessing(trained):
    texts = ["Stocks fell sharply in heavy trading .", "He said so .", "Prices rose ."] * 4
    single = [[t.tag_ for t in d] for d in trained.pipe(texts)]
    multi = [[t.tag_ for t in d] for d in trained.pipe(texts, n_process=2, batch_size=3)]
    assert multi == single


def test_onehot_baseline_keeps_A_and_alternation_moves_it():
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger", config={"model": {"onehot": True}, "w_steps": 1, "a_steps": 1})
    train = _examples(nlp, "train", 60)
    _train(nlp, train, epochs=1)
    tagger = nlp.get_pipe("distro_tagger")
    M = len(tagger.labels)
    numpy.testing.assert_array_equal(tagger.label_matrix, numpy.eye(M))

    nlp2 = spacy.blank("en")
    nlp2.add_pipe("distro_tagger", config={"model": {"rank": 8}, "w_steps": 2, "a_steps": 2,
                                           "nuclear_lambda": 0.0})
    opt = nlp2.initialize(lambda: train)
    tagger2 = nlp2.get_pipe("distro_tagger")
    A0 = tagger2.label_matrix.copy()
    W0 = None
    for i in range(4):
        before_A = tagger2.label_matrix.copy()
        nlp2.update(train[i * 8:(i + 1) * 8], sgd=opt)
        moved = not numpy.allclose(before_A, tagger2.label_matrix)
        # steps 0, 1 update w only; steps 2, 3 update A only
        assert moved == (i >= 2)
        if i == 1:
            W0 = tagger2.model.get_ref("weights").get_param("WT").copy()
    numpy.testing.assert_array_equal(W0, tagger2.model.get_ref("weights").get_param("WT"))
    assert not numpy.allclose(A0, tagger2.label_matrix)


def test_nuclear_norm_lowers_rank():
    ranks = {}
    for lam in (0.0, 1500.0):
        nlp = spacy.blank("en")
        nlp.add_pipe("distro_tagger", config={"model": {"rank": 10}, "w_steps": 2, "a_steps": 2,
                                              "nuclear_lambda": lam})
        train = _examples(nlp, "train", 80)
        _train(nlp, train, epochs=1)
        ranks[lam] = effective_rank(nlp.get_pipe("distro_tagger").label_matrix)
    assert ranks[0.0] == 10 and ranks[1500.0] < 10


def test_missing_tags_and_errors():
    nlp = spacy.blank("en")
    tagger = nlp.add_pipe("distro_tagger")
    words = ["a", "b", "c"]
    egs = [Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, tags=["X", "Y", "X"])),
           Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, tags=["X", "", "Y"]))]
    opt = nlp.initialize(lambda: egs)
    assert tagger.labels == ("X", "Y")
    numpy.testing.assert_array_equal(tagger.gold_ids(egs[1:]), [0, -1, 1])
    unseen = Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, tags=["X", "Z", "Y"]))
    with pytest.raises(TaggerError, match="gold label 'Z' is not one of the 2 labels"):
        nlp.update([unseen], sgd=opt)
    # labels= that leave out a gold tag: refused at initialize, with or without the tag dictionary
    for min_count in (None, 1):
        explicit = spacy.blank("en").add_pipe("distro_tagger", config={"tag_dict_min_count": min_count})
        with pytest.raises(TaggerError, match="gold label 'Y' is not one of the 1 labels"):
            explicit.initialize(lambda: egs, labels=["X"])
    for _ in range(20):
        nlp.update(egs, sgd=opt)
    assert [t.tag_ for t in nlp(Doc(nlp.vocab, words=words))] == ["X", "Y", "X"]
    assert len(nlp(Doc(nlp.vocab, words=[]))) == 0
    with pytest.raises(ValueError, match="already initialized"):
        tagger.add_label("Z")
    with pytest.raises(ValueError, match="w_steps"):
        spacy.blank("en").add_pipe("distro_tagger", config={"w_steps": 0})
    with pytest.raises(TaggerError, match="strings"):
        tagger.add_label(3)
    with pytest.raises(TaggerError, match="nuclear_lambda"):
        spacy.blank("en").add_pipe("distro_tagger", config={"nuclear_lambda": -1.0})
    with pytest.raises(TypeError):  # spaCy's own check of the callback
        spacy.blank("en").add_pipe("distro_tagger").initialize(lambda: [])


def test_distro_tagger_before_initialize_says_so():
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger")
    with pytest.raises(TaggerError, match="not initialized: call nlp.initialize"):
        nlp("The dog barks")

"""The parse_reranker component: a pipeline that trains, saves and loads with
identical output, honours ``exclude``, refuses a wrong or bad load leaving its
cfg as it was, and gives clear errors."""
import numpy as np
import pytest
import spacy
import srsly
from nltk.tree import Tree
from spacy.tokens import Doc
from spacy.training import Example

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.learners import CompositeKernel, KernelPerceptron, TreeKernel
from spacy_structpref.trees import to_bracketed, tree_to_doc

from tests.helpers.fixtures import slow_fixture

K = 5


def short(split, n, max_len=15):
    return [t for t in ptb_trees(split) if len(t.leaves()) <= max_len][:n]


def examples(nlp, trees):
    return [Example(Doc(nlp.vocab, words=t.leaves()), tree_to_doc(nlp.vocab, t)) for t in trees]


def pipeline(k_parser=K, k_reranker=K, learner=None):
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"k": k_parser, "store_forest": False})
    config = {"k": k_reranker, "n_folds": 3, "n_jobs": 1}
    if learner is not None:
        config["learner"] = learner
    nlp.add_pipe("parse_reranker", config=config)
    return nlp


@slow_fixture
def trained():
    """forest_parser + parse_reranker (setwise VP, composite kernel) trained on
    80 short sentences: initialize jackknifes them, one update pass."""
    nlp = pipeline()
    train = examples(nlp, short("train", 80))
    nlp.initialize(lambda: train)
    losses = {}
    for i in range(0, len(train), 20):
        nlp.update(train[i:i + 20], losses=losses)
    return nlp, losses


@pytest.fixture(scope="module")
def test_docs(trained):
    nlp, _ = trained
    return [Doc(nlp.vocab, words=t.leaves()) for t in short("test", 12)]


def outputs(nlp, docs):
    return [(doc._.rerank["index"], doc._.rerank["scores"], [(s.start, s.end, s.label_) for s in
                                                             doc.spans["constituents"]])
            for doc in nlp.pipe(d.copy() for d in docs)]


def test_pipeline_trains_and_writes_the_chosen_tree(trained, test_docs):
    nlp, losses = trained
    assert losses["parse_reranker"] > 0  # the perceptron made mistakes, so it learned something
    doc = nlp(test_docs[0].copy())
    texts = [text for _, text in doc._.nbest[:K]]
    chosen = Tree.fromstring(texts[doc._.rerank["index"]])
    assert to_bracketed(doc._.parse) == to_bracketed(chosen)
    assert doc._.rerank["score"] == max(doc._.rerank["scores"])
    scores = nlp.evaluate(examples(nlp, short("test", 12)))
    assert 0 < scores["parseval_f"] <= 1


def test_pipeline_round_trips_through_disk_and_bytes(trained, test_docs, tmp_path):
    nlp, _ = trained
    before = outputs(nlp, test_docs)
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    again = spacy.blank("en").from_config(nlp.config).from_bytes(nlp.to_bytes())
    for other in (loaded, again):
        for (i, s, spans), (j, t, spans2) in zip(before, outputs(other, test_docs)):
            assert i == j and spans == spans2
            np.testing.assert_allclose(s, t, rtol=1e-9)


def test_save_honours_exclude_and_refuses_a_wrong_load(trained, tmp_path):
    nlp, _ = trained
    reranker = nlp.get_pipe("parse_reranker")
    reranker.to_disk(tmp_path / "r", exclude=["learner"])
    assert not (tmp_path / "r" / "learner").exists()
    with pytest.raises(StructPrefError, match="parse_reranker"):
        spacy.blank("en").add_pipe("forest_parser").from_disk(tmp_path / "r")
    fresh = pipeline().get_pipe("parse_reranker").from_disk(tmp_path / "r")
    with pytest.raises(StructPrefError, match="not trained"):
        fresh(nlp.get_pipe("forest_parser")(Doc(nlp.vocab, words=["It", "rained", "."])))


def test_clear_errors():
    train = short("train", 10)
    nlp = spacy.blank("en")
    nlp.add_pipe("parse_reranker")
    with pytest.raises(StructPrefError, match="no forest_parser precedes it"):
        nlp.initialize(lambda: examples(nlp, train))
    nlp = pipeline(k_parser=3, k_reranker=K)
    with pytest.raises(StructPrefError, match="keeps 3-best lists"):
        nlp.initialize(lambda: examples(nlp, train))
    with pytest.raises(StructPrefError, match="n_folds"):
        spacy.blank("en").add_pipe("parse_reranker", config={"n_folds": 1})


@pytest.mark.parametrize("saved, match", [
    ({"cfg": {"k": 0}}, "k must be at least 1"),
    ({"cfg": {"min_gap": 1.5}}, "min_gap"),
    ({"cfg": {"k": 7, "beam": 3}}, r"unknown saved setting\(s\) \['beam'\]"),
    ({"cfg": {"k": 7}, "learner": b"\x93not msgpack"}, "cannot load KernelPerceptron"),
])
def test_a_refused_load_leaves_the_cfg_as_it_was(saved, match, tmp_path):
    """The saved cfg was adopted, then checked (and before the learner was
    read): a refused save left it behind."""
    reranker = spacy.blank("en").add_pipe("parse_reranker")
    before = dict(reranker.cfg)
    with pytest.raises(StructPrefError, match=match):
        reranker.from_bytes(srsly.msgpack_dumps({**saved, "cfg": {**reranker.cfg, **saved["cfg"]}}))
    assert reranker.cfg == before
    if "learner" not in saved:
        other = spacy.blank("en").add_pipe("parse_reranker")
        other.cfg = {**other.cfg, **saved["cfg"]}
        other.to_disk(tmp_path / "saved")
        with pytest.raises(StructPrefError, match=match):
            reranker.from_disk(tmp_path / "saved")
        assert reranker.cfg == before

def test_default_learner_is_the_attachment_predictors_but_for_the_kernel():
    """Both defaults come from one block."""
    reranker = spacy.blank("en").add_pipe("parse_reranker").learner
    predictor = spacy.blank("en").add_pipe("attachment_predictor").prototype
    for learner in (reranker, predictor):
        assert isinstance(learner, KernelPerceptron)
        assert (learner.loss, learner.average, learner.seed) == ("setwise", True, 0)
    assert isinstance(reranker.kernel, CompositeKernel) and isinstance(predictor.kernel, TreeKernel)


def test_a_doc_without_a_kbest_list_is_refused(trained):
    nlp, _ = trained
    with pytest.raises(StructPrefError, match="forest_parser must run before"):
        nlp.get_pipe("parse_reranker")(Doc(nlp.vocab, words=["It", "rained", "."]))


def test_the_feature_ranker_trains_in_the_pipeline_and_round_trips(tmp_path):
    nlp = pipeline(learner={"@misc": "spacy_structpref.FeatureRanker.v1", "hash_bits": 16})
    train = examples(nlp, short("train", 40))
    nlp.initialize(lambda: train)
    losses = {}
    nlp.update(train, losses=losses)
    assert losses["parse_reranker"] > 0
    docs = [Doc(nlp.vocab, words=t.leaves()) for t in short("test", 6)]
    before = outputs(nlp, docs)
    nlp.to_disk(tmp_path / "model")
    for (i, s, spans), (j, t, spans2) in zip(before, outputs(spacy.load(tmp_path / "model"), docs)):
        assert i == j and spans == spans2
        np.testing.assert_allclose(s, t, rtol=1e-9)

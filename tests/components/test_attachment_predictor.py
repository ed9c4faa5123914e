"""The spaCy component ``attachment_predictor``: a strongly
incremental parser from the first-pass attachment learners, trained and
saved the spaCy way. The learners are trained on a small train slice."""

import numpy as np
import pytest
import spacy
import srsly
from catalogue import RegistryError
from confection import ConfigValidationError
from nltk.tree import Tree
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from spacy_structpref.components.attachment_predictor import gold_tags
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.errors import StructPrefError
from spacy_structpref.incremental import (OTHERS, candidate_dag, candidate_edits, extend, fallback_edit,
                                          foot_class, preference_sets_of)
from spacy_structpref.trees import TreeSetDAG, doc_to_tree, parse_bracketed, to_bracketed, tree_to_doc

from tests.helpers.fixtures import slow_fixture
from tests.helpers.paths import CONFIGS

CONFIG = CONFIGS / "attachment_predictor.cfg"
UNSEEN = "(TOP (S (NP (DT The) (ZZZ blorp)) (VP (VBD left)) (. .)))"


def tagged(nlp, doc):
    """The Doc's words and gold tags on a new Doc (what a tagger would hand over)."""
    return Doc(nlp.vocab, words=[t.text for t in doc], tags=[t.tag_ for t in doc])


def parses(docs):
    return [(to_bracketed(d._.parse), [t._.attachment for t in d], d._.attach_fallbacks) for d in docs]


@slow_fixture
def trained():
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("attachment_predictor")
    examples = [Example(d, d) for d in corpus_docs("ptb", "train", nlp.vocab, limit=40)]
    nlp.initialize(lambda: examples)
    for i in range(0, len(examples), 20):
        pipe.update(examples[i:i + 20])
    return nlp


@pytest.fixture(scope="module")
def dev(trained):
    return corpus_docs("ptb", "dev", trained.vocab, limit=6)


def test_parse_writes_tree_attachments_and_fallbacks(trained, dev):
    docs = list(trained.pipe([tagged(trained, d) for d in dev], batch_size=4))
    assert parses(docs) == parses(trained(tagged(trained, d)) for d in dev)
    for doc, gold in zip(docs, dev):
        tree = doc._.parse
        assert tree.label() == "TOP" and tree.pos() == [(t.text, t.tag_) for t in gold]
        steps = [t._.attachment for t in doc]
        assert steps[0]["kind"] == "first" and all(s["kind"] in ("attach", "lift") for s in steps[1:])
        assert doc._.attach_fallbacks == sum(s["fallback"] for s in steps)
    back = list(DocBin(docs=docs, store_user_data=True).get_docs(trained.vocab))
    assert [[t._.attachment for t in d] for d in back] == [[t._.attachment for t in d] for d in docs]


def reference_greedy(pipe, words, tags):
    """First-pass attachment chained by hand: at each word the first
    candidate of highest utility, the fallback where none fits."""
    tree = Tree(tags[0], [words[0]])
    for word, tag in zip(words[1:], tags[1:]):
        edits = candidate_edits(tree, tag, pipe.inventory)
        if edits:
            dag = candidate_dag(tree, word, edits, pipe.symbols, reduced=True)
            edit = edits[int(np.argmax(pipe.learner.utilities(dag, foot_class(tag))))]
        else:
            edit = fallback_edit(tree, tag)
        tree = extend(tree, edit[0], edit[1], word)
    return Tree("TOP", [tree])


def test_beam_width_one_is_greedy(trained, dev):
    pipe = trained.get_pipe("attachment_predictor")
    assert pipe.beam_width == 1
    try:
        pipe.softmax_scale = 7.0  # greedy does not depend on it
        for gold in dev:
            doc = trained(tagged(trained, gold))
            words, tags = zip(*gold._.parse.pos())
            assert to_bracketed(doc._.parse) == to_bracketed(reference_greedy(pipe, words, tags))
        pipe.beam_width = 3
        for gold in dev[:2]:
            doc = trained(tagged(trained, gold))
            assert doc._.parse.pos() == gold._.parse.pos()
    finally:
        pipe.beam_width, pipe.softmax_scale = 1, 1.0


def test_utilities_and_learner_for_are_the_foot_class_learners(trained, dev):
    from spacy_structpref.experiments.attachment_pictures import AttachmentModel, word_alternatives
    from spacy_structpref.incremental import preference_sets_of

    pipe = trained.get_pipe("attachment_predictor")
    assert pipe.cfg["specialise"]
    tree = doc_to_tree(dev[0])
    psets = [s for s in preference_sets_of([tree], pipe.inventory) if foot_class(s.foot) in pipe.learner.learners]
    assert psets
    for s in psets:
        dag = s.dag(pipe.symbols, True)
        want = pipe.learner.utilities(dag, foot_class(s.foot))
        assert np.array_equal(pipe.utilities(dag, s.foot), want)
        assert pipe.learner_for(s.foot) is pipe.learner.learners[foot_class(s.foot)]
    model = AttachmentModel.from_predictor(pipe, "trained")
    words, tags = [t.text for t in dev[0]], [t.tag_ for t in dev[0]]
    alts = word_alternatives(model, words, tags, 3, tree)
    s = preference_sets_of([tree], pipe.inventory)[2]
    assert np.array_equal(alts.utilities, pipe.utilities(s.dag(pipe.symbols, True), s.foot))
    untrained = spacy.blank("en").add_pipe("attachment_predictor")
    with pytest.raises(StructPrefError, match="is not trained"):
        untrained.learner_for("NN")
    with pytest.raises(StructPrefError, match="is not trained"):
        AttachmentModel.from_predictor(untrained, "untrained")


def test_fallback_on_an_unseen_tag_is_counted(trained):
    gold = tree_to_doc(trained.vocab, parse_bracketed(UNSEEN))
    doc = trained(tagged(trained, gold))
    assert doc[1]._.attachment["fallback"] and doc._.attach_fallbacks >= 1
    scores = trained.evaluate([Example(tagged(trained, gold), gold)])
    assert scores["attach_fallbacks"] == doc._.attach_fallbacks
    assert 0 <= scores["attach_acc"] < 1  # the unseen word's set has no correct candidate


def test_long_doc_gets_the_flat_tree_at_once_and_is_counted(trained, dev):
    """A Doc over max_length (the search grows about as n^2.5) gets the flat
    tree of its tags at once: every word a fallback step, flagged "too
    long", counted in attach_too_long and attach_fallbacks."""
    import time

    from spacy_structpref.components.attachment_predictor import FALLBACK_KEY
    from spacy_structpref.incremental import IncrementalParse

    pipe = trained.get_pipe("attachment_predictor")
    assert pipe.cfg["max_length"] == 300
    words = [t.text for d in dev for t in d] * 40
    tags = [t.tag_ for d in dev for t in d] * 40

    def first(n: int) -> Doc:
        return Doc(trained.vocab, words=words[:n], tags=tags[:n])

    start = time.perf_counter()
    doc = trained(first(5000))
    assert time.perf_counter() - start < 10
    assert doc.user_data[FALLBACK_KEY] == "too long" and doc._.attach_fallbacks == 5000
    assert to_bracketed(doc._.parse) == to_bracketed(Tree("TOP", [Tree("S", [Tree(t, [w]) for w, t in
                                                                             zip(words[:5000], tags[:5000])])]))
    steps = [t._.attachment for t in doc]
    assert [s["kind"] for s in steps[:3]] == ["first", "lift", "attach"] and all(s["fallback"] for s in steps)
    short = trained(tagged(trained, dev[0]))
    assert FALLBACK_KEY not in short.user_data
    long = trained(first(301))
    assert long.user_data[FALLBACK_KEY] == "too long"
    scores = trained.evaluate([Example(tagged(trained, dev[0]), dev[0]), Example(first(301), long)])
    assert scores["attach_too_long"] == 1
    # the bound is the setting's: a lower one cuts shorter Docs, none cuts none (a short Doc keeps this quick)
    pipe.cfg["max_length"] = 30
    try:
        assert trained(first(31)).user_data[FALLBACK_KEY] == "too long"
        pipe.cfg["max_length"] = None
        assert FALLBACK_KEY not in trained(first(31)).user_data
    finally:
        pipe.cfg["max_length"] = 300
    assert isinstance(pipe.predict([doc])[0], IncrementalParse)


def test_evaluate_scores_parseval_and_attachment(trained, dev):
    pipe = trained.get_pipe("attachment_predictor")
    scores = trained.evaluate([Example(tagged(trained, d), d) for d in dev])
    assert 0.2 < scores["parseval_f"] <= 1 and "parseval_f_40" in scores
    assert scores["attach_acc"] == pytest.approx(1 - pipe.attachment_loss(dev)[1])
    assert 0.5 < scores["attach_acc"] <= 1


def test_round_trip_through_disk_and_bytes(trained, dev, tmp_path):
    trained.to_disk(tmp_path / "model")
    trained.to_disk(tmp_path / "model")  # overwriting an existing save
    # saving packs the perceptrons' support (sums in another order): parse after it
    before = parses(trained.pipe([tagged(trained, d) for d in dev[:3]]))
    loaded = spacy.load(tmp_path / "model")
    assert parses(loaded.pipe([tagged(loaded, d) for d in dev[:3]])) == before
    fresh = spacy.blank("en")
    pipe = fresh.add_pipe("attachment_predictor")
    pipe.from_bytes(trained.get_pipe("attachment_predictor").to_bytes())
    assert parses(fresh.pipe([tagged(fresh, d) for d in dev[:3]])) == before
    # exclude is honoured both ways
    trained.get_pipe("attachment_predictor").to_disk(tmp_path / "no_learner", exclude=["learner"])
    assert sorted(p.name for p in (tmp_path / "no_learner").iterdir()) == [
        "cfg.json", "inventory.json", "structpref_component.json", "trained_on.json"]
    partial = spacy.blank("en").add_pipe("attachment_predictor")
    partial.from_bytes(trained.get_pipe("attachment_predictor").to_bytes(), exclude=["inventory"])
    assert partial.inventory is None
    with pytest.raises(StructPrefError, match="holds a saved SpecialisedLearner"):
        partial.from_disk(tmp_path / "model" / "attachment_predictor" / "learner")


def test_fit_softmax_scale(trained, dev):
    pipe = trained.get_pipe("attachment_predictor")
    try:
        scale = pipe.fit_softmax_scale(dev)
        assert 0 < scale and pipe.cfg["softmax_scale"] == scale
        # a positive scale on a fitted model: larger than the flat a -> 0 limit
        assert scale > 1e-2
    finally:
        pipe.softmax_scale = 1.0


@pytest.mark.parametrize("config, match", [
    ({"beam_width": 0}, "beam_width"),
    ({"beam_width": 10 ** 6}, "beam_width must be an integer from 1 to 100"),
    ({"max_length": 0}, "max_length"),
    ({"max_length": -1}, "max_length"),
    ({"softmax_scale": 0}, "softmax_scale"),
    ({"learner": {"@misc": "spacy_structpref.TreeKernel.v1"}}, "preference learner"),
    ({"learner": {"@misc": "spacy_structpref.SpecialisedLearner.v1",
                  "prototype": {"@misc": "spacy_structpref.RecursiveNetLearner.v1"}}}, "prototype"),
    ({"learner": {"@misc": "spacy_structpref.KernelPerceptron.v1",
                  "kernel": {"@misc": "spacy_structpref.LinearKernel.v1"}}}, "tree kernel"),
])
def test_bad_settings(config, match):
    with pytest.raises(StructPrefError, match=match):
        spacy.blank("en").add_pipe("attachment_predictor", config=config)


def test_clear_errors(trained):
    # spaCy checks the registry names and the types of the settings
    with pytest.raises(RegistryError, match="NoSuchLearner"):
        spacy.blank("en").add_pipe("attachment_predictor",
                                   config={"learner": {"@misc": "spacy_structpref.NoSuchLearner.v1"}})
    with pytest.raises(ConfigValidationError, match="beam_width"):
        spacy.blank("en").add_pipe("attachment_predictor", config={"beam_width": 1.5})
    with pytest.raises(StructPrefError, match="distro_tagger"):
        trained(Doc(trained.vocab, words=["It", "rose", "."]))
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("attachment_predictor")
    words = Doc(nlp.vocab, words=["a"], tags=["DT"])
    with pytest.raises(StructPrefError, match="not trained"):
        pipe(words)
    with pytest.raises(StructPrefError, match="constituents"):
        pipe.initialize(lambda: [Example(words, words)])
    with pytest.raises(StructPrefError, match="sample_size"):
        pipe.initialize(lambda: [Example(words, words)], sample_size=-1)
    with pytest.raises(StructPrefError, match="cache_mb must be an integer"):
        pipe.initialize(lambda: [Example(words, words)], cache_mb=-1)
    with pytest.raises(StructPrefError, match="cannot load"):
        pipe.from_bytes(b"\x93not msgpack")


@pytest.mark.parametrize("saved, match", [
    ({"cfg": {"beam_width": 3}, "inventory": "not json"}, "not a CP inventory"),
    ({"cfg": {"specialise": False}, "learner": b"\x93not msgpack"}, "cannot load KernelPerceptron"),
    ({"cfg": {"beam_width": 3, "beam_size": 3}}, r"unknown saved setting\(s\) \['beam_size'\]"),
])
def test_a_refused_load_leaves_the_component_as_it_was(saved, match):
    """The saved cfg was adopted (and, when specialise changed, the learner
    swapped) before the inventory and the learner were read: a save refused
    there left them behind."""
    pipe = spacy.blank("en").add_pipe("attachment_predictor")
    before = (dict(pipe.cfg), pipe.foot_class, pipe.learner, pipe.inventory)
    with pytest.raises(StructPrefError, match=match):
        pipe.from_bytes(srsly.msgpack_dumps(saved))
    assert (pipe.cfg, pipe.foot_class, pipe.learner, pipe.inventory) == before


def test_gold_tags_augmenter():
    nlp = spacy.blank("en")
    gold = tree_to_doc(nlp.vocab, parse_bracketed("(TOP (S (NP (PRP It)) (VP (VBD rose)) (. .)))"))
    (eg,) = gold_tags(nlp, Example(Doc(nlp.vocab, words=["It", "rose", "."]), gold))
    assert [t.tag_ for t in eg.predicted] == ["PRP", "VBD", "."] and eg.reference is gold


def test_updates_train_the_perceptron_and_the_recursive_net():
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("attachment_predictor", config={"specialise": False})
    examples = [Example(d, d) for d in corpus_docs("ptb", "train", nlp.vocab, limit=10)]
    nlp.initialize(lambda: examples)
    mistakes = [pipe.update(examples)[pipe.name] for _ in range(3)]
    assert mistakes[0] > mistakes[1] > mistakes[2]

    nlp = spacy.blank("en")
    nlp.add_pipe("attachment_predictor", config={"learner": {
        "@misc": "spacy_structpref.RecursiveNetLearner.v1", "width": 8}})
    sgd = nlp.initialize(lambda: examples[:4])
    losses = [nlp.update(examples[:4], sgd=sgd, losses={})["attachment_predictor"] for _ in range(5)]
    assert losses[-1] < losses[0]


def test_passes_read_kept_sets_and_pool_the_support_by_set(dev):
    """A pass over examples seen before reads their kept preference sets
    (nothing more is kept), and a set's support items pool with those of
    its earlier passes; keeping nothing (``cache_mb = 0``) trains the same
    learner."""
    def train(cache_mb):
        nlp = spacy.blank("en")
        pipe = nlp.add_pipe("attachment_predictor", config={"specialise": False})
        examples = [Example(d, d) for d in corpus_docs("ptb", "train", nlp.vocab, limit=10)]
        pipe.initialize(lambda: examples, nlp=nlp, cache_mb=cache_mb)
        pipe.update(examples)
        kept = pipe.set_cache.nbytes
        for _ in range(2):
            pipe.update(examples)
        assert pipe.set_cache.nbytes == kept and (kept > 0) == (cache_mb > 0)
        return pipe

    kept, built = train(1024), train(0)
    assert kept.learner.n_updates == built.learner.n_updates
    assert kept.learner.n_support == built.learner.n_support < 2 * kept.learner.n_updates
    sets = [s.dag(kept.symbols, True) for s in preference_sets_of(kept.gold_trees(dev), kept.inventory)]
    assert sets and all(np.allclose(kept.learner.utilities(c), built.learner.utilities(
        TreeSetDAG(list(c), built.symbols))) for c in sets)


def test_spacy_train_with_the_config(tmp_path):
    from spacy.cli.train import train

    nlp = spacy.blank("en")
    for split, n in (("train", 8), ("dev", 2)):
        DocBin(docs=corpus_docs("ptb", split, nlp.vocab, limit=n)).to_disk(tmp_path / f"{split}.spacy")
    train(CONFIG, tmp_path / "out", overrides={
        "paths.train": str(tmp_path / "train.spacy"), "paths.dev": str(tmp_path / "dev.spacy"),
        "training.max_steps": 2, "training.eval_frequency": 1})
    loaded = spacy.load(tmp_path / "out" / "model-last")
    gold = corpus_docs("ptb", "dev", loaded.vocab, limit=1)[0]
    assert doc_to_tree(loaded(tagged(loaded, gold))).leaves() == [t.text for t in gold]


def test_component_saves_its_foot_classes(tmp_path):
    universal = {"@misc": "spacy_structpref.FootClasses.v1", "tagset": "universal"}
    spacy.blank("en").add_pipe("attachment_predictor", config={"foot_classes": universal}).to_disk(tmp_path / "p")
    loaded = spacy.blank("en").add_pipe("attachment_predictor").from_disk(tmp_path / "p")
    assert loaded.foot_class("NOUN") == "Nouns" and loaded.foot_class("NN") == OTHERS

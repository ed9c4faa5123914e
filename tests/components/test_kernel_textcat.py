"""The kernel_textcat component: it trains on parsed questions, round-trips
through disk and bytes with identical doc.cats, refuses a tampered
coefficient array or a model saved with another kernel (leaving itself as it
was), keeps the word clusters it learnt from the vectors, and gives clear
errors."""
import numpy as np
import pytest
import spacy
import srsly
from spacy.tokens import Doc
from spacy.training import Example

from spacy_structpref.corpora import qc_questions
from spacy_structpref.errors import SavedModelError, StructPrefError

from tests.helpers.fixtures import slow_fixture
from tests.helpers.vectors import set_vectors


def questions(n, split="train", max_len=8):
    return [q for q in qc_questions(split, "coarse") if len(q.words) <= max_len][:n]


def labelled_examples(nlp, qs):
    labels = sorted({"ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"})
    out = []
    for q in qs:
        ref = Doc(nlp.vocab, words=list(q.words))
        ref.cats = {label: float(label == q.label) for label in labels}
        out.append(Example(Doc(nlp.vocab, words=list(q.words)), ref))
    return out


@slow_fixture
def trained(short_ptb_parser_nlp):
    """forest_parser + kernel_textcat (forest + BOW kernel) trained on 40
    short questions; initialize parses them with the forest_parser."""
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", source=short_ptb_parser_nlp)
    nlp.add_pipe("kernel_textcat", config={"kernel": {"name": "forest+bow", "bow_weight": 0.3},
                                           "C_grid": [1.0, 10.0], "dev_every": 4})
    nlp.get_pipe("kernel_textcat").initialize(lambda: labelled_examples(nlp, questions(40)), nlp=nlp)
    return nlp


def test_component_trains_and_writes_cats(trained):
    tc = trained.get_pipe("kernel_textcat")
    assert tc.classifier.C in (1.0, 10.0) and set(tc.classifier.dev_scores) == {1.0, 10.0}
    train = labelled_examples(trained, questions(40))
    docs = list(trained.pipe(Doc(trained.vocab, words=[t.text for t in eg.reference]) for eg in train))
    for doc in docs:
        assert set(doc.cats) == set(tc.labels) and sum(doc.cats.values()) == pytest.approx(1.0)
    right = [max(d.cats, key=d.cats.get) == max(eg.reference.cats, key=eg.reference.cats.get)
             for d, eg in zip(docs, train)]
    assert np.mean(right) >= 0.9  # the training questions are learned
    scores = tc.score([Example(d, eg.reference) for d, eg in zip(docs, train)])
    assert scores["cats_accuracy"] == pytest.approx(np.mean(right))
    assert 0 <= scores["cats_score"] <= 1 and "cats_f_per_type" in scores
    # the figure on the questions held out to choose C, measured before the refit on all 40
    assert scores["cats_held_out_acc"] == tc.classifier.dev_scores[tc.classifier.C]
    # at weight 0 among the factory's score weights, so spacy train keeps it in meta.json, chosen by nothing
    assert trained.config["training"]["score_weights"]["cats_held_out_acc"] == 0.0


def test_component_round_trips_with_identical_cats(trained, tmp_path):
    test = [Doc(trained.vocab, words=list(q.words)) for q in questions(8, "test")]
    before = [d.cats for d in trained.pipe(d.copy() for d in test)]
    trained.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert [d.cats for d in loaded.pipe(d.copy() for d in test)] == before
    via_bytes = spacy.blank("en")
    via_bytes.add_pipe("forest_parser", source=trained)
    via_bytes.add_pipe("kernel_textcat", config={"kernel": {"name": "forest+bow", "bow_weight": 0.3}})
    via_bytes.get_pipe("kernel_textcat").from_bytes(trained.get_pipe("kernel_textcat").to_bytes())
    assert [d.cats for d in via_bytes.pipe(d.copy() for d in test)] == before


def test_tampered_coefficients_are_refused(trained, tmp_path):
    trained.to_disk(tmp_path / "nlp")
    coef = tmp_path / "nlp" / "kernel_textcat" / "model" / "coef.npy"
    values = np.load(coef, allow_pickle=False)
    values[0, 0] += 1.0
    np.save(coef, values, allow_pickle=False)
    with pytest.raises(SavedModelError, match="checksum"):
        spacy.load(tmp_path / "nlp")
    tc = trained.get_pipe("kernel_textcat")
    msg = spacy.util.srsly.msgpack_loads(tc.classifier.to_bytes())
    msg["arrays"]["coef"] = msg["arrays"]["coef"][:-8] + np.float64(3.0).tobytes()
    with pytest.raises(SavedModelError, match="checksum"):
        tc.classifier.__class__(tc.kernel).from_bytes(spacy.util.srsly.msgpack_dumps(msg))


def test_a_model_saved_with_another_kernel_is_refused(trained, tmp_path):
    trained.get_pipe("kernel_textcat").to_disk(tmp_path / "tc")
    nlp = spacy.blank("en")
    other = nlp.add_pipe("kernel_textcat", config={"kernel": {"name": "forest+bow", "bow_weight": 0.5}})
    with pytest.raises(SavedModelError, match="trained with the kernel"):
        other.from_disk(tmp_path / "tc")


def test_a_refused_load_leaves_the_component_as_it_was(trained):
    """The saved settings were adopted unchecked and the trained classifier
    dropped before the model was read: a bad setting was accepted, and a
    refused model left the component untrained with the save's settings."""
    saved = srsly.msgpack_loads(trained.get_pipe("kernel_textcat").to_bytes())
    tc = spacy.blank("en").add_pipe("kernel_textcat", config={"kernel": {"name": "forest+bow", "bow_weight": 0.3}})
    tc.from_bytes(srsly.msgpack_dumps(saved))
    before, classifier = dict(tc.cfg), tc.classifier
    for bad, match in (({"C_grid": [-1.0]}, "C must be a finite number above 0"), ({"dev_every": 1}, "dev_every"),
                       ({"n_threads": 0}, "n_threads")):
        with pytest.raises(StructPrefError, match=match):
            tc.from_bytes(srsly.msgpack_dumps({**saved, "cfg": {**saved["cfg"], **bad}}))
        assert tc.cfg == before and tc.classifier is classifier
    model = srsly.msgpack_loads(saved["model"])
    model["sha256"]["coef"] = "0" * 64
    with pytest.raises(SavedModelError, match="checksum"):
        tc.from_bytes(srsly.msgpack_dumps({"cfg": {**saved["cfg"], "dev_every": 3},
                                           "model": srsly.msgpack_dumps(model)}))
    assert tc.cfg == before and tc.classifier is classifier

def test_clear_errors(trained, short_ptb_parser_nlp):
    with pytest.raises(StructPrefError, match="unknown kernel 'subtree'"):
        spacy.blank("en").add_pipe("kernel_textcat", config={"kernel": {"name": "subtree"}})
    alone = spacy.blank("en")
    tc = alone.add_pipe("kernel_textcat")
    with pytest.raises(StructPrefError, match="no forest_parser precedes it"):
        tc.initialize(lambda: labelled_examples(alone, questions(5)), nlp=alone)
    no_forests = spacy.blank("en")
    no_forests.add_pipe("forest_parser", config={"store_forest": False}).from_bytes(
        short_ptb_parser_nlp.get_pipe("forest_parser").to_bytes(exclude=["cfg"]))
    tc = no_forests.add_pipe("kernel_textcat", config={"kernel": {"name": "forest"}})
    with pytest.raises(StructPrefError, match="store_forest"):
        tc.initialize(lambda: labelled_examples(no_forests, questions(5)), nlp=no_forests)
    with pytest.raises(StructPrefError, match="not trained"):
        tc(Doc(no_forests.vocab, words=["What", "?"]))
    with pytest.raises(StructPrefError, match="empty Doc"):
        trained.get_pipe("kernel_textcat")(Doc(trained.vocab, words=[]))
    with pytest.raises(StructPrefError, match="forest_parser"):  # a Doc that was never parsed
        trained.get_pipe("kernel_textcat")(Doc(trained.vocab, words=["Who", "is", "he", "?"]))
    bad = labelled_examples(trained, questions(3))
    bad[0].reference.cats = {"HUM": 1.0, "LOC": 1.0}
    with pytest.raises(StructPrefError, match="exactly one class"):
        trained.get_pipe("kernel_textcat").initialize(lambda: bad, nlp=trained)
    with pytest.raises(StructPrefError, match="C must be a finite number above 0"):
        spacy.blank("en").add_pipe("kernel_textcat", config={"C_grid": [0.0]})


def test_word_clusters_come_from_the_pipelines_vectors_and_travel_with_the_save(short_ptb_parser_nlp, tmp_path):
    """A kernel with word clusters learns them in initialize from the
    pipeline's static vectors, keeps them in its save (a reload classifies
    the same without the vectors), and a pipeline without vectors is told
    what to do."""
    qs = questions(24)
    rng = np.random.default_rng(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", source=short_ptb_parser_nlp)
    set_vectors(nlp.vocab, {w.lower(): rng.normal(size=8) for q in qs for w in q.words})
    config = {"kernel": {"name": "tree+bow", "word_clusters": 4}, "dev_every": 4}
    tc = nlp.add_pipe("kernel_textcat", config=config)
    tc.initialize(lambda: labelled_examples(nlp, qs), nlp=nlp)
    assert tc.kernel.kernels[0].clusters.n_clusters == 4
    test = [Doc(nlp.vocab, words=list(q.words)) for q in questions(8, "test")]
    before = [d.cats for d in nlp.pipe(d.copy() for d in test)]
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp", exclude=["vocab"])  # the clusters, not the vectors, are read
    assert not loaded.vocab.vectors.shape[0]
    assert [d.cats for d in loaded.pipe(Doc(loaded.vocab, words=[t.text for t in d]) for d in test)] == before
    plain = spacy.blank("en").add_pipe("kernel_textcat", config={"kernel": {"name": "tree+bow"}})
    with pytest.raises(SavedModelError, match="trained with the kernel"):
        plain.from_disk(tmp_path / "nlp" / "kernel_textcat")
    no_vectors = spacy.blank("en")
    no_vectors.add_pipe("forest_parser", source=short_ptb_parser_nlp)
    tc = no_vectors.add_pipe("kernel_textcat", config=config)
    with pytest.raises(StructPrefError, match=r"set \[initialize\] vectors"):
        tc.initialize(lambda: labelled_examples(no_vectors, qs), nlp=no_vectors)

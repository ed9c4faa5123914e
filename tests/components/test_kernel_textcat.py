"""kernel_textcat and its classifier: the forest-kernel Gram matrix equals
the expected tree kernel by enumeration (Zhang et al. 2010), the SVM's
decisions on kernel rows against the support vectors equal scikit-learn's
own on the same Gram matrix, the component trains on parsed questions,
round-trips through disk and bytes with identical doc.cats, refuses a
tampered coefficient array, and gives clear errors."""
import numpy as np
import pytest
import spacy
import srsly
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc
from spacy.training import Example

from spacy_structpref.classification.classifier import KernelClassifier
from spacy_structpref.classification.kernels import (BowDocKernel, ForestDocKernel, SumDocKernel, TreeDocKernel,
                                                     forest_block, named_kernel)
from spacy_structpref.classification.svm import fit_one_vs_rest, fit_tuned, tune_C
from spacy_structpref.corpora import ptb_trees, qc_questions
from spacy_structpref.errors import SavedModelError, StructPrefError
from spacy_structpref.kernels import PreparedForest, forest_gram
from spacy_structpref.trees import SymbolTable, TreeSetDAG

from tests.kernels.test_forests import expected_tree_kernel, forests
from tests.parsing.test_forest_kernel_identity import collins_duffy, posterior_trees

LAM = 0.4


# ------------------------------------------------------------ kernels
@settings(max_examples=25, deadline=None)
@given(st.data(), st.integers(1, 2))
def test_forest_block_is_the_expected_tree_kernel(data, n_threads):
    symbols = SymbolTable()
    pairs = [data.draw(forests(symbols)) for _ in range(3)]
    prepared = [PreparedForest(f) for f, _ in pairs]
    K = forest_block(prepared, None, LAM, n_threads, progress=False)
    expected = np.array([[expected_tree_kernel(f1, w1, f2, w2, LAM, symbols) for f2, w2 in pairs]
                         for f1, w1 in pairs])
    np.testing.assert_allclose(K, expected, rtol=1e-9, atol=1e-12)
    rows = forest_block(prepared[:2], prepared, LAM, n_threads, progress=False)
    np.testing.assert_allclose(rows, expected[:2], rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def parser_nlp():
    """A blank pipeline with a forest_parser whose grammar is read off 300
    short PTB-sample trees (forests kept, 1-best only)."""
    from nltk.tree import Tree

    nlp = spacy.blank("en")
    parser = nlp.add_pipe("forest_parser", config={"k": 1, "store_forest": True, "threshold": 1e-3})
    trees = [t if t.label() == "TOP" else Tree("TOP", [t]) for t in ptb_trees("train") if len(t.leaves()) <= 20]
    parser.initialize_from_trees(trees[:300])
    return nlp


def parsed(nlp, texts):
    return [nlp(Doc(nlp.vocab, words=t.split())) for t in texts]


def test_doc_forest_gram_is_the_normalised_expected_tree_kernel(parser_nlp):
    """On parser forests (Zhang et al. 2010: the forest kernel is the
    expected subset-tree kernel), by enumeration with the plain-Python
    Collins–Duffy kernel; tempering (α) is the same identity on P(e)^α."""
    docs = parsed(parser_nlp, ["He sold the shares .", "Prices fell sharply .", "The company said ."])
    for alpha in (1.0, 2.0):
        kernel = ForestDocKernel(LAM, alpha, None, n_threads=2)
        items = kernel.items(docs)
        K = kernel.gram(kernel.prepare(items))
        dists = [posterior_trees(f, [t.text for t in d]) for f, d in zip(items, docs)]
        assert all(len(d) > 1 for d in dists)  # real ambiguity
        raw = np.array([[sum(p * q * collins_duffy(s, t, LAM) for p, s in a for q, t in b) for b in dists]
                        for a in dists])
        expected = raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw)))
        np.testing.assert_allclose(K, expected, rtol=1e-9)
        np.testing.assert_allclose(K, forest_gram(items, lam=LAM), rtol=1e-12)  # the package's own Gram
        if alpha == 1.0:
            untempered = K
        else:  # tempering changes the kernel
            assert not np.allclose(K, untempered)


def test_tree_and_bow_kernels_against_their_definitions(parser_nlp):
    docs = parsed(parser_nlp, ["He sold the shares .", "He sold the stock .", "Prices fell ."])
    tree = TreeDocKernel(LAM)
    trees = tree.items(docs)
    K = tree.gram(tree.prepare(trees))
    raw = np.array([[collins_duffy(a, b, LAM) for b in trees] for a in trees])
    np.testing.assert_allclose(K, raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw))), rtol=1e-9)
    bow = BowDocKernel()
    Kb = bow.gram(bow.prepare(bow.items(docs)))
    # he, sold, the, ., he sold, sold the: 6 of 8 features shared, each side 8 (uni 5 + bi 4 = 9? count them)
    a = ["he", "sold", "the", "shares", ".", "he sold", "sold the", "the shares", "shares ."]
    b = ["he", "sold", "the", "stock", ".", "he sold", "sold the", "the stock", "stock ."]
    assert Kb[0, 1] == pytest.approx(len(set(a) & set(b)) / np.sqrt(len(a) * len(b)))
    both = SumDocKernel([tree, bow], [0.25, 0.75])
    Ks = both.gram(both.prepare(both.items(docs)))
    np.testing.assert_allclose(Ks, 0.25 * K + 0.75 * Kb, rtol=1e-12)


# ------------------------------------------------------------ the SVM
def test_decisions_on_support_rows_equal_scikit_learns():
    from sklearn.svm import SVC

    rng = np.random.default_rng(0)
    X = rng.normal(size=(70, 4))
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))  # an RBF Gram matrix
    y = np.argmax(X[:, :3], axis=1)  # learnable classes: not every item is a support vector
    model = fit_one_vs_rest(K[:60, :60], y[:60], 3, C=2.0, n_threads=2)
    rows = K[60:, :60][:, model.support]  # new items against the support vectors only
    for c in range(3):
        svc = SVC(kernel="precomputed", C=2.0).fit(K[:60, :60], y[:60] == c)
        np.testing.assert_allclose(model.decision(rows)[:, c], svc.decision_function(K[60:, :60]), atol=1e-9)
    assert len(model.support) < 60  # some training items are not support vectors
    with pytest.raises(StructPrefError, match="support vectors"):
        model.decision(K[60:, :60])


def test_C_is_chosen_on_the_held_out_items_and_refit_on_all():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    K = X @ X.T
    y = (X[:, 0] > 0).astype(int)
    held = np.arange(50) % 10 == 9
    scores = tune_C(K, y, 2, held, [0.01, 1.0])
    model, C, got = fit_tuned(K, y, 2, [0.01, 1.0], held)
    assert got == scores and C == max(scores, key=lambda c: (scores[c], -c))
    np.testing.assert_allclose(model.coef, fit_one_vs_rest(K, y, 2, C).coef)


# ------------------------------------------------------------ the component
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


@pytest.fixture(scope="module")
def trained(parser_nlp):
    """forest_parser + kernel_textcat (forest + BOW kernel) trained on 40
    short questions; initialize parses them with the forest_parser."""
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", source=parser_nlp)
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
    for bad, match in (({"C_grid": [-1.0]}, "C must be a positive"), ({"dev_every": 1}, "dev_every"),
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

def test_clear_errors(trained, parser_nlp):
    with pytest.raises(StructPrefError, match="unknown kernel 'subtree'"):
        spacy.blank("en").add_pipe("kernel_textcat", config={"kernel": {"name": "subtree"}})
    alone = spacy.blank("en")
    tc = alone.add_pipe("kernel_textcat")
    with pytest.raises(StructPrefError, match="no forest_parser precedes it"):
        tc.initialize(lambda: labelled_examples(alone, questions(5)), nlp=alone)
    no_forests = spacy.blank("en")
    no_forests.add_pipe("forest_parser", config={"store_forest": False}).from_bytes(
        parser_nlp.get_pipe("forest_parser").to_bytes(exclude=["cfg"]))
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
    with pytest.raises(StructPrefError, match="C must be a positive"):
        spacy.blank("en").add_pipe("kernel_textcat", config={"C_grid": [0.0]})


def test_classifier_keeps_support_items_only_and_its_kernel(parser_nlp):
    docs = parsed(parser_nlp, ["Who is he ?", "Where is it ?", "Who was she ?", "Where was he ?"] * 3)
    gold = ["HUM", "LOC"] * 6
    clf = KernelClassifier(named_kernel("tree"), [1.0]).fit(docs, gold, progress=False)
    assert 0 < len(clf.support_items) <= len(docs)
    assert isinstance(clf.support_prepared(), TreeSetDAG)
    assert clf.predict(docs) == gold

"""The parse_reranker component and the reranking scorers: a pipeline that
trains, saves and loads with identical output; a reranking problem with a
known answer is learned; clear errors; the recursive network's log p input."""
import numpy as np
import pytest
import spacy
import srsly
from nltk.tree import Tree
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import Adam

from spacy_structpref.components.forest_parser import ForestParser
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.learners import (CompositeKernel, KernelPerceptron, RecursiveNetLearner, ScoredTrees,
                                       TreeKernel)
from spacy_structpref.models.recursive import RecursiveNet, build_label_dag, label_vocab
from spacy_structpref.reranking import RerankItem
from spacy_structpref.reranking.scorers import first_k, rerank, training_sets
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
        ForestParser(nlp.vocab).from_disk(tmp_path / "r")
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
    """Both defaults come from one block; the reranker's once lacked
    ``progress = false`` and drew a bar per update inside spacy train."""
    reranker = spacy.blank("en").add_pipe("parse_reranker").learner
    predictor = spacy.blank("en").add_pipe("attachment_predictor").prototype
    for learner in (reranker, predictor):
        assert isinstance(learner, KernelPerceptron)
        assert (learner.loss, learner.epochs, learner.average, learner.seed, learner.progress) == (
            "setwise", 1, True, 0, False)
    assert isinstance(reranker.kernel, CompositeKernel) and isinstance(predictor.kernel, TreeKernel)


def test_a_doc_without_a_kbest_list_is_refused(trained):
    nlp, _ = trained
    with pytest.raises(StructPrefError, match="forest_parser must run before"):
        nlp.get_pipe("parse_reranker")(Doc(nlp.vocab, words=["It", "rained", "."]))


# ------------------------------------------------- a problem with a known answer
def attachment_items(n, seed=0):
    """Sentences whose gold PP attaches to the verb; the candidates attach it to
    the verb, to the object, or mislabel the object, in random order, and the
    parser prefers a wrong one: only the VP -> VBD NP PP production tells."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        w = [f"n{i}", f"x{i}", f"y{i}"]
        obj = f"(NP (NN {w[1]}))"
        pp = f"(PP (IN with) (NP (NN {w[2]})))"
        verb = f"(TOP (S (NP (NN {w[0]})) (VP (VBD saw) {obj} {pp})))"
        noun = f"(TOP (S (NP (NN {w[0]})) (VP (VBD saw) (NP {obj} {pp}))))"
        label = f"(TOP (S (NP (NN {w[0]})) (VP (VBD saw) (ADJP (NN {w[1]})) {pp})))"
        cands = [verb, noun, label]
        order = rng.permutation(3)
        log_probs = [-10.0 - 2 * (c == 0) - rng.random() for c in order]
        gold = Tree.fromstring(verb)
        items.append(RerankItem(gold.leaves(), [cands[c] for c in order], log_probs, gold))
    return items


@pytest.mark.parametrize("make", [
    lambda: KernelPerceptron(TreeKernel(0.4), loss="setwise", epochs=2),
    lambda: KernelPerceptron(TreeKernel(0.4), loss="pairwise"),
    lambda: KernelPerceptron(CompositeKernel(TreeKernel(0.4), b=0.001), loss="setwise", epochs=2),
    lambda: RecursiveNetLearner(width=8, loss="setwise", epochs=30, batch_size=5, optimizer=Adam(0.05),
                                log_p_input=True, log_p_a=0.1),
])
def test_a_known_preference_is_learned(make):
    train, test = attachment_items(30), attachment_items(20, seed=1)
    assert rerank(None, test[:1], k=1) == [0]  # a single candidate needs no learner
    assert np.mean([i == item.target for i, item in zip([0] * len(test), test)]) < 0.6
    learner = make()
    learner.fit(*training_sets(learner, train))
    assert rerank(learner, test) == [item.target for item in test]


def test_first_k_chooses_targets_again():
    item = attachment_items(1)[0]
    cut = first_k([item], 1)[0]
    assert len(cut) == 1 and cut.target == 0 and len(item) == 3


# ------------------------------------------------------------ log p input
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


def test_log_p_input_needs_log_probabilities_and_a_matching_load():
    items = attachment_items(6)
    learner = RecursiveNetLearner(width=4, epochs=1, optimizer=Adam(0.01), log_p_input=True)
    learner.fit(*training_sets(learner, items))
    with pytest.raises(StructPrefError, match="ScoredTrees"):
        learner.utilities([Tree.fromstring(items[0].candidates[0])])
    assert len(learner.utilities(ScoredTrees([Tree.fromstring(c) for c in items[0].candidates],
                                             items[0].log_probs))) == 3
    with pytest.raises(StructPrefError, match="log_p_input"):
        RecursiveNetLearner(width=4).from_bytes(learner.to_bytes())


# ------------------------------------------------------------ forest kernel
def pp_forest():
    """"I saw men with scopes": the PP under the VP or the object NP, the object
    an NP or an ADJP, and a VP-internal X[1, 3) that crosses NP[2, 5)."""
    from spacy_structpref.trees import ForestBuilder, SymbolTable

    words = ["I", "saw", "men", "with", "scopes"]
    fb = ForestBuilder(SymbolTable(), 5, words)
    prp, vbd, nns, in_, nns2 = (fb.add_node(tag, i, i + 1) for i, tag in enumerate(["PRP", "VBD", "NNS", "IN", "NNS"]))
    for node, i in ((prp, 0), (vbd, 1), (nns, 2), (in_, 3), (nns2, 4)):
        fb.add_edge(node, [-(i + 1)], 1.0)
    np_i, np_men, adjp, np_sc = (fb.add_node(lab, s, s + 1) for lab, s in (("NP", 0), ("NP", 2), ("ADJP", 2), ("NP", 4)))
    for node, tail, p in ((np_i, prp, 1.0), (np_men, nns, 0.7), (adjp, nns, 0.3), (np_sc, nns2, 1.0)):
        fb.add_edge(node, [tail], p)
    pp = fb.add_node("PP", 3, 5)
    fb.add_edge(pp, [in_, np_sc], 1.0)
    np_big = fb.add_node("NP", 2, 5)
    fb.add_edge(np_big, [np_men, pp], 0.4)
    x = fb.add_node("X", 1, 3)
    fb.add_edge(x, [vbd, np_men], 0.2)
    vp = fb.add_node("VP", 1, 5)
    for tails, p in (([vbd, np_men, pp], 0.3), ([vbd, adjp, pp], 0.1), ([vbd, np_big], 0.5), ([x, pp], 0.1)):
        fb.add_edge(vp, tails, p)
    s = fb.add_node("S", 0, 5)
    fb.add_edge(s, [np_i, vp], 1.0)
    top = fb.add_node("TOP", 0, 5)
    fb.add_edge(top, [s], 1.0)
    return fb.build(top).compute_inside_outside()


def crosses(tree, brackets):
    from spacy_structpref.trees.doc import constituent_spans

    return any(s < a < e < b or a < s < b < e for s, e, _ in constituent_spans(tree) for a, b in brackets)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 3.0])
def test_forest_kernel_scorer_equals_its_enumerated_definition(alpha):
    from spacy_structpref.kernels import tree_kernel
    from spacy_structpref.reranking.forest_kernel import ForestKernel, candidate_brackets, compatible_subforest

    forest = pp_forest()
    trees = [t for _, t in forest.trees()]
    assert len(trees) == 4
    candidates = [to_bracketed(t) for t in trees]
    subs = [compatible_subforest(forest, candidate_brackets(c), alpha) for c in candidates]
    expected = []
    for c in candidates:  # the compatible trees of the whole forest, with P(t)^α renormalised
        kept = [(p ** alpha, t) for p, t in forest.trees() if not crosses(t, candidate_brackets(c))]
        z = sum(p for p, _ in kept)
        expected.append({to_bracketed(t): p / z for p, t in kept})
    for sub, want in zip(subs, expected):
        got = list(sub.trees())
        z = sum(p for p, _ in got)
        assert {to_bracketed(t): pytest.approx(p / z) for p, t in got} == want
    assert len({len(w) for w in expected}) > 1  # the candidates stand for different sub-forests
    raw = np.array([[sum(p * q * tree_kernel(t, u, lam=0.4) for t, p in a.items() for u, q in b.items())
                     for b in expected] for a in expected])
    kernel = ForestKernel(0.4, alpha, symbols=forest.symbols)
    prepared = kernel.prepare(subs)
    np.testing.assert_allclose(kernel.block(prepared, prepared), raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw))),
                               rtol=1e-9)
    w = np.array([1.0, -0.5, 0.0, 2.0])
    np.testing.assert_allclose(kernel.weighted_sum(prepared, w, prepared), w @ kernel.block(prepared, prepared))

"""distro_textcat: DISTRO's multiclass (atomic) case on a TREC question slice;
the bag features and the candidate-restricted emission kernel against numpy."""

import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.training import Example

from spacy_structpref.components.distro_textcat import DistroTextcat, score_exclusive_cats
from spacy_structpref.errors import SavedModelError, TaggerError
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.models._sparse import gather_sum, gather_sum_ragged
from spacy_structpref.models.decode import hinge_loss
from spacy_structpref.models.distro import DistroScores
from spacy_structpref.models.tag_dictionary import candidate_lists
from spacy_structpref.models.viterbi import candidate_emissions

@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 10**6))
def test_multiclass_loss_augmented_argmax_is_brute_force(M, B, seed):
    # each document is one atomic part: a sequence of length 1
    rng = numpy.random.default_rng(seed)
    S = rng.normal(size=(B, M)).astype("f")
    P = rng.normal(size=M).astype("f")
    gold = rng.integers(0, M, size=B).astype("i")
    cost = float(rng.choice([0.5, 1.0, 2.0]))
    scores = DistroScores(S, numpy.ones(B, "i"), rng.normal(size=(M, M)).astype("f"), P)
    loss, (dS, _, dP) = hinge_loss(scores, gold, cost)
    ref, ref_dS = 0.0, numpy.zeros_like(S)
    for b in range(B):
        aug = [S[b, y] + P[y] + cost * (y != gold[b]) for y in range(M)]
        best = int(numpy.argmax(aug))
        margin = aug[best] - (S[b, gold[b]] + P[gold[b]])
        ref += max(margin, 0.0)
        if margin > 0:
            ref_dS[b, best] += 1
            ref_dS[b, gold[b]] -= 1
    assert loss == pytest.approx(ref, abs=1e-4)
    numpy.testing.assert_allclose(dS, ref_dS)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10**6))
def test_kernels_match_numpy(seed):
    rng = numpy.random.default_rng(seed)
    V, d, N, K, M = 7, int(rng.integers(1, 9)), int(rng.integers(0, 6)), 3, int(rng.integers(1, 9))
    E = rng.normal(size=(V, d)).astype("f")
    rows = rng.integers(0, V, size=(N, K)).astype("i")
    numpy.testing.assert_allclose(gather_sum(E, rows), E[rows].sum(axis=1), atol=1e-5)
    counts = rng.integers(0, 4, size=N)
    flat = rng.integers(0, V, size=counts.sum()).astype("i")
    offsets = numpy.concatenate([[0], numpy.cumsum(counts)]).astype("i")
    ref = numpy.stack([E[flat[a:b]].sum(axis=0) for a, b in zip(offsets, offsets[1:])]) \
        if N else numpy.zeros((0, d), "f")
    numpy.testing.assert_allclose(gather_sum_ragged(E, flat, offsets), ref, atol=1e-5)
    X, A = rng.normal(size=(N, d)).astype("f"), rng.normal(size=(d, M)).astype("f")
    mask = rng.random((N, M)) < 0.5
    mask[numpy.arange(N), rng.integers(0, M, size=N)] = True
    got = candidate_emissions(X, A, *candidate_lists(mask))
    numpy.testing.assert_allclose(got[mask], (X @ A)[mask], atol=1e-4)
    assert (got[~mask & (mask.sum(1) * 4 <= M)[:, None]] == -numpy.inf).all()


@pytest.fixture(scope="module")
def qc_slice():
    nlp = spacy.blank("en")
    docs = corpus_docs("qc-fine", "train", nlp.vocab, limit=300)
    return [Example(nlp.make_doc(d.text), d) for d in docs]


@pytest.mark.parametrize("onehot", [False, True])
def test_trains_and_round_trips(qc_slice, tmp_path, onehot):
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_textcat", config={"w_steps": 10, "a_steps": 3,
                                           "model": {"onehot": onehot, "tok2vec": {"n_rows": 8192}}})
    opt = nlp.initialize(lambda: qc_slice)
    for _ in range(4):
        for i in range(0, len(qc_slice), 32):
            nlp.update(qc_slice[i:i + 32], sgd=opt)
    scores = nlp.evaluate(qc_slice)
    assert scores["cats_acc"] > 0.8  # fits its training slice
    textcat = nlp.get_pipe("distro_textcat")
    assert onehot == (textcat.effective_rank == len(textcat.labels)
                      and not textcat.has_label_structure)
    doc = nlp("What is the capital of France ?")
    assert sum(doc.cats.values()) == 1.0 and set(doc.cats) == set(textcat.labels)
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m")
    texts = [eg.reference.text for eg in qc_slice[:50]]
    assert [d.cats for d in loaded.pipe(texts)] == [d.cats for d in nlp.pipe(texts)]
    # a saved distro_textcat is no distro_tagger
    tagger = spacy.blank("en").add_pipe("distro_tagger")
    with pytest.raises(SavedModelError):
        tagger.from_disk(tmp_path / "m" / "distro_textcat")


def test_scorer_and_bad_gold(qc_slice):
    nlp = spacy.blank("en")
    textcat = nlp.add_pipe("distro_textcat")
    assert isinstance(textcat, DistroTextcat)
    nlp.initialize(lambda: qc_slice)
    eg = qc_slice[0]
    pred = eg.reference.copy()
    assert score_exclusive_cats([Example(pred, eg.reference)])["cats_acc"] == 1.0
    bad = eg.reference.copy()
    bad.cats = {k: 1.0 for k in list(bad.cats)[:2]}
    with pytest.raises(TaggerError, match="exclusive"):
        textcat.gold_ids([Example(nlp.make_doc(bad.text), bad)])
    unseen = eg.reference.copy()
    unseen.cats = {"NOT:seen": 1.0}
    with pytest.raises(TaggerError, match="gold label 'NOT:seen' is not one of the"):
        nlp.update([Example(nlp.make_doc(unseen.text), unseen)])
    narrow = spacy.blank("en").add_pipe("distro_textcat")
    with pytest.raises(TaggerError, match="is not one of the 1 labels"):
        narrow.initialize(lambda: qc_slice, labels=[next(iter(eg.reference.cats))])
    unlabelled = eg.reference.copy()
    unlabelled.cats = {}
    assert textcat.gold_ids([Example(nlp.make_doc(unlabelled.text), unlabelled)]).tolist() == [-1]

"""The tag dictionary and Viterbi restricted to each token's candidate labels,
against brute-force enumeration of the allowed label sequences."""

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.corpora import brown_sentences, item_to_doc
from spacy_structpref.errors import TaggerError
from spacy_structpref.models.decode import decode, hinge_loss, sequence_score
from spacy_structpref.models.distro import DistroScores
from spacy_structpref.models.tag_dictionary import TagDictionary, candidate_lists, restrict_to
from tests.helpers.viterbi_reference import brute_force
from spacy_structpref.models.viterbi import viterbi_batch, viterbi_restricted


@st.composite
def restricted_batches(draw, full=False):
    M = draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))
    N = sum(lengths)
    floats = st.floats(-3, 3, allow_nan=False, width=32)
    arr = lambda n: numpy.array(draw(st.lists(floats, min_size=n, max_size=n)), dtype="f")  # noqa: E731
    S, T, P = arr(N * M).reshape(N, M), arr(M * M).reshape(M, M), arr(M)
    if full:
        mask = numpy.ones((N, M), dtype=bool)
    else:
        bits = draw(st.lists(st.lists(st.booleans(), min_size=M, max_size=M), min_size=N, max_size=N))
        mask = numpy.array(bits, dtype=bool).reshape(N, M)
        mask[numpy.arange(N), draw(st.lists(st.integers(0, M - 1), min_size=N, max_size=N))] = True
    gold = numpy.array(draw(st.lists(st.integers(-1, M - 1), min_size=N, max_size=N)), dtype="i")
    return S, numpy.array(lengths, dtype="i"), T, P, mask, gold


def _split(x, lengths):
    return numpy.split(x, numpy.cumsum(lengths)[:-1])


@settings(max_examples=150, deadline=None)
@given(restricted_batches(), st.sampled_from([0.0, 1.0, 2.5]))
def test_restricted_viterbi_matches_brute_force(batch, cost):
    S, lengths, T, P, mask, gold = batch
    offsets, labels = candidate_lists(mask)
    for augmented in (False, True):
        kw = {"cost_gold": gold, "cost": cost} if augmented else {}
        paths, best = viterbi_restricted(S, lengths, T, P, offsets, labels, **kw)
        assert mask[numpy.arange(len(paths)), paths].all()  # only candidates are used
        for b, (Sb, mb, gb, pb) in enumerate(zip(_split(S, lengths), _split(mask, lengths),
                                                  _split(gold, lengths), _split(paths, lengths))):
            if not len(Sb):
                continue
            g = gb if augmented else None
            ref, _ = brute_force(Sb, T, P, mask=mb, gold=g, cost=cost)
            assert best[b] == pytest.approx(ref, abs=1e-3)
            # the returned path achieves the returned score
            onehot = restrict_to(None, pb, len(P), only=True)
            assert brute_force(Sb, T, P, mask=onehot, gold=g, cost=cost)[0] == pytest.approx(ref, abs=1e-3)


@settings(max_examples=100, deadline=None)
@given(restricted_batches(full=True), st.sampled_from([0.0, 1.0]))
def test_all_labels_allowed_equals_unrestricted(batch, cost):
    S, lengths, T, P, mask, gold = batch
    offsets, labels = candidate_lists(mask)
    got, got_best = viterbi_restricted(S, lengths, T, P, offsets, labels, cost_gold=gold, cost=cost)
    ref, ref_best = viterbi_batch(S, lengths, T, P, cost_gold=gold, cost=cost)
    numpy.testing.assert_allclose(got_best, ref_best, atol=1e-4)
    scores = DistroScores(S, lengths, T, P)
    numpy.testing.assert_allclose(sequence_score(scores, decode(scores, mask)),
                                  sequence_score(scores, decode(scores)), atol=1e-4)


@settings(max_examples=100, deadline=None)
@given(restricted_batches())
def test_restricted_hinge_loss_matches_brute_force(batch):
    S, lengths, T, P, mask, gold = batch
    gold = numpy.where(gold < 0, 0, gold).astype("i")
    scores = DistroScores(S, lengths, T, P)
    loss, (dS, dT, dP) = hinge_loss(scores, gold, mask=mask)
    ref = 0.0
    gold_scores = sequence_score(scores, gold)
    with_gold = restrict_to(mask, gold, S.shape[1], only=False)
    for b, (Sb, mb, gb) in enumerate(zip(_split(S, lengths), _split(with_gold, lengths),
                                          _split(gold, lengths))):
        if len(Sb):
            ref += brute_force(Sb, T, P, mask=mb, gold=gb, cost=1.0)[0] - gold_scores[b]
    assert loss == pytest.approx(ref, abs=1e-3)
    assert dS.sum() == pytest.approx(0.0) and dT.sum() == pytest.approx(0.0)


def test_tag_dictionary_from_pairs():
    pairs = [("the", 0)] * 3 + [("run", 1), ("run", 2), ("run", 1), ("odd", 2)]
    td = TagDictionary.from_pairs(pairs, n_labels=4, min_count=2)
    assert td.candidates("the") == [0]
    assert td.candidates("run") == [1, 2]
    assert td.candidates("odd") == [0, 1, 2, 3]  # seen once: below min_count
    assert td.candidates("unseen") == [0, 1, 2, 3]
    assert td.mask(["the", "run", "x"]).tolist() == [
        [True, False, False, False], [False, True, True, False], [True] * 4]
    assert TagDictionary(4, td.to_json()).entries == td.entries
    offsets, labels = candidate_lists(td.mask(["the", "run"]))
    assert offsets.tolist() == [0, 1, 3] and labels.tolist() == [0, 1, 2]


def test_bad_input_is_rejected():
    with pytest.raises(TaggerError, match="min_count"):
        TagDictionary.from_pairs([], 3, min_count=0)
    with pytest.raises(TaggerError, match="subset"):
        TagDictionary(3, {"a": [3]})
    S = numpy.zeros((2, 3), dtype="f")
    T, P = numpy.zeros((3, 3), "f"), numpy.zeros(3, "f")
    with pytest.raises(ValueError, match="at least one candidate"):
        viterbi_restricted(S, [2], T, P, [0, 1, 1], [0])
    with pytest.raises(ValueError, match="cand_offsets"):
        viterbi_restricted(S, [2], T, P, [0, 1], [0])
    with pytest.raises(ValueError, match="must lie in"):
        viterbi_restricted(S, [2], T, P, [0, 1, 2], [0, 3])
    with pytest.raises(TaggerError, match="candidate mask"):
        decode(DistroScores(S, numpy.array([2], "i"), T, P), numpy.ones((2, 2), bool))


@pytest.mark.parametrize("onehot", [False, True])
def test_tagger_with_tag_dictionary(tmp_path, onehot):
    import spacy
    from spacy.training import Example

    import spacy_structpref.components.factories  # noqa: F401

    nlp = spacy.blank("en")
    train = [s for i, s in enumerate(brown_sentences(limit=190)) if i % 10 < 8]  # the train split's start
    docs = [item_to_doc(nlp.vocab, s) for s in train[:150]]
    examples = [Example(spacy.tokens.Doc(nlp.vocab, words=[t.text for t in d]), d) for d in docs]
    tagger = nlp.add_pipe("distro_tagger", config={"tag_dict_min_count": 2, "w_steps": 10,
                                                   "a_steps": 2, "model": {"onehot": onehot, "tok2vec": {"n_rows": 4096}}})
    opt = nlp.initialize(lambda: examples)
    td = tagger.tag_dictionary
    assert td is not None
    assert [tagger.labels[i] for i in td.candidates("the")] == ["AT"]
    for i in range(0, len(examples), 30):
        nlp.update(examples[i:i + 30], sgd=opt)
    words = [t.text for d in docs[:20] for t in d]
    pred = [t.tag_ for d in nlp.pipe([spacy.tokens.Doc(nlp.vocab, words=[t.text for t in d])
                                        for d in docs[:20]]) for t in d]
    mask = td.mask(words)
    index = {label: i for i, label in enumerate(tagger.labels)}
    assert all(mask[k, index[tag]] for k, tag in enumerate(pred))  # only candidates predicted
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m").get_pipe("distro_tagger")
    assert loaded.tag_dictionary.entries == td.entries
    with pytest.raises(TaggerError, match="tag_dict_min_count"):
        spacy.blank("en").add_pipe("distro_tagger", config={"tag_dict_min_count": 0})

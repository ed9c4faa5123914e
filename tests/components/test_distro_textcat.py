"""distro_textcat: DISTRO's multiclass (atomic) case trained on a TREC
question slice, round-tripped, scored, with clear errors for bad gold."""
import pytest
import spacy
from spacy.training import Example

from spacy_structpref.components.distro_textcat import DistroTextcat, score_exclusive_cats
from spacy_structpref.errors import SavedModelError, TaggerError
from spacy_structpref.corpora import corpus_docs


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

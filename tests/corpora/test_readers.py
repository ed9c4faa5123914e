import nltk
import pytest

from spacy_structpref.corpora import (LabelledText, basque_sentences, corpus_docs, corpus_items, ptb_trees, qc_labels,
                                      qc_questions, read_labelled)
from spacy_structpref.corpora.readers import check_nltk_data
from spacy_structpref.errors import CorpusError


@pytest.mark.parametrize("split,sents,tokens", [("train", 3068, 73842), ("dev", 433, None), ("test", 413, 9615)])
def test_ptb_split_sizes(split, sents, tokens):
    trees = ptb_trees(split)
    assert len(trees) == sents
    if tokens:
        assert sum(len(t.leaves()) for t in trees) == tokens
    assert all(t.label() == "TOP" for t in trees)


def test_ptb_trees_are_normalised():
    labels = {s.label() for t in ptb_trees("train") for s in t.subtrees()}
    assert "-NONE-" not in labels
    assert not any("-" in lab[1:-1] and not lab.startswith("-") for lab in labels)
    assert {"-LRB-", "-RRB-"} <= labels


@pytest.mark.parametrize("split,sents,tokens", [("train", 2335, None), ("dev", 260, None), ("test", 580, 10096)])
def test_basque_split_sizes(split, sents, tokens):
    s = basque_sentences(split)
    assert len(s) == sents
    if tokens:
        assert sum(map(len, s)) == tokens


def test_basque_fine_tags():
    full = basque_sentences("train") + basque_sentences("dev")
    assert sum(map(len, full)) == 40032
    assert len({tag for sent in full for _, tag in sent}) == 60
    assert full[0][0] == ("josu_jon_imaz", "IZE_IZB")


def test_corpus_docs(nlp):
    docs = corpus_docs("ptb", "dev", nlp.vocab, limit=3)
    assert len(docs) == 3 and docs[0]._.parse == ptb_trees("dev")[0]
    docs = corpus_docs("basque", "test", nlp.vocab, limit=2)
    assert docs[0][0].tag_ and "constituents" not in docs[0].spans


def test_unknown_corpus_and_split():
    with pytest.raises(CorpusError, match="unknown corpus 'nope'"):
        corpus_items("nope", "train")
    with pytest.raises(CorpusError, match="unknown split"):
        ptb_trees("validation")


def test_missing_nltk_data_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(nltk.data, "path", [])
    monkeypatch.delenv("NLTK_DATA", raising=False)
    with pytest.raises(CorpusError, match="NLTK_DATA is not set"):
        check_nltk_data("treebank")
    monkeypatch.setenv("NLTK_DATA", "/nonexistent")
    with pytest.raises(CorpusError, match="does not contain corpora/treebank"):
        check_nltk_data("treebank")


@pytest.mark.parametrize("split,size", [("train", 4907), ("dev", 545), ("test", 500), ("train+dev", 5452)])
def test_qc_split_sizes(split, size):
    assert len(qc_questions(split)) == size


def test_qc_labels_and_docs(nlp):
    assert len(qc_labels("fine")) == 50 and qc_labels("coarse") == ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
    fine, coarse = qc_questions("train+dev"), qc_questions("train+dev", "coarse")
    assert fine[0] == LabelledText(tuple("How did serfdom develop in and then leave Russia ?".split()), "DESC:manner")
    assert [q.label.split(":")[0] for q in fine] == [q.label for q in coarse]
    assert {q.label for q in qc_questions("test")} <= set(qc_labels())
    dev = corpus_docs("qc-coarse", "dev", nlp.vocab, limit=2)
    assert dev[0].text.startswith("Name the scar-faced") and dev[0].cats["HUM"] == 1.0 and sum(dev[0].cats.values()) == 1


def test_qc_bad_lines():
    items = read_labelled("DESC:manner How ?\nnolabel here\nHUM:ind\n", "x.txt", skip_bad=True)
    assert items == [LabelledText(("How", "?"), "DESC:manner")]
    assert items.skipped == ["x.txt, line 2: label 'nolabel' is not COARSE:fine", "x.txt, line 3: no words after the label"]
    with pytest.raises(CorpusError, match="x.txt, line 2"):
        read_labelled("DESC:manner How ?\nnolabel here\n", "x.txt")
    with pytest.raises(CorpusError, match="granularity"):
        qc_questions("train", "medium")

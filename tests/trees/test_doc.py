import pytest
from hypothesis import given, settings
from spacy.tokens import DocBin

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError, TreeDocMismatch
from spacy_structpref.trees import SPANS_KEY, doc_to_tree, parse_bracketed, set_tree, tree_to_doc

from tests.helpers.strategies import trees

UNARY = "(TOP (S (NP (NP (NN dogs))) (VP (VBP bark) (ADVP (RB loudly)))))"


def test_spans_preorder_unary_chains_outermost_first(nlp):
    doc = tree_to_doc(nlp.vocab, parse_bracketed(UNARY))
    spans = [(s.label_, s.start, s.end) for s in doc.spans[SPANS_KEY]]
    assert spans == [("TOP", 0, 3), ("S", 0, 3), ("NP", 0, 1), ("NP", 0, 1), ("VP", 1, 3), ("ADVP", 2, 3)]
    assert [t.tag_ for t in doc] == ["NN", "VBP", "RB"]


def test_extensions_navigate(nlp):
    doc = tree_to_doc(nlp.vocab, parse_bracketed(UNARY))
    whole, np_, vp = doc[0:3], doc[0:1], doc[1:3]
    assert whole._.labels == ["TOP", "S"]
    assert np_._.labels == ["NP", "NP"]
    assert np_._.parent.start == 0 and np_._.parent.end == 3
    assert whole._.parent is None
    assert [(c.start, c.end, c.label_) for c in vp._.children] == [(1, 2, "VBP"), (2, 3, "ADVP")]
    assert [(c.start, c.end, c.label_) for c in whole._.children] == [(0, 1, "NP"), (1, 3, "VP")]
    assert doc[1:2]._.labels == ["VBP"]
    assert doc[1:2]._.parent.label_ == "VP"


def test_docbin_round_trip_keeps_order_and_duplicates(nlp):
    doc = tree_to_doc(nlp.vocab, parse_bracketed(UNARY))
    back = next(DocBin(docs=[doc]).from_bytes(DocBin(docs=[doc]).to_bytes()).get_docs(nlp.vocab))
    assert [(s.label_, s.start, s.end) for s in back.spans[SPANS_KEY]] == \
        [(s.label_, s.start, s.end) for s in doc.spans[SPANS_KEY]]
    assert back._.parse == parse_bracketed(UNARY)


@settings(max_examples=150)
@given(trees())
def test_random_trees_round_trip(nlp, tree):
    assert tree_to_doc(nlp.vocab, tree)._.parse == tree


def test_all_ptb_sample_trees_survive_docbin_round_trip(nlp):
    trees_ = ptb_trees("all")
    assert len(trees_) == 3914
    docs = [tree_to_doc(nlp.vocab, t) for t in trees_]
    data = DocBin(docs=docs, store_user_data=True).to_bytes()
    back = list(DocBin().from_bytes(data).get_docs(nlp.vocab))
    assert len(back) == len(trees_)
    for i, (doc, tree) in enumerate(zip(back, trees_)):
        assert doc._.parse == tree, f"tree {i} changed in the round trip"


def test_leaf_mismatch_is_a_clear_error(nlp):
    doc = nlp.make_doc("cats bark")
    with pytest.raises(TreeDocMismatch, match="leaves do not match"):
        set_tree(doc, parse_bracketed("(S (NN dogs) (VBP bark))"))


def test_word_without_preterminal_is_an_error(nlp):
    with pytest.raises(StructPrefError, match="preterminal"):
        tree_to_doc(nlp.vocab, parse_bracketed("(S dogs (VBP bark))"))


def test_doc_without_constituents_has_no_parse(nlp):
    assert nlp.make_doc("no tree here")._.parse is None


def test_overlapping_spans_are_rejected(nlp):
    from spacy.tokens import Span

    doc = nlp.make_doc("a b c")
    doc.spans[SPANS_KEY] = [Span(doc, 0, 3, "S"), Span(doc, 0, 2, "X"), Span(doc, 1, 3, "Y")]
    with pytest.raises(StructPrefError, match="overlap"):
        doc._.parse


def test_other_span_group(nlp):
    tree = parse_bracketed(UNARY)
    doc = tree_to_doc(nlp.vocab, tree, spans_key="gold")
    assert SPANS_KEY not in doc.spans and doc._.parse is None
    assert doc_to_tree(doc, "gold") == tree
    set_tree(doc, parse_bracketed("(TOP (S (NN dogs) (VBP bark) (RB loudly)))"), set_tags=False, spans_key="pred")
    assert doc_to_tree(doc, "gold") == tree and [t.tag_ for t in doc] == ["NN", "VBP", "RB"]
    assert [s.label_ for s in doc.spans["pred"]] == ["TOP", "S"]


def test_write_docs_keeps_user_data_only_when_there_is_some(nlp, tmp_path):
    """A corpus without ``._`` data is stored without it (spaCy decodes a
    stored entry per Doc on every read); one with it keeps it."""
    from spacy.tokens import Doc

    from spacy_structpref.trees.doc import read_docs, write_docs

    write_docs([nlp("a b"), nlp("c")], tmp_path / "plain.spacy")
    assert DocBin().from_disk(tmp_path / "plain.spacy").user_data == [None, None]
    assert [d.text for d in read_docs(tmp_path / "plain.spacy", nlp.vocab)] == ["a b", "c"]
    if not Doc.has_extension("structpref_test_note"):
        Doc.set_extension("structpref_test_note", default=None)
    noted = [nlp("a b"), nlp("c")]
    noted[1]._.structpref_test_note = "kept"
    write_docs(noted, tmp_path / "noted.spacy")
    assert [d._.structpref_test_note for d in read_docs(tmp_path / "noted.spacy", nlp.vocab)] == [None, "kept"]

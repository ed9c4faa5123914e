"""Treebanks of other languages (issue #14, item 12): a bad tree is an error
naming it or, as asked, skipped with a count; foot classes per tagset."""
import json
import warnings

import pytest
import spacy
from nltk.tree import Tree

from spacy_structpref.errors import GrammarError, GrammarWarning, StructPrefError
from spacy_structpref.incremental import FOOT_CLASSES, OTHERS, FootClasses, foot_class, foot_classes
from spacy_structpref.parsing.grammar import estimate_grammar
from spacy_structpref.trees import normalize_tree, parse_bracketed, tree_problem

GOOD = [parse_bracketed(t) for t in (
    "(TOP (S (NP (DT el) (NN perro)) (VP (VBZ ladra)) (. .)))",
    "(TOP (S (NP (NNP Ana)) (VP (VBZ come) (NP (NN pan))) (. .)))",
)]
# cess_esp-like: a word directly under a phrase; Floresta-like: a childless constituent
WORD_UNDER_PHRASE = Tree("TOP", [Tree("S", ["que", Tree("VP", [Tree("VBZ", ["come"])])])])
CHILDLESS = Tree("TOP", [Tree("S", [Tree("NP", [Tree("NN", ["pan"])]), Tree("--", [])])])


@pytest.mark.parametrize("bad,why", [
    (WORD_UNDER_PHRASE, "word 'que' under 'S' is not the only child"),
    (CHILDLESS, "constituent '--' has no children"),
    (Tree("S", [Tree("NN", ["pan"])]), "rooted in 'S', not TOP"),
    (Tree("TOP", [Tree("NN", [""])]), "not a non-empty string"),
    ("(TOP (NN pan))", "not an nltk Tree"),
])
def test_bad_tree_stops_estimate_grammar_naming_it_or_is_skipped_with_a_count(bad, why):
    trees = [GOOD[0], bad, GOOD[1]]
    with pytest.raises(GrammarError, match=f"tree 1: .*{why}.*skip_bad_trees=True"):
        estimate_grammar(trees)
    with pytest.warns(GrammarWarning, match="skipped 1 bad trees of 3"):
        grammar = estimate_grammar(trees, skip_bad_trees=True)
    assert grammar.skipped_trees == 1
    assert grammar.to_dict() == estimate_grammar(GOOD).to_dict()  # as if the bad tree were not there


def test_only_bad_trees_is_a_clear_error():
    with pytest.raises(StructPrefError, match=r"zero trees \(1 bad trees skipped"):
        estimate_grammar([WORD_UNDER_PHRASE], skip_bad_trees=True)


def test_normalised_childless_constituents_are_good_trees():
    assert tree_problem(CHILDLESS) is not None and tree_problem(normalize_tree(CHILDLESS)) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert estimate_grammar([normalize_tree(CHILDLESS)]).skipped_trees == 0


def test_forest_parser_initializes_from_trees_skipping_bad_ones():
    pipe = spacy.blank("es").add_pipe("forest_parser")
    with pytest.raises(GrammarError, match="tree 1"):
        pipe.initialize_from_trees([GOOD[0], WORD_UNDER_PHRASE])
    with pytest.warns(GrammarWarning):
        pipe.initialize_from_trees([GOOD[0], WORD_UNDER_PHRASE, GOOD[1]], skip_bad_trees=True)
    assert pipe.grammar.skipped_trees == 1


# ----------------------------------------------------------- foot classes
UNIVERSAL = ["ADJ", "ADP", "ADV", "CONJ", "DET", "NOUN", "NUM", "PRT", "PRON", "VERB", ".", "X"]
UPOS = ["ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X"]


def test_ptb_map_is_the_default_and_unchanged():
    assert foot_classes().classes == FOOT_CLASSES and foot_classes("ptb") == foot_classes()
    assert foot_class("NN") == "Nouns" and foot_class("NOUN") == OTHERS


def test_universal_map_puts_few_feet_into_others():
    ptb, universal = foot_classes("ptb"), foot_classes("universal")
    # the defect: under the PTB map all but "." are Others
    assert [t for t in UNIVERSAL if ptb(t) != OTHERS] == ["."] and ptb.coverage(UPOS) == 0.0
    assert universal.coverage(UNIVERSAL) == 10 / 12
    assert [t for t in UNIVERSAL if universal(t) == OTHERS] == ["NUM", "X"]
    assert [t for t in UPOS if universal(t) == OTHERS] == ["INTJ", "NUM", "SYM", "X"]
    assert universal("PRON") == foot_class("PRON", universal) == "Nouns" and universal("AUX") == "Verbs"


def test_foot_classes_from_json_and_config(tmp_path):
    path = tmp_path / "cess_esp.json"
    path.write_text(json.dumps({"Nouns": ["nc", "np"], "Verbs": ["vm", "va"]}), encoding="utf-8")
    assert foot_classes(path)("nc") == "Nouns" and foot_classes(str(path))("sp") == OTHERS
    nlp = spacy.blank("es")
    pipe = nlp.add_pipe("attachment_predictor", config={"foot_classes": {
        "@misc": "spacy_structpref.FootClasses.v1", "path": str(path)}})
    assert pipe.foot_class("vm") == "Verbs"
    pipe = spacy.blank("es").add_pipe("attachment_predictor", config={"foot_classes": {
        "@misc": "spacy_structpref.FootClasses.v1", "classes": {"Nouns": ["nc"]}}})
    assert pipe.foot_class("nc") == "Nouns" and pipe.foot_class("vm") == OTHERS


def test_component_saves_its_foot_classes(tmp_path):
    universal = {"@misc": "spacy_structpref.FootClasses.v1", "tagset": "universal"}
    spacy.blank("en").add_pipe("attachment_predictor", config={"foot_classes": universal}).to_disk(tmp_path / "p")
    loaded = spacy.blank("en").add_pipe("attachment_predictor").from_disk(tmp_path / "p")
    assert loaded.foot_class("NOUN") == "Nouns" and loaded.foot_class("NN") == OTHERS


@pytest.mark.parametrize("classes,match", [
    ({"Nouns": ["NN"], "Names": ["NN"]}, "in foot classes 'Nouns' and 'Names'"),
    ({"Nouns": "NN"}, "must list its tags"),
    ({"Nouns": [""]}, "non-empty strings"),
    ({}, "non-empty mapping"),
])
def test_bad_foot_classes_are_clear_errors(classes, match):
    with pytest.raises(StructPrefError, match=match):
        FootClasses(classes)


def test_unknown_tagset_or_bad_file_is_a_clear_error(tmp_path):
    with pytest.raises(StructPrefError, match="neither a tagset"):
        foot_classes("stts")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(StructPrefError, match="cannot read foot classes"):
        foot_classes(tmp_path / "bad.json")
    with pytest.raises(StructPrefError, match="not both"):
        spacy.blank("en").add_pipe("attachment_predictor", config={"foot_classes": {
            "@misc": "spacy_structpref.FootClasses.v1", "path": "x.json", "classes": {"A": ["B"]}}})

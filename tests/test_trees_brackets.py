import pytest
from hypothesis import given
from nltk.tree import Tree

from spacy_structpref.errors import BracketError
from spacy_structpref.trees import (escape_word, normalize_tree, parse_bracketed, restore_words,
                                    strip_function_tags, to_bracketed)

from strategies import trees


def test_parse_simple():
    t = parse_bracketed("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))")
    assert t.label() == "S"
    assert t.leaves() == ["the", "dog", "barks"]
    assert t[0].label() == "NP"


def test_ptb_outer_bracket_is_unlabeled_then_top():
    t = parse_bracketed("( (S (NP (PRP It)) (VP (VBZ works))) )")
    assert t.label() == ""
    assert normalize_tree(t).label() == "TOP"


@pytest.mark.parametrize("text,fragment", [
    ("(S (NP (DT the) (NN dog))", "unclosed"),
    ("(S (NP (DT the)))) ", "unbalanced"),
    ("S (NP dog)", "must start"),
    ("", "empty"),
    ("(S (NP))", "no children"),
    ("(S (X a)) (T b)", "continues"),
    ("(S (X a)) b", "continues"),
])
def test_malformed_brackets_raise_clear_errors(text, fragment):
    with pytest.raises(BracketError, match=fragment):
        parse_bracketed(text)


def test_not_a_string():
    with pytest.raises(BracketError, match="string"):
        parse_bracketed(None)


@given(trees())
def test_bracket_round_trip(tree):
    assert parse_bracketed(to_bracketed(tree)) == tree


@pytest.mark.parametrize("label,expected", [
    ("NP-SBJ-1", "NP"), ("PP-LOC=2", "PP"), ("NP=3", "NP"), ("S", "S"),
    ("-LRB-", "-LRB-"), ("-RRB-", "-RRB-"), ("-NONE-", "-NONE-"), ("ADVP-TMP", "ADVP"),
])
def test_strip_function_tags(label, expected):
    assert strip_function_tags(label) == expected


def test_normalize_removes_traces_and_emptied_constituents():
    t = parse_bracketed(
        "( (S (NP-SBJ-1 (-NONE- *)) (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))"
        " (NP-TMP (NN today))) (. .)) )")
    assert to_bracketed(normalize_tree(t)) == "(TOP (S (VP (VBD said) (NP (NN today))) (. .)))"


def test_normalize_keeps_bracket_tags_and_adds_top():
    t = parse_bracketed("(NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-))")
    assert to_bracketed(normalize_tree(t)) == "(TOP (NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-)))"


def test_normalize_all_empty_raises():
    with pytest.raises(ValueError, match="no words"):
        normalize_tree(parse_bracketed("(S (-NONE- *))"))


# Tokens a spaCy tokenizer produces that a naive bracketed writer breaks on.
AWKWARD_WORDS = ["(", ")", ":-)", "a b", " ", "\n", "x(y)", "-LRB-", "plain"]


@given(trees(words=AWKWARD_WORDS))
def test_any_words_survive_writing_and_reading(tree):
    back = parse_bracketed(to_bracketed(tree))
    assert [p.label() for p in back.subtrees()] == [p.label() for p in tree.subtrees()]
    assert len(back.leaves()) == len(tree.leaves())
    assert restore_words(back, tree.leaves()) == tree


def test_escapes_follow_the_treebank():
    assert [escape_word(w) for w in ["(", ")", "a  b", "\n", "x(y)"]] == \
        ["-LRB-", "-RRB-", "a_b", "_", "x-LRB-y-RRB-"]
    assert to_bracketed(Tree("S", [Tree("-LRB-", ["("]), Tree("NN", ["x"])])) == "(S (-LRB- -LRB-) (NN x))"


def test_restore_words_needs_one_word_per_leaf():
    with pytest.raises(BracketError, match="2 words but 3"):
        restore_words(parse_bracketed("(S (A a) (B b))"), ["a", "b", "c"])

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import BracketError
from spacy_structpref.trees import (SymbolTable, escape_word, normalize_tree, parse_bracketed, restore_words,
                                    strip_function_tags, to_bracketed, trees_to_arrays)
from spacy_structpref.trees.brackets import escape_label
from spacy_structpref.trees.brackets import _tokenize, bracketed_to_arrays

from tests.helpers.strategies import trees


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
    symbols = SymbolTable()
    with pytest.raises(BracketError, match=fragment):
        bracketed_to_arrays(["(A a)", text], symbols)
    assert not symbols.labels and not symbols.words  # a failed batch interns nothing


def test_not_a_string():
    with pytest.raises(BracketError, match="string"):
        parse_bracketed(None)
    with pytest.raises(BracketError, match="string"):
        bracketed_to_arrays(["(A a)", None])


# Separators str.split breaks on, ASCII and not; words the escapes leave alone.
SEPARATORS = [" ", "  ", "\t", "\n", "\x1c", "\u00a0", "\u3000", "\u2028"]
READ_WORDS = ["a", "b", "é", "日本", "NN", "-LRB-", "x_y"]


@st.composite
def bracket_texts(draw):
    """A random tree written with random whitespace (none, some places, next
    to brackets), sometimes inside PTB's unlabeled outer bracket."""
    text = to_bracketed(draw(trees(words=READ_WORDS)))
    if draw(st.booleans()):
        text = f"( {text} )"
    toks = _tokenize(text)
    out = [toks[0]]
    for prev, tok in zip(toks, toks[1:]):
        brackets = prev in "()" or tok in "()"
        out.append(draw(st.sampled_from(SEPARATORS + [""] * 3 if brackets else SEPARATORS)))
        out.append(tok)
    return "".join(out)


def _same_arrays(a, b):
    for name in ("label", "prod", "start", "end", "child_start", "children"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.n_words == b.n_words


@pytest.mark.fuzz
@settings(max_examples=150, deadline=None)
@given(st.lists(bracket_texts(), max_size=4), st.lists(bracket_texts(), max_size=2))
def test_batch_reading_matches_parse_bracketed(texts, read_before):
    """The one-pass reader gives parse_bracketed + TreeArrays.from_tree's arrays
    and SymbolTable, also into a table that already holds symbols."""
    fast, slow = SymbolTable(), SymbolTable()
    bracketed_to_arrays(read_before, fast)
    trees_to_arrays([parse_bracketed(t) for t in read_before], slow)
    flat = bracketed_to_arrays(texts, fast)
    expected = trees_to_arrays([parse_bracketed(t) for t in texts], slow)
    assert fast.to_dict() == slow.to_dict()
    assert len(flat) == len(expected) == len(flat.trees)
    for a, b in zip(flat.trees, expected):
        _same_arrays(a, b)
        assert a.symbols is fast


@st.composite
def maybe_broken_texts(draw):
    """A written tree with up to two tokens dropped or inserted."""
    toks = _tokenize(draw(bracket_texts()))
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(toks)))
        if i < len(toks) and draw(st.booleans()):
            del toks[i]
        else:
            toks.insert(i, draw(st.sampled_from(["(", ")", "S", "é"])))
    return draw(st.sampled_from([" ", "\u00a0"])).join(toks)


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None)
@given(maybe_broken_texts())
def test_batch_reading_fails_as_parse_bracketed(text):
    """Any text, well formed or not: the reader accepts exactly what
    parse_bracketed accepts and otherwise raises its error."""
    try:
        tree = parse_bracketed(text)
    except BracketError as err:
        with pytest.raises(BracketError, match=re.escape(str(err))):
            bracketed_to_arrays(["(A a)", text, "(B b)"])
        return
    symbols = SymbolTable()
    flat = bracketed_to_arrays(["(A a)", text, "(B b)"], symbols)
    assert flat[1].to_tree() == tree


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


# Any text: whitespace (ASCII, control and Unicode separators), brackets, escapes and the empty string.
TEXT = st.lists(st.one_of(st.sampled_from(SEPARATORS + ["(", ")", "_", "-LRB-", "\x00", "\x85", "\ud800"]),
                          st.characters(exclude_categories=["Cs"])), max_size=4).map("".join)


@st.composite
def text_trees(draw, depth=0):
    """Trees whose labels and words are arbitrary text; every node has children."""
    if depth >= 3 or depth and draw(st.booleans()):
        return Tree(draw(TEXT), [draw(TEXT)])
    return Tree(draw(TEXT), [draw(text_trees(depth + 1)) if draw(st.booleans()) else draw(TEXT)
                             for _ in range(draw(st.integers(1, 3)))])


def escaped(tree):
    """What to_bracketed promises parse_bracketed reads back: labels and
    words escaped, the structure unchanged; None where it must refuse."""
    if not isinstance(tree, Tree):
        return escape_word(tree) if tree else None
    kids = [escaped(k) for k in tree]
    if None in kids or tree.label() == "" and not isinstance(tree[0], Tree):
        return None
    return Tree(escape_label(tree.label()), kids)


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None)
@given(text_trees())
def test_any_tree_of_text_round_trips_or_is_refused(tree):
    """Labels are written escaped (``NP SBJ`` written plainly would read
    back as a label and a word). Written and read back, every tree is its
    escaped self; the fast reader agrees; an escaped tree is a fixed point."""
    expected = escaped(tree)
    if expected is None:
        with pytest.raises(BracketError, match="empty word|empty label"):
            to_bracketed(tree)
        return
    text = to_bracketed(tree)
    back = parse_bracketed(text)
    assert back == expected
    assert bracketed_to_arrays([text])[0].to_tree() == back
    assert to_bracketed(back) == text and parse_bracketed(to_bracketed(back)) == back


@given(trees(labels=["S", "NP-SBJ", "-NONE-", "X=1"], tags=["NN", "-LRB-", ","], words=READ_WORDS))
def test_trees_needing_no_escape_round_trip_exactly(tree):
    assert parse_bracketed(to_bracketed(tree)) == tree


def test_labels_are_escaped_as_words():
    tree = Tree("NP SBJ", [Tree("N\x1cN", ["a"]), Tree("(", ["("])])
    assert to_bracketed(tree) == "(NP_SBJ (N_N a) (-LRB- -LRB-))"
    assert parse_bracketed(to_bracketed(tree)) == Tree("NP_SBJ", [Tree("N_N", ["a"]), Tree("-LRB-", ["-LRB-"])])
    assert escape_label("") == "" and escape_label("A B") == "A_B"
    assert to_bracketed(Tree("", [Tree("S", [Tree("NN", ["x"])])])) == "( (S (NN x)))"


def test_what_cannot_be_written_is_refused():
    """Floresta's childless ``(--)`` was written ``(-- )``, which the reader
    rejects; now the writer says why (and normalize_tree drops such nodes)."""
    floresta = Tree("S", [Tree("--", []), Tree("NN", ["x"])])
    with pytest.raises(BracketError, match="'--' has no children.*normalize_tree"):
        to_bracketed(floresta)
    with pytest.raises(BracketError, match="'--' has no children.*normalize_tree"):
        parse_bracketed("(S (--) (NN x))")
    assert to_bracketed(normalize_tree(floresta)) == "(TOP (S (NN x)))"
    with pytest.raises(BracketError, match="empty word"):
        to_bracketed(Tree("NN", [""]))
    with pytest.raises(BracketError, match="empty label"):
        to_bracketed(Tree("", ["x"]))

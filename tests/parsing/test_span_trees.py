"""Trees to labelled binary span sets and back (spacy_structpref.parsing.span_trees)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree
from tests.helpers.strategies import trees

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.parsing.span_trees import (BracketWriter, SpanLabels, spans_to_bracketed, spans_to_tree,
                                                 tree_to_spans)
from spacy_structpref.trees.brackets import parse_bracketed, to_bracketed


def is_binary_bracketing(spans, n):
    cells = {(i, j) for i, j, _ in spans}
    if len(spans) != 2 * n - 1 or len(cells) != len(spans) or (0, n) not in cells:
        return False
    if any((i, i + 1) not in cells for i in range(n)):
        return False
    # Every longer span splits into exactly one pair of spans of the set,
    # and no two spans cross.
    for i, j in cells:
        if j - i > 1 and sum((i, k) in cells and (k, j) in cells for k in range(i + 1, j)) != 1:
            return False
    return not any(a < c < b < d for a, b in cells for c, d in cells)


def random_bracketing(data, n, labels):
    """A random full binary bracketing of n words in preorder, labels drawn from ``labels``."""
    def bracket(i, j):
        out = [(i, j, data.draw(st.sampled_from(labels)))]
        if j - i > 1:
            k = data.draw(st.integers(i + 1, j - 1))
            out += bracket(i, k) + bracket(k, j)
        return out

    return bracket(0, n)


@pytest.fixture(scope="module")
def train_trees():
    return ptb_trees("train")


def test_left_factored_binarisation_by_hand():
    tree = parse_bracketed("(TOP (S (NP (DT the) (JJ big) (NN dog)) (VP (VBZ barks)) (. .)))")
    words, tags, spans = tree_to_spans(tree)
    assert words == ["the", "big", "dog", "barks", "."]
    assert tags == ["DT", "JJ", "NN", "VBZ", "."]
    assert spans == [(0, 5, "S"), (0, 4, ""), (0, 3, "NP"), (0, 2, ""), (0, 1, ""), (1, 2, ""),
                     (2, 3, ""), (3, 4, "VP"), (4, 5, "")]


def test_unary_chains_become_one_label_outermost_first():
    tree = parse_bracketed("(TOP (S (VP (VB go) (NP (PRP it)))))")
    assert tree_to_spans(tree)[2] == [(0, 2, "S+VP"), (0, 1, ""), (1, 2, "NP")]


def test_single_word_sentences():
    assert tree_to_spans(parse_bracketed("(TOP (UH Yes))")) == (["Yes"], ["UH"], [(0, 1, "")])
    assert tree_to_spans(parse_bracketed("(TOP (FRAG (INTJ (UH Yes))))"))[2] == [(0, 1, "FRAG+INTJ")]
    for text in ("(TOP (UH Yes))", "(TOP (FRAG (INTJ (UH Yes))))"):
        tree = parse_bracketed(text)
        assert spans_to_tree(*tree_to_spans(tree)) == tree


def test_top_with_several_children_gets_an_empty_root_span():
    tree = parse_bracketed("(TOP (NP (NN a)) (VP (VB b)) (. .))")
    spans = tree_to_spans(tree)[2]
    assert spans[0] == (0, 3, "")
    assert spans_to_tree(*tree_to_spans(tree)) == tree


def test_round_trip_on_every_training_tree(train_trees):
    for tree in train_trees:
        words, tags, spans = tree_to_spans(tree)
        assert words == tree.leaves()
        assert tags == [tag for _, tag in tree.pos()]
        assert is_binary_bracketing(spans, len(words))
        assert spans_to_tree(words, tags, spans) == tree


@settings(max_examples=150, deadline=None)
@given(st.lists(trees(), min_size=1, max_size=3))
def test_round_trip_on_random_trees(kids):
    tree = Tree("TOP", kids)
    words, tags, spans = tree_to_spans(tree)
    assert is_binary_bracketing(spans, len(words))
    assert spans_to_tree(words, tags, spans) == tree


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_any_labelled_bracketing_gives_a_tree_whose_spans_are_its_own(data):
    # Build a random binary bracketing with random (chain) labels; the tree it
    # gives maps back onto a bracketing with the same labelled constituents.
    n = data.draw(st.integers(1, 7))
    spans = random_bracketing(data, n, ["", "", "NP", "VP", "S+VP"])
    words = [f"w{i}" for i in range(n)]
    tree = spans_to_tree(words, ["T"] * n, spans)
    assert tree.leaves() == words

    def constituents(spans_):
        return sorted((i, j, label) for i, j, label in spans_ if label)

    # Rebinarising may move an empty span, never a labelled one.
    assert constituents(tree_to_spans(tree)[2]) == constituents(spans)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_bracket_writer_writes_what_the_built_tree_writes(data):
    # Random bracketings in preorder (as k-best lists give them), labels with
    # chains, characters that need escaping in labels, tags and words.
    n = data.draw(st.integers(1, 8))
    labels = ["", "", "NP", "VP", "S+VP", "NP(x)", "A B+C"]
    words = data.draw(st.lists(st.sampled_from(["w", "(", ")", "a b", "-LRB-", "x\ty"]), min_size=n, max_size=n))
    tags = data.draw(st.lists(st.sampled_from(["NN", "-NONE-", "(", "T T"]), min_size=n, max_size=n))
    spans = random_bracketing(data, n, labels)
    writer = BracketWriter(words, tags)
    expected = to_bracketed(spans_to_tree(words, tags, spans))
    assert writer.write(spans) == expected == spans_to_bracketed(words, tags, spans)
    assert writer.write(spans) == expected  # the memoised brackets again
    assert sorted(spans, key=lambda s: (s[0], -s[1])) == spans  # preorder is this order on a bracketing


def test_the_bracket_writer_on_every_dev_tree():
    for tree in ptb_trees("dev")[:150]:
        words, tags, spans = tree_to_spans(tree)
        assert spans_to_bracketed(words, tags, spans) == to_bracketed(tree)


def test_the_bracket_writer_refuses_what_is_not_a_binary_bracketing_in_preorder():
    words, tags = ["a", "b", "c"], ["X", "Y", "Z"]
    good = [(0, 3, "S"), (0, 2, ""), (0, 1, ""), (1, 2, ""), (2, 3, "")]
    writer = BracketWriter(words, tags)
    assert writer.write(good) == "(TOP (S (X a) (Y b) (Z c)))"
    bad = [
        ("has 5 spans", good[:-1]),
        ("does not follow", [good[0], good[2], good[1], good[3], good[4]]),  # a child before its parent
        ("does not follow", [(0, 3, "S"), (0, 1, ""), (1, 3, ""), (2, 3, ""), (1, 2, "")]),  # right before left
        ("does not follow", [(0, 2, ""), (0, 1, ""), (1, 2, ""), (2, 3, ""), (0, 3, "")]),  # no whole sentence first
        ("does not follow", [(0, 3, "S"), (0, 3, ""), (0, 1, ""), (1, 2, ""), (2, 3, "")]),  # a unary span
        ("empty part", [(0, 3, "S++VP")] + good[1:]),
    ]
    for message, spans in bad:
        with pytest.raises(StructPrefError, match=message):
            writer.write(spans)
    with pytest.raises(StructPrefError, match="3 words but 2 tags"):
        BracketWriter(words, tags[:2])
    with pytest.raises(StructPrefError, match="no words"):
        BracketWriter([], [])


def test_spans_to_tree_refuses_what_is_not_a_binary_bracketing():
    words, tags = ["a", "b", "c"], ["X", "Y", "Z"]
    good = [(0, 3, "S"), (0, 2, ""), (0, 1, ""), (1, 2, ""), (2, 3, "")]
    assert spans_to_tree(words, tags, good) == parse_bracketed("(TOP (S (X a) (Y b) (Z c)))")
    with pytest.raises(StructPrefError, match="has 5 spans"):
        spans_to_tree(words, tags, good[:-1])
    with pytest.raises(StructPrefError, match="twice"):
        spans_to_tree(words, tags, good[:-1] + [(0, 2, "NP")])
    with pytest.raises(StructPrefError, match="whole sentence"):
        spans_to_tree(words, tags, good[1:] + [(1, 3, "")])
    with pytest.raises(StructPrefError, match="no split|nest"):
        spans_to_tree(words, tags, [(0, 3, "S"), (0, 2, ""), (1, 3, ""), (0, 1, ""), (2, 3, "")])
    with pytest.raises(StructPrefError, match="outside"):
        spans_to_tree(words, tags, good[:-1] + [(2, 4, "")])
    with pytest.raises(StructPrefError, match="empty part"):
        spans_to_tree(words, tags, [(0, 3, "S++VP")] + good[1:])
    with pytest.raises(StructPrefError, match="3 words but 2 tags"):
        spans_to_tree(words, tags[:2], good)
    with pytest.raises(StructPrefError, match="no words"):
        spans_to_tree([], [], [])
    with pytest.raises(StructPrefError, match="start, end, label"):
        spans_to_tree(words, tags, good[:-1] + [(2, 3)])


def test_tree_to_spans_refuses_bad_trees():
    with pytest.raises(StructPrefError, match="not 'TOP'"):
        tree_to_spans(parse_bracketed("(S (NN a))"))
    with pytest.raises(StructPrefError, match="cannot be a span label"):
        tree_to_spans(parse_bracketed("(TOP (S+X (NN a) (NN b)))"))
    with pytest.raises(StructPrefError, match="only child of a preterminal"):
        tree_to_spans(Tree("TOP", [Tree("S", ["a", Tree("NN", ["b"])])]))
    with pytest.raises(StructPrefError, match="nltk Tree"):
        tree_to_spans("(TOP (NN a))")


def test_span_labels_vocabulary(train_trees):
    labels = SpanLabels.from_trees(train_trees[:200])
    assert labels.labels[0] == "" and labels.index("") == 0
    assert "S" in labels and "NP" in labels
    assert all(labels.index(label) == i for i, label in enumerate(labels.labels))
    assert len(labels) == len(labels.labels)
    assert SpanLabels.from_dict(labels.to_dict()) == labels
    with pytest.raises(StructPrefError, match="unknown span label 'NOPE'"):
        labels.index("NOPE")
    with pytest.raises(StructPrefError, match="start with the empty label"):
        SpanLabels(["S", ""])
    with pytest.raises(StructPrefError, match="distinct"):
        SpanLabels(["", "S", "S"])
    with pytest.raises(StructPrefError, match="'labels' list"):
        SpanLabels.from_dict({"labs": []})


def test_span_labels_cover_chains(train_trees):
    labels = SpanLabels.from_trees(train_trees)
    assert "S+VP" in labels
    for tree in train_trees[:300]:
        for _, _, label in tree_to_spans(tree)[2]:
            labels.index(label)

"""Grammars from treebanks of other languages: a bad tree (a word beside a
constituent, a childless constituent, a root other than TOP) stops
estimate_grammar naming it or, as asked, is skipped with a count."""
import warnings

import pytest
from nltk.tree import Tree

from spacy_structpref.errors import GrammarError, GrammarWarning, StructPrefError
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

"""A bounded fuzz of grammar training: random training trees, some damaged,
are refused naming the first bad tree or, as asked, skipped with a count, the
grammar then being that of the good trees."""
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import GrammarError, StructPrefError
from spacy_structpref.parsing.grammar import estimate_grammar

from tests.helpers.strategies import trees

pytestmark = pytest.mark.fuzz


@settings(max_examples=150, deadline=None)
@given(st.lists(trees(words=["a", "b"]), min_size=1, max_size=5), st.data())
def test_bad_training_trees_are_refused_or_skipped_with_a_count(tree_list, data):
    tree_list = [Tree("TOP", [t]) for t in tree_list]
    bad = sorted(set(data.draw(st.lists(st.integers(0, len(tree_list) - 1), max_size=2))))
    for k in bad:
        how = data.draw(st.sampled_from(["word", "childless", "root"]))
        if how == "word":
            tree_list[k] = Tree("TOP", [Tree("S", ["stray", tree_list[k][0]])])
        elif how == "childless":
            tree_list[k] = Tree("TOP", [Tree("S", [tree_list[k][0], Tree("--", [])])])
        else:
            tree_list[k] = tree_list[k][0]
    if bad:
        with pytest.raises(GrammarError, match=f"tree {bad[0]}: "):
            estimate_grammar(tree_list)
    if len(bad) == len(tree_list):
        with pytest.raises(StructPrefError, match="zero trees"):
            estimate_grammar(tree_list, skip_bad_trees=True)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grammar = estimate_grammar(tree_list, skip_bad_trees=True)
    good = [t for k, t in enumerate(tree_list) if k not in bad]
    assert grammar.skipped_trees == len(bad) and grammar.to_dict() == estimate_grammar(good).to_dict()

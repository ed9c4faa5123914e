"""Word-class nodes in trees and forests."""
from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.trees import SymbolTable
from spacy_structpref.trees.word_classes import forest_with_word_classes, forest_words, tree_with_word_classes

from tests.helpers.forest_reference import forests


def test_a_class_node_goes_between_each_preterminal_and_its_word():
    tree = Tree.fromstring("(S (NP (DT the) (NN cat)) (VP (VBD sat)))")
    got = tree_with_word_classes(tree, [None, 4, 0])
    assert got == Tree.fromstring("(S (NP (DT the) (NN (@4 cat))) (VP (VBD (@0 sat))))")
    assert tree == Tree.fromstring("(S (NP (DT the) (NN cat)) (VP (VBD sat)))")  # a copy, the input unchanged


def test_one_class_per_word_is_required():
    with pytest.raises(StructPrefError, match="2 word classes for the 3 words"):
        tree_with_word_classes(Tree.fromstring("(S (A a) (B b) (C c))"), [1, 2])


def _counted(pairs):
    return Counter((round(float(p), 12), str(t)) for p, t in pairs)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_every_tree_of_the_forest_gets_its_classes_and_keeps_its_probability(data):
    """The trees of the new forest, enumerated, are the old forest's trees
    with their classes inserted, each of the same probability."""
    symbols = SymbolTable()
    forest, words = data.draw(forests(symbols))
    trees = list(forest.trees(words))
    assume(all(len(t.leaves()) == len(words) for _, t in trees))
    classes = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=len(words),
                                 max_size=len(words)))
    got = forest_with_word_classes(forest, classes)
    assert forest_words(forest) == words
    assert _counted(got.trees(words)) == _counted((p, tree_with_word_classes(t, classes)) for p, t in trees)
    assert got.log_total == pytest.approx(forest.log_total)

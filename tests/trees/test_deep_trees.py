"""Trees 5,000 levels deep go through every tree function (reading and
writing brackets, normalising, restoring words, word-class nodes, Doc round trips) without
Python's recursion limit."""
from nltk.tree import Tree

from spacy_structpref.trees import (doc_to_tree, normalize_tree, parse_bracketed, restore_words, to_bracketed,
                                    tree_to_doc)
from spacy_structpref.trees.word_classes import tree_with_word_classes

from tests.helpers.deep_trees import DEPTH, chain


def test_deep_trees_need_no_recursion_limit(nlp):
    """Recursive versions of normalize_tree and to_bracketed fail from depth
    ~332, of tree_to_doc from ~993."""
    deep = chain(DEPTH)
    text = to_bracketed(deep)
    assert text == "(TOP " + "(X " * DEPTH + "(NN w)" + ")" * (DEPTH + 1)
    assert to_bracketed(parse_bracketed(text)) == text
    assert to_bracketed(normalize_tree(deep)) == text
    raw = Tree("", [Tree("X-SBJ", [chain(DEPTH)[0], Tree("-NONE-", ["*"])])])
    assert to_bracketed(normalize_tree(raw)) == "(TOP (X " + text[5:] + ")"
    assert to_bracketed(restore_words(deep, ["v"])) == text.replace("(NN w)", "(NN v)")
    assert to_bracketed(tree_with_word_classes(deep, [3])) == text.replace("(NN w)", "(NN (@3 w))")
    doc = tree_to_doc(nlp.vocab, deep)
    assert len(doc.spans["constituents"]) == DEPTH + 1
    assert to_bracketed(doc_to_tree(doc)) == text

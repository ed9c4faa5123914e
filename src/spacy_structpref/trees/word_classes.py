"""Word classes as tree nodes: a unary node labelled with the word's class
(e.g. its cluster of distributional word vectors) inserted between each
preterminal and its word, in a tree or in every tree of a packed forest.

A subset-tree kernel over such trees counts, beside every fragment it
counted before, the fragments that stop at the class node: two questions
about different cities share ``(NP (NNP @17))`` where before they shared
only ``(NP NNP)``. This is how Plank & Moschitti (2013) bring word clusters
into tree kernels; the kernel itself is unchanged, only its input.

Class labels are written ``@<class>`` (:func:`class_label`), a form no
treebank label takes. A word without a class keeps its preterminal as it is.
"""
from typing import List, Optional, Sequence

from nltk.tree import Tree

from ..errors import StructPrefError
from .brackets import fold
from .forest import Forest, ForestBuilder
from .normalize import is_preterminal

CLASS_PREFIX = "@"


def class_label(word_class: int) -> str:
    """The node label of a word class."""
    return f"{CLASS_PREFIX}{int(word_class)}"


def _checked(classes: Sequence[Optional[int]], n_words: int, what: str) -> list:
    classes = list(classes)
    if len(classes) != n_words:
        raise StructPrefError(f"{len(classes)} word classes for the {n_words} words of the {what}")
    return classes


def tree_with_word_classes(tree: Tree, classes: Sequence[Optional[int]]) -> Tree:
    """A copy of ``tree`` with ``(TAG (@c word))`` for each preterminal
    ``(TAG word)`` whose word (in leaf order) has class ``c`` in ``classes``
    (None: no class, the preterminal kept). Trees of any depth: no
    recursion."""
    classes = list(classes)
    n_words = 0

    def combine(node, kids):
        nonlocal n_words
        if kids is None:
            n_words += 1
            return node
        # a preterminal's word is the leaf just counted
        if is_preterminal(node) and n_words <= len(classes) and classes[n_words - 1] is not None:
            kids = [Tree(class_label(classes[n_words - 1]), kids)]
        return Tree(node.label(), kids)

    out = fold(tree, combine)
    _checked(classes, n_words, "tree")
    return out


def forest_words(forest: Forest) -> List[str]:
    """The words of a forest, read off the preterminal rules that hold them."""
    words: List[Optional[str]] = [None] * forest.n_words
    productions, table = forest.symbols.productions, forest.symbols.words
    for e in range(forest.n_edges):
        for t, symbol in zip(forest.edge_tails(e).tolist(), productions[forest.rule[e]][1]):
            if t < 0:
                words[-t - 1] = table[-symbol - 1]
    if any(w is None for w in words):
        raise StructPrefError("a forest word is under no hyperedge: not a parse forest of its sentence")
    return words


def forest_with_word_classes(forest: Forest, classes: Sequence[Optional[int]]) -> Forest:
    """A copy of ``forest`` (in its symbol table) in which each word of
    class ``c`` hangs from a node ``@c`` of its one-word span (a hyperedge
    of probability 1), so every tree of the forest is that tree with its
    word classes inserted (:func:`tree_with_word_classes`) and keeps its
    probability. Inside and outside scores are recomputed if the forest
    had them."""
    classes = _checked(classes, forest.n_words, "forest")
    builder = ForestBuilder(forest.symbols, forest.n_words, forest_words(forest))
    # class nodes first: node ids stay bottom-up (every tail below its head)
    class_node = {}
    for i, word_class in enumerate(classes):
        if word_class is not None:
            class_node[i] = builder.add_node(class_label(word_class), i, i + 1)
            builder.add_edge(class_node[i], [-(i + 1)], 1.0)
    offset = len(builder.label)
    for v in range(forest.n_nodes):
        builder.add_node_id(int(forest.label[v]), int(forest.start[v]), int(forest.end[v]), int(forest.state[v]))
    for e in range(forest.n_edges):
        tails = [offset + t if t >= 0 else class_node.get(-t - 1, t) for t in forest.edge_tails(e).tolist()]
        builder.add_edge(offset + int(forest.head[e]), tails, float(forest.prob[e]))
    out = builder.build(offset + forest.root)
    return out.compute_inside_outside() if forest.log_inside is not None else out

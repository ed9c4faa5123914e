"""Hypothesis strategies shared by the tests: random small trees and forests."""
from hypothesis import strategies as st
from nltk.tree import Tree

LABELS = ["S", "NP", "VP", "PP"]
TAGS = ["DT", "NN", "VB", "IN"]
WORDS = ["a", "b", "c"]


@st.composite
def trees(draw, max_depth: int = 4, labels=LABELS, tags=TAGS, words=WORDS):
    """Random trees with preterminals over words; unary chains allowed."""

    def build(depth):
        if depth >= max_depth or draw(st.booleans()) and depth > 0:
            return Tree(draw(st.sampled_from(tags)), [draw(st.sampled_from(words))])
        n = draw(st.integers(min_value=1, max_value=3))
        return Tree(draw(st.sampled_from(labels)), [build(depth + 1) for _ in range(n)])

    return build(0)

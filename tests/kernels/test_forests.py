"""Forest kernel: the expected tree kernel over the trees of two forests (Zhang
et al. 2010: the fractional counts of eq. 2 in the dot product of eq. 5;
checked by enumeration), equal to the tree kernel on trees, stable on long
sentences."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.kernels import PreparedForest, composite_kernel, forest_kernel, gram, tree_kernel
from spacy_structpref.trees import Forest, ForestBuilder, SymbolTable, TreeArrays

from tests.helpers.forest_reference import expected_tree_kernel, forests
from tests.helpers.strategies import trees


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([0.2, 0.4, 1.0]))
def test_forest_kernel_is_expected_tree_kernel(data, lam):
    symbols = SymbolTable()
    f1, w1 = data.draw(forests(symbols))
    f2, w2 = data.draw(forests(symbols))
    expected = expected_tree_kernel(f1, w1, f2, w2, lam, symbols)
    assert forest_kernel(f1, f2, lam=lam) == pytest.approx(expected, rel=1e-10)
    assert forest_kernel(f2, f1, lam=lam) == pytest.approx(expected, rel=1e-10)
    # normalised self-kernel is 1
    assert forest_kernel(f1, f1, lam=lam, normalize=True) == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(trees(), trees(), st.sampled_from([0.3, 0.4, 1.0]))
def test_forest_kernel_on_trees_is_tree_kernel(t1, t2, lam):
    symbols = SymbolTable()
    a1, a2 = TreeArrays.from_tree(t1, symbols), TreeArrays.from_tree(t2, symbols)
    k = tree_kernel(a1, a2, lam=lam)
    assert forest_kernel(Forest.from_tree_arrays(a1), Forest.from_tree_arrays(a2), lam=lam) == pytest.approx(k, rel=1e-12)
    assert forest_kernel(a1, a2, lam=lam) == pytest.approx(k, rel=1e-12)  # trees become forests
    assert forest_kernel(a1, a2, lam=lam, normalize=True) == pytest.approx(tree_kernel(a1, a2, lam=lam, normalize=True))


def _binary_forest(symbols, n, scale):
    """Every binary bracketing of n words (one label), all rule probabilities
    multiplied by ``scale``: every tree has 2n - 1 edges, so the scale cancels
    in P(t | f) but the inside scores fall to scale^(2n-1)."""
    words = ["w%d" % (i % 3) for i in range(n)]
    fb = ForestBuilder(symbols, n)
    node = {}
    for i in range(n):
        node[i, i + 1] = fb.add_node("T", i, i + 1)
        fb.add_edge(node[i, i + 1], [-(i + 1)], scale, words)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            node[i, j] = fb.add_node("N", i, j)
            for k in range(i + 1, j):
                fb.add_edge(node[i, j], [node[i, k], node[k, j]], scale * (0.5 + 0.4 * ((i + k) % 2)))
    return fb.build(node[0, n])


def test_long_sentences_do_not_underflow():
    symbols = SymbolTable()
    n = 40
    plain, tiny = _binary_forest(symbols, n, 1.0), _binary_forest(symbols, n, 1e-20)
    assert tiny.log_total < -1000  # β(root) would be 0.0 in linear space
    k_plain = forest_kernel(plain, plain)
    k_tiny = forest_kernel(tiny, tiny)
    assert np.isfinite(k_tiny) and k_tiny > 0
    assert k_tiny == pytest.approx(k_plain, rel=1e-9)
    assert forest_kernel(tiny, plain, normalize=True) == pytest.approx(1.0, rel=1e-9)


def test_gram_over_forests_and_composite():
    symbols = SymbolTable()
    fs = [_binary_forest(symbols, n, 1.0) for n in (2, 3, 4)]
    G = gram(fs, normalize=False)
    for i, f in enumerate(fs):
        for j, g in enumerate(fs):
            assert G[i, j] == pytest.approx(forest_kernel(f, g))
    prepared = PreparedForest(fs[0])
    assert forest_kernel(prepared, fs[1]) == pytest.approx(G[0, 1])
    assert composite_kernel(fs[0], fs[1], -1.0, -2.0, b=0.5) == pytest.approx(G[0, 1] + 1.0)


def test_forest_errors():
    symbols = SymbolTable()
    fb = ForestBuilder(symbols, 1)
    v = fb.add_node("X", 0, 1)
    fb.add_edge(v, [-1], 1.0, ["a"])
    with pytest.raises(StructPrefError, match="no root"):
        fb.build(None)
    f = fb.build(v)
    with pytest.raises(StructPrefError, match="λ"):
        forest_kernel(f, f, lam=2.0)
    other = Forest.from_tree_arrays(TreeArrays.from_tree(Tree.fromstring("(X a)"), SymbolTable()))
    with pytest.raises(StructPrefError, match="mismatched vocabularies"):
        forest_kernel(f, other)
    with pytest.raises(StructPrefError, match="sigma"):
        gram([f], sigma=0)

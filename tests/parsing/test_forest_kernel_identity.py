"""The forest-kernel identity (Zhang et al. 2010) on parser forests: the
forest kernel of two parser forests equals the expected subset-tree kernel
over the parser's posterior distributions of (n-ary, treebank-label) trees,
computed by enumeration."""
import pytest

from spacy_structpref.parsing.parser import Parser
from spacy_structpref.trees.arrays import SymbolTable

from tests.helpers.kernel_reference import collins_duffy, posterior_trees

kernels = pytest.importorskip("spacy_structpref.kernels")

LAM = 0.4
PAIRS = [("The company said .", "Prices fell sharply ."),
         ("He sold the shares .", "It rose 5 % ."),
         ("The company said .", "The company said .")]


@pytest.fixture(scope="module")
def parser(grammar):
    # A pruned forest keeps enumeration small; the identity holds for any forest.
    return Parser(grammar, beam=0.0, threshold=1e-3, symbols=SymbolTable())


@pytest.mark.parametrize("s1,s2", PAIRS)
def test_forest_kernel_is_expected_tree_kernel(parser, s1, s2):
    w1, w2 = s1.split(), s2.split()
    f1, f2 = parser.parse(w1).forest, parser.parse(w2).forest
    d1, d2 = posterior_trees(f1, w1), posterior_trees(f2, w2)
    assert len(d1) > 1 and len(d2) > 1  # real ambiguity, not single trees
    expected = sum(p1 * p2 * collins_duffy(t1, t2, LAM) for p1, t1 in d1 for p2, t2 in d2)
    got = kernels.forest_kernel(f1, f2, lam=LAM)
    assert got == pytest.approx(expected, rel=1e-9)


def test_reference_kernel_agrees_with_tree_kernel(parser):
    words = "He sold the shares .".split()
    trees = [t for _, t in posterior_trees(parser.parse(words).forest, words)][:6]
    for a in trees:
        for b in trees:
            got = kernels.tree_kernel(a, b, lam=LAM, symbols=parser.symbols)
            assert got == pytest.approx(collins_duffy(a, b, LAM), rel=1e-9)

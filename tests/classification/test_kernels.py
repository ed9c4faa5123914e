"""The Doc kernels of kernel_textcat: the forest-kernel block equals the
expected tree kernel by enumeration on random forests and on parser forests
(Zhang et al. 2010), tempered or not; the tree, bag-of-words and summed
kernels against their definitions."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.classification.kernels import BowDocKernel, ForestDocKernel, SumDocKernel, TreeDocKernel
from spacy_structpref.kernels import PreparedForest, forest_block, forest_gram
from spacy_structpref.trees import SymbolTable

from tests.helpers.docs import parsed
from tests.helpers.forest_reference import expected_tree_kernel, forests
from tests.helpers.kernel_reference import collins_duffy, posterior_trees

LAM = 0.4


@settings(max_examples=25, deadline=None)
@given(st.data(), st.integers(1, 2))
def test_forest_block_is_the_expected_tree_kernel(data, n_threads):
    symbols = SymbolTable()
    pairs = [data.draw(forests(symbols)) for _ in range(3)]
    prepared = [PreparedForest(f) for f, _ in pairs]
    K = forest_block(prepared, None, LAM, n_threads, progress=False)
    expected = np.array([[expected_tree_kernel(f1, w1, f2, w2, LAM, symbols) for f2, w2 in pairs]
                         for f1, w1 in pairs])
    np.testing.assert_allclose(K, expected, rtol=1e-9, atol=1e-12)
    rows = forest_block(prepared[:2], prepared, LAM, n_threads, progress=False)
    np.testing.assert_allclose(rows, expected[:2], rtol=1e-9, atol=1e-12)


def test_doc_forest_gram_is_the_normalised_expected_tree_kernel(short_ptb_parser_nlp):
    """On parser forests (Zhang et al. 2010: the forest kernel is the
    expected subset-tree kernel), by enumeration with the plain-Python
    Collins–Duffy kernel; tempering (α) is the same identity on P(e)^α."""
    docs = parsed(short_ptb_parser_nlp, ["He sold the shares .", "Prices fell sharply .", "The company said ."])
    for alpha in (1.0, 2.0):
        kernel = ForestDocKernel(LAM, alpha, None, n_threads=2)
        items = kernel.items(docs)
        K = kernel.gram(kernel.prepare(items))
        dists = [posterior_trees(f, [t.text for t in d]) for f, d in zip(items, docs)]
        assert all(len(d) > 1 for d in dists)  # real ambiguity
        raw = np.array([[sum(p * q * collins_duffy(s, t, LAM) for p, s in a for q, t in b) for b in dists]
                        for a in dists])
        expected = raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw)))
        np.testing.assert_allclose(K, expected, rtol=1e-9)
        np.testing.assert_allclose(K, forest_gram(items, lam=LAM), rtol=1e-12)  # the package's own Gram
        if alpha == 1.0:
            untempered = K
        else:  # tempering changes the kernel
            assert not np.allclose(K, untempered)


def test_tree_and_bow_kernels_against_their_definitions(short_ptb_parser_nlp):
    docs = parsed(short_ptb_parser_nlp, ["He sold the shares .", "He sold the stock .", "Prices fell ."])
    tree = TreeDocKernel(LAM)
    trees = tree.items(docs)
    K = tree.gram(tree.prepare(trees))
    raw = np.array([[collins_duffy(a, b, LAM) for b in trees] for a in trees])
    np.testing.assert_allclose(K, raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw))), rtol=1e-9)
    bow = BowDocKernel()
    Kb = bow.gram(bow.prepare(bow.items(docs)))
    # he, sold, the, ., he sold, sold the: 6 of 8 features shared, each side 8 (uni 5 + bi 4 = 9? count them)
    a = ["he", "sold", "the", "shares", ".", "he sold", "sold the", "the shares", "shares ."]
    b = ["he", "sold", "the", "stock", ".", "he sold", "sold the", "the stock", "stock ."]
    assert Kb[0, 1] == pytest.approx(len(set(a) & set(b)) / np.sqrt(len(a) * len(b)))
    both = SumDocKernel([tree, bow], [0.25, 0.75])
    Ks = both.gram(both.prepare(both.items(docs)))
    np.testing.assert_allclose(Ks, 0.25 * K + 0.75 * Kb, rtol=1e-12)

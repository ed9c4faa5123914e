"""The Doc kernels of kernel_textcat: the forest-kernel block equals the
expected tree kernel by enumeration on random forests and on parser forests
(Zhang et al. 2010), tempered or not; the tree, bag-of-words and summed
kernels against their definitions."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.classification.kernels import BowDocKernel, ForestDocKernel, SumDocKernel, TreeDocKernel
from spacy_structpref.classification.word_clusters import WordClusters
from spacy_structpref.errors import SavedModelError, StructPrefError
from spacy_structpref.kernels import PreparedForest, forest_block, forest_gram
from spacy_structpref.trees import SymbolTable
from spacy_structpref.trees.word_classes import tree_with_word_classes

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


def test_word_class_nodes_in_the_tree_and_forest_kernels(short_ptb_parser_nlp):
    """With word clusters the tree kernel is the Collins–Duffy kernel of the
    trees with their class nodes, the forest kernel the expected one over
    the forests' trees with theirs; two sentences come nearer when their
    differing words share a cluster than when they do not."""
    docs = parsed(short_ptb_parser_nlp, ["He sold the company .", "He sold the stock .", "Prices fell sharply ."])
    strings = short_ptb_parser_nlp.vocab.strings
    clusters = WordClusters(np.array([strings["company"], strings["stock"], strings["fell"]], dtype=np.uint64),
                            np.array([0, 0, 1]), 2)
    classes = [clusters.classes(d) for d in docs]
    assert classes[0][3] == classes[1][3] == 0 and classes[2][1] == 1
    plain, classed = TreeDocKernel(LAM), TreeDocKernel(LAM, word_clusters=2)
    with pytest.raises(StructPrefError, match="word clusters are not learnt yet"):
        classed.items(docs)
    classed.clusters = clusters
    trees = classed.items(docs)
    assert trees == [tree_with_word_classes(t, c) for t, c in zip(plain.items(docs), classes)]
    K = classed.gram(classed.prepare(trees))
    raw = np.array([[collins_duffy(a, b, LAM) for b in trees] for a in trees])
    np.testing.assert_allclose(K, raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw))), rtol=1e-9)
    apart = TreeDocKernel(LAM, word_clusters=3)  # the same nodes, "stock" in a class of its own
    apart.clusters = WordClusters(np.array([strings["company"], strings["stock"], strings["fell"]], dtype=np.uint64),
                                  np.array([0, 2, 1]), 3)
    assert K[0, 1] > apart.gram(apart.prepare(apart.items(docs)))[0, 1]
    forest = ForestDocKernel(LAM, 1.0, None, n_threads=1, word_clusters=2)
    forest.clusters = clusters
    items = forest.items(docs)
    dists = [posterior_trees(f, [t.text for t in d]) for f, d in zip(items, docs)]
    raw = np.array([[sum(p * q * collins_duffy(s, t, LAM) for p, s in a for q, t in b) for b in dists]
                    for a in dists])
    np.testing.assert_allclose(forest.gram(forest.prepare(items)), raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw))),
                               rtol=1e-9)
    assert forest.settings()["word_clusters"] == 2 and "word_clusters" not in ForestDocKernel(LAM).settings()


def test_saved_word_clusters_must_match_the_kernel():
    clusters = WordClusters(np.array([1, 2], dtype=np.uint64), np.array([0, 1]), 2)
    with pytest.raises(SavedModelError, match="the save holds word clusters, and the kernel has word_clusters = 0"):
        TreeDocKernel(LAM).load_state(clusters.to_dict())
    with pytest.raises(SavedModelError, match="the save lacks word clusters"):
        TreeDocKernel(LAM, word_clusters=2).load_state(None)
    with pytest.raises(SavedModelError, match="holds 2 word clusters, the kernel word_clusters = 3"):
        TreeDocKernel(LAM, word_clusters=3).load_state(clusters.to_dict())
    both = SumDocKernel([TreeDocKernel(LAM, word_clusters=2), BowDocKernel()], [0.5, 0.5])
    both.load_state([clusters.to_dict(), None])
    assert both.state() == [clusters.to_dict(), None] and both.kernels[0].clusters is not None
    with pytest.raises(SavedModelError, match="bow kernel holds learnt data"):
        BowDocKernel().load_state({"x": 1})
    with pytest.raises(StructPrefError, match="word_clusters .0: none. must be an integer"):
        TreeDocKernel(LAM, word_clusters=-1)

"""Subset-tree / subtree kernels, Gram matrices and the composite kernel
against the shared pure-Python reference (ref_sst.py) and hand computations."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.kernels import TreeBatch, composite_gram, composite_kernel, gram, pack, tree_kernel
from spacy_structpref.trees import (SymbolTable, TreeArrays, parse_bracketed, to_bracketed, tree_to_doc,
                                    trees_to_arrays)

from tests.helpers.paths import SHARED
from tests.helpers.strategies import trees

# the reference kernel and tree dump (README: Development); default: ../shared/bench beside the checkout
BENCH = Path(os.environ.get("STRUCTPREF_BENCH") or SHARED / "bench")
NLTK_DATA = SHARED / "nltk_data"


def _ref():
    if not (BENCH / "ref_sst.py").is_file():
        pytest.skip(f"reference kernel {BENCH / 'ref_sst.py'} not found: set STRUCTPREF_BENCH to the folder that holds it")
    sys.path.insert(0, str(BENCH))
    try:
        import ref_sst
    finally:
        sys.path.remove(str(BENCH))
    return ref_sst


def ref_matrix(lines, lam):
    ref = _ref()
    nodes = [ref.prepare(ref.parse(s)) for s in lines]
    return np.array([[ref.sst_kernel(a, b, lam) for b in nodes] for a in nodes])


@pytest.fixture(scope="module")
def ptb_lines(tmp_path_factory):
    """The first 30 PTB-sample trees prepared exactly as dump_trees.py does."""
    if not (BENCH / "dump_trees.py").is_file():
        pytest.skip(f"{BENCH / 'dump_trees.py'} not found: set STRUCTPREF_BENCH to the folder that holds it")
    out = tmp_path_factory.mktemp("dump")
    # absolute: dump_trees.py runs in another directory
    env = dict(os.environ, NLTK_DATA=str(Path(os.environ.get("NLTK_DATA", NLTK_DATA)).resolve()))
    if not Path(env["NLTK_DATA"]).is_dir():
        pytest.skip(f"NLTK data not found at {env['NLTK_DATA']}")
    subprocess.run([sys.executable, str(BENCH / "dump_trees.py"), "30"], cwd=out, env=env, check=True,
                   capture_output=True)
    return [line for line in (out / "trees.txt").read_text().splitlines() if line.strip()]


def test_ptb_slice_matches_reference(ptb_lines):
    K = gram(ptb_lines, normalize=False, n_threads=2, progress=False)
    R = ref_matrix(ptb_lines, 0.4)
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=0)
    assert round(K[0, 1], 2) == 2.96  # known value from bench/README.md
    Kn = gram(ptb_lines, normalize=True)
    d = np.diag(R)
    np.testing.assert_allclose(Kn, R / np.sqrt(np.outer(d, d)), rtol=1e-12)
    assert np.allclose(np.diag(Kn), 1.0)


def test_rectangular_gram_and_threads_agree(ptb_lines):
    A, B = ptb_lines[:12], ptb_lines[12:]
    symbols = SymbolTable()
    full = gram(trees_to_arrays([Tree.fromstring(s) for s in ptb_lines], symbols), normalize=False, n_threads=1)
    for threads in (1, 2):
        block = gram(A, B, normalize=False, n_threads=threads, progress=False)
        np.testing.assert_allclose(block, full[:12, 12:], rtol=1e-12)
    assert tree_kernel(A[3], B[5]) == pytest.approx(full[3, 17], rel=1e-12)


def test_hand_computed_small_case():
    t = "(NP (DT the) (NN dog))"
    lam = 0.4
    # Δ(DT, DT) = Δ(NN, NN) = λ, Δ(NP, NP) = λ(1 + λ)²
    assert tree_kernel(t, t, lam=lam) == pytest.approx(2 * lam + lam * (1 + lam) ** 2)
    # subtree kernel: Δ(NP, NP) = λ · λ · λ
    assert tree_kernel(t, t, lam=lam, sigma=0) == pytest.approx(2 * lam + lam ** 3)
    # a different word changes the preterminal production, so only DT and NP -> DT NN match
    u = "(NP (DT the) (NN cat))"
    assert tree_kernel(t, u, lam=lam) == pytest.approx(lam + lam * (1 + lam))
    assert tree_kernel(t, u, lam=lam, sigma=0) == pytest.approx(lam)


def _subtree_kernel_brute(t1: Tree, t2: Tree, lam: float) -> float:
    """σ = 0: equal complete subtrees, each weighted λ^(internal nodes)."""
    def subs(t):
        return [s for s in t.subtrees()]
    total = 0.0
    for a in subs(t1):
        for b in subs(t2):
            if to_bracketed(a) == to_bracketed(b):
                total += lam ** len(list(a.subtrees()))
    return total


@settings(max_examples=60, deadline=None)
@given(trees(), trees(), st.sampled_from([0.1, 0.4, 1.0]))
def test_random_trees_match_references(t1, t2, lam):
    R = ref_matrix([to_bracketed(t1), to_bracketed(t2)], lam)
    K = gram([t1, t2], lam=lam, normalize=False, n_threads=1)
    np.testing.assert_allclose(K, R, rtol=1e-12)
    # cosine normalisation: symmetric, at most 1
    Kn = gram([t1, t2], lam=lam)
    assert Kn[0, 1] == pytest.approx(Kn[1, 0]) and Kn[0, 1] <= 1 + 1e-12


@settings(max_examples=60, deadline=None)
@given(trees(), trees(), st.sampled_from([0.1, 0.4, 1.0]))
def test_random_trees_subtree_kernel(t1, t2, lam):
    assert tree_kernel(t1, t2, lam=lam, sigma=0) == pytest.approx(_subtree_kernel_brute(t1, t2, lam), rel=1e-12)


def test_all_input_forms_agree(nlp):
    s1 = "(S (NP (DT the) (NN dog)) (VP (VBZ barks)))"
    s2 = "(S (NP (DT the) (NN cat)) (VP (VBZ barks)))"
    symbols = SymbolTable()
    a1, a2 = TreeArrays.from_tree(Tree.fromstring(s1), symbols), TreeArrays.from_tree(Tree.fromstring(s2), symbols)
    expected = tree_kernel(s1, s2)
    assert tree_kernel(Tree.fromstring(s1), Tree.fromstring(s2)) == expected
    assert tree_kernel(a1, a2) == expected
    assert tree_kernel(a1, s2) == expected  # strings join the TreeArrays' table
    doc1, doc2 = tree_to_doc(nlp.vocab, Tree.fromstring(s1)), tree_to_doc(nlp.vocab, Tree.fromstring(s2))
    assert tree_kernel(doc1, doc2) == expected


def test_batch_caches_self_kernels():
    lines = ["(S (A a) (B b))", "(S (A a) (B c))", "(S (A a))"]
    batch = TreeBatch(lines)
    diag = batch.self_kernels(0.4)
    assert batch.self_kernels(0.4) is diag
    K = gram(batch, batch, normalize=False)
    np.testing.assert_allclose(diag, np.diag(K))
    np.testing.assert_allclose(gram(batch, lines[:2]), gram(lines)[:, :2])


PACKED = ("node_off", "prod", "kid_off", "kids", "run_off", "run_prod", "run_start", "order")


@settings(max_examples=80, deadline=None)
@given(st.lists(trees(), max_size=6), st.booleans(), st.sampled_from([0, 1]))
def test_batch_from_strings_matches_the_slow_path(trees_, outer, sigma):
    """TreeBatch(strings) reads brackets in one pass; the reference is
    parse_bracketed + TreeArrays.from_tree + pack of the TreeArrays list."""
    texts = [f"( {to_bracketed(t)} )" if outer else to_bracketed(t) for t in trees_]
    fast = TreeBatch(texts)
    slow = trees_to_arrays([parse_bracketed(t) for t in texts])
    packed = pack(slow)
    for name in PACKED:
        assert np.array_equal(getattr(fast.packed, name), getattr(packed, name)), name
    assert len(fast) == len(texts)
    if slow:
        assert fast.symbols.to_dict() == slow[0].symbols.to_dict()
    K = gram(fast, lam=0.3, sigma=sigma, normalize=False)
    assert np.array_equal(K, gram(slow, lam=0.3, sigma=sigma, normalize=False))
    assert np.array_equal(gram(texts, lam=0.3, sigma=sigma), gram(TreeBatch(slow), lam=0.3, sigma=sigma))


def test_composite_kernel():
    a, b = "(S (A a) (B b))", "(S (A a) (B c))"
    k = tree_kernel(a, b, lam=0.3)
    assert composite_kernel(a, b, -2.0, -3.0, lam=0.3, b=0.2) == pytest.approx(k + 0.2 * 6.0)
    G = composite_gram([a, b], [-2.0, -3.0], lam=0.3, b=0.2, normalize=False)
    assert G[0, 1] == pytest.approx(k + 1.2) and G[1, 0] == pytest.approx(k + 1.2)
    with pytest.raises(StructPrefError, match="log probability"):
        composite_gram([a, b], [-1.0], lam=0.3)


def test_errors(nlp):
    t = "(S (A a))"
    for lam in (0.0, -0.1, 1.5):
        with pytest.raises(StructPrefError, match="λ"):
            tree_kernel(t, t, lam=lam)
    with pytest.raises(StructPrefError, match="sigma"):
        tree_kernel(t, t, sigma=0.5)
    x = TreeArrays.from_tree(Tree.fromstring(t), SymbolTable())
    y = TreeArrays.from_tree(Tree.fromstring(t), SymbolTable())
    with pytest.raises(StructPrefError, match="mismatched vocabularies"):
        tree_kernel(x, y)
    with pytest.raises(StructPrefError, match="mismatched vocabularies"):
        gram([x], [y])
    with pytest.raises(StructPrefError, match="cannot use a int"):
        tree_kernel(t, 3)
    with pytest.raises(StructPrefError, match="no constituents"):
        tree_kernel(nlp("no tree here"), t)

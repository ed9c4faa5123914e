"""Kernels out of the double range and bounded forests: normalised kernels
are finite cosines in [0, 1] however wide, deep or tiny-λ the trees, by every
route (Gram matrix, tree kernel, DAG block and weighted sums, forest kernel);
unnormalised ones raise rather than return inf/nan; the forest kernel refuses
forests above its node bound."""
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.kernels import (PreparedForest, dag_kernel_block, dag_self_kernels, dag_weighted_sums,
                                      forest_gram, forest_kernel, gram, tree_kernel)
from spacy_structpref.kernels.inputs import MAX_NODES
from spacy_structpref.trees import SymbolTable, TreeSetDAG, parse_bracketed
from spacy_structpref.trees.convert import to_forest

from tests.helpers.strategies import trees


# ------------------------------------------------------------ references
def flat(n: int, period: int) -> Tree:
    """The parser's fallback shape: ``(S (NN w0) (NN w1) ...)``, words cycling with ``period``."""
    return Tree("S", [Tree("NN", [f"w{i % period}"]) for i in range(n)])


def log_flat_kernel(n: int, p: int, q: int, lam: float, sigma: int) -> float:
    """log K(flat(n, p), flat(n, q)) in closed form: the two S nodes give
    λ Π_i (σ + λ [a_i = b_i]), the preterminal pairs with equal words λ each."""
    a, b = [i % p for i in range(n)], [i % q for i in range(n)]
    same = sum(x == y for x, y in zip(a, b))
    ca, cb = Counter(a), Counter(b)
    pairs = sum(ca[w] * cb[w] for w in ca)
    if sigma:
        log_root = math.log(lam) + same * math.log(1 + lam)
    else:  # the subtree kernel: only equal roots count
        log_root = (n + 1) * math.log(lam) if same == n else -math.inf
    return _logaddexp(log_root, math.log(lam) + math.log(pairs))


def _logaddexp(x: float, y: float) -> float:
    hi, lo = max(x, y), min(x, y)
    return hi if lo == -math.inf else hi + math.log1p(math.exp(lo - hi))


def log_cos(log_ab: float, log_aa: float, log_bb: float) -> float:
    return math.exp(log_ab - (log_aa + log_bb) / 2)


def full_binary(depth: int) -> Tree:
    """X -> X X down to ``(X (P w) (P w))``: Δ squares at every level."""
    tree = Tree("X", [Tree("P", ["w"]), Tree("P", ["w"])])
    for _ in range(depth - 1):
        tree = Tree("X", [tree, tree.copy(deep=True)])
    return tree


def log_binary_kernel(da: int, db: int, lam: float) -> float:
    """log K between full_binary(da) and full_binary(db): nodes pair up only
    at equal heights h, 2^(da-h) × 2^(db-h) pairs of Δ_h = λ (1 + Δ_(h-1))²."""
    log_delta = math.log(lam) + 2 * math.log1p(lam)  # height 1: X -> P P over P -> w
    terms = [math.log(lam) + (da + db) * math.log(2)]  # the P -> w pairs
    for h in range(1, min(da, db) + 1):
        if h > 1:
            log_delta = math.log(lam) + 2 * _logaddexp(0.0, log_delta)
        terms.append(log_delta + (da + db - 2 * h) * math.log(2))
    out = -math.inf
    for t in terms:
        out = _logaddexp(out, t)
    return out


def all_cosines(a: Tree, b: Tree, lam: float, sigma: int = 1):
    """The normalised kernel of a and b by every route: gram, tree_kernel,
    the DAG block, the DAG weighted sum and (σ = 1) the forest kernel."""
    out = {"gram": gram([a, b], lam=lam, sigma=sigma)[0, 1],
           "tree_kernel": tree_kernel(a, b, lam=lam, sigma=sigma, normalize=True)}
    symbols = SymbolTable()
    dag = TreeSetDAG([a, b], symbols)
    out["dag_block"] = dag_kernel_block(dag, dag, lam, sigma, normalize=True)[0, 1]
    out["dag_sum"] = dag_weighted_sums(TreeSetDAG([a], symbols), [1.0], TreeSetDAG([b], symbols), lam, sigma,
                                       normalize=True)[0]
    if sigma == 1:
        out["forest"] = forest_kernel(a, b, lam=lam, normalize=True)
    return out


# ------------------------------------------------------------- overflow
@pytest.mark.parametrize("sigma", [1, 0])
def test_flat_fallback_tree_of_2200_children(sigma):
    """A flat tree as the parser's fallback builds it: the kernel is beyond
    the double range (inf, normalised nan if computed plainly), and every route
    gives the exact cosine (σ = 0: the root pair underflows instead, harmlessly)."""
    a, b = flat(2200, 7), flat(2200, 5)
    expected = log_cos(log_flat_kernel(2200, 7, 5, 0.4, sigma), log_flat_kernel(2200, 7, 7, 0.4, sigma),
                       log_flat_kernel(2200, 5, 5, 0.4, sigma))
    for route, value in all_cosines(a, b, 0.4, sigma).items():
        assert value == pytest.approx(expected, rel=1e-9, abs=1e-300), route
    if sigma:  # the root pair alone is 0.4 · 1.4^2200 ≈ e^740
        with pytest.raises(StructPrefError, match="beyond the double range"):
            tree_kernel(a, a)


def test_unnormalised_overflow_raises_everywhere():
    a = flat(2200, 7)
    symbols = SymbolTable()
    dag = TreeSetDAG([a, flat(3, 1)], symbols)
    for call in (lambda: gram([a]), lambda: gram([a], normalize=False), lambda: dag_kernel_block(dag, dag),
                 lambda: dag_self_kernels(dag), lambda: dag_weighted_sums(dag, [1.0, -1.0], dag),
                 lambda: forest_kernel(a, a), lambda: forest_gram([a], normalize=False)):
        try:
            out = call()
        except StructPrefError as err:
            assert "beyond the double range" in str(err)
        else:  # only the normalised gram gets here
            assert np.isfinite(out).all() and np.allclose(np.diag(out), 1.0)


def test_doubly_exponential_depth():
    """Full binary trees at λ = 1: Δ squares per level, past 1e308 at height 10."""
    a, b = full_binary(10), full_binary(9)
    expected = log_cos(log_binary_kernel(10, 9, 1.0), log_binary_kernel(10, 10, 1.0), log_binary_kernel(9, 9, 1.0))
    for route, value in all_cosines(a, b, 1.0).items():
        assert value == pytest.approx(expected, rel=1e-9), route


@pytest.mark.parametrize("sigma", [1, 0])
def test_tiny_lambda(sigma):
    """λ = 1e-300 normalised is a finite cosine (a plain product of the two
    self-kernels underflows to 0, giving inf). As λ → 0, K → λ × (node pairs with equal
    productions; σ = 0: preterminal pairs only, larger subtrees costing more λs)."""
    a = parse_bracketed("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))")
    b = parse_bracketed("(S (NP (DT the) (NN cat)) (VP (VBZ barks)))")

    def prods(t):
        return Counter((s.label(), tuple(k.label() if isinstance(k, Tree) else k for k in s)) for s in t.subtrees()
                       if sigma or not isinstance(s[0], Tree))

    pa, pb = prods(a), prods(b)
    expected = sum(pa[p] * pb[p] for p in pa) / math.sqrt(sum(c * c for c in pa.values()) *
                                                         sum(c * c for c in pb.values()))
    for route, value in all_cosines(a, b, 1e-300, sigma).items():
        assert value == pytest.approx(expected, rel=1e-12), route


@st.composite
def shaped_trees(draw):
    """Random small trees, or very flat, very deep or full binary ones."""
    shape = draw(st.sampled_from(["random", "flat", "deep", "binary"]))
    if shape == "random":
        return draw(trees())
    if shape == "flat":
        return flat(draw(st.integers(1, 1200)), draw(st.integers(1, 4)))
    if shape == "binary":
        return full_binary(draw(st.integers(1, 10)))
    tree = Tree("NN", [draw(st.sampled_from(["a", "b"]))])
    for _ in range(draw(st.integers(1, 500))):
        tree = Tree("X", [tree, Tree("NN", ["a"])] if draw(st.booleans()) else [tree])
    return tree


@pytest.mark.fuzz
@settings(max_examples=30, deadline=None)
@given(shaped_trees(), shaped_trees(), st.sampled_from([1e-300, 1e-8, 0.4, 1.0]), st.sampled_from([0, 1]))
def test_normalised_kernels_are_cosines(a, b, lam, sigma):
    G = gram([a, b], lam=lam, sigma=sigma)
    assert np.isfinite(G).all() and (G >= 0).all() and (G <= 1).all()
    assert G[0, 0] == pytest.approx(1.0) and G[1, 1] == pytest.approx(1.0)
    assert G[0, 1] == G[1, 0]
    for route, value in all_cosines(a, b, lam, sigma).items():
        # a weighted sum (here of one cosine) is not clipped to [0, 1]: it may round past 1
        assert 0.0 <= value <= (1.0 + 1e-12 if route == "dag_sum" else 1.0), route
        assert value == pytest.approx(G[0, 1], rel=1e-9, abs=1e-300), route


# --------------------------------------------------------- forest bound
def test_forest_kernel_refuses_forests_above_max_nodes():
    a = to_forest(flat(60, 3), SymbolTable())
    assert forest_kernel(a, a, normalize=True, max_nodes=a.n_nodes) == pytest.approx(1.0)
    with pytest.raises(StructPrefError, match=f"{a.n_nodes} nodes is above max_nodes=10"):
        forest_kernel(a, a, max_nodes=10)
    with pytest.raises(StructPrefError, match="max_nodes"):
        forest_gram([a], max_nodes=10)
    with pytest.raises(StructPrefError, match="max_nodes"):
        PreparedForest(a, max_nodes=10)
    assert MAX_NODES == 10_000

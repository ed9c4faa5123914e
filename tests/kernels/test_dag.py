"""Hash-consed tree sets: the kernel block equals the Gram matrix of the
trees, with fewer distinct nodes and node pairs."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.kernels import (TreeBatch, dag_kernel_block, dag_nbytes, dag_self_kernels,
                                      dag_weighted_sums, dag_weighted_sums_over, gram)
from spacy_structpref.trees import SymbolTable, TreeSetDAG, trees_to_arrays

from tests.helpers.strategies import trees


@st.composite
def candidate_sets(draw):
    """Sets whose trees share subtrees, like k-best lists: combinations of a
    few random parts under a new root, duplicates included."""
    parts = draw(st.lists(trees(max_depth=3), min_size=1, max_size=4))
    picks = draw(st.lists(st.lists(st.sampled_from(range(len(parts))), min_size=1, max_size=3),
                          min_size=1, max_size=6))
    return [Tree("S", [parts[i].copy(deep=True) for i in pick]) for pick in picks]


@settings(max_examples=60, deadline=None)
@given(candidate_sets(), candidate_sets(), st.sampled_from([0.4, 1.0]), st.sampled_from([0, 1]))
def test_dag_block_equals_gram(set1, set2, lam, sigma):
    symbols = SymbolTable()
    a, b = trees_to_arrays(set1, symbols), trees_to_arrays(set2, symbols)
    d1, d2 = TreeSetDAG(a), TreeSetDAG(b)
    expected = gram(a, b, lam=lam, sigma=sigma, normalize=False, n_threads=1)
    K, pairs = dag_kernel_block(d1, d2, lam=lam, sigma=sigma, return_pairs=True)
    np.testing.assert_allclose(K, expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(dag_kernel_block(d1, lam=lam, sigma=sigma), gram(a, lam=lam, sigma=sigma, normalize=False),
                               rtol=1e-12)
    np.testing.assert_allclose(dag_kernel_block(d1, d2, lam=lam, sigma=sigma, normalize=True),
                               gram(a, b, lam=lam, sigma=sigma), rtol=1e-12)
    assert d1.n_dag_nodes <= d1.n_tree_nodes


@settings(max_examples=60, deadline=None)
@given(candidate_sets(), candidate_sets(), st.sampled_from([0.4, 1.0]), st.sampled_from([0, 1]),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_weighted_sums_equal_weights_times_gram(set1, set2, lam, sigma, normalize, seed):
    symbols = SymbolTable()
    a, b = trees_to_arrays(set1, symbols), trees_to_arrays(set2, symbols)
    w = np.random.default_rng(seed).normal(size=len(a))
    sums = dag_weighted_sums(TreeSetDAG(a), w, TreeSetDAG(b), lam=lam, sigma=sigma, normalize=normalize)
    expected = w @ gram(a, b, lam=lam, sigma=sigma, normalize=normalize, n_threads=1)
    np.testing.assert_allclose(sums, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())


@settings(max_examples=60, deadline=None)
@given(st.lists(candidate_sets(), min_size=1, max_size=4), candidate_sets(), st.sampled_from([0.4, 1.0]),
       st.sampled_from([0, 1]), st.booleans(), st.integers(0, 2**32 - 1))
def test_weighted_sums_over_supports_add_up(supports, candidates, lam, sigma, normalize, seed):
    """Several supports in one pass equal the weights times the Gram blocks,
    summed; one support equals dag_weighted_sums bit for bit."""
    symbols = SymbolTable()
    parts = [trees_to_arrays(s, symbols) for s in supports]
    b = trees_to_arrays(candidates, symbols)
    rng = np.random.default_rng(seed)
    weights = [rng.normal(size=len(a)) for a in parts]
    dags, cands = [TreeSetDAG(a) for a in parts], TreeSetDAG(b)
    sums = dag_weighted_sums_over(list(zip(dags, weights)), cands, lam=lam, sigma=sigma, normalize=normalize)
    expected = sum(w @ gram(a, b, lam=lam, sigma=sigma, normalize=normalize, n_threads=1) for a, w in zip(parts, weights))
    np.testing.assert_allclose(sums, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
    one = dag_weighted_sums_over([(dags[0], weights[0])], cands, lam=lam, sigma=sigma, normalize=normalize)
    assert np.array_equal(one, dag_weighted_sums(dags[0], weights[0], cands, lam=lam, sigma=sigma,
                                                 normalize=normalize))


def test_weighted_sums_over_overflowing_supports():
    """Supports whose sums overflow the fast loops are summed with logarithms, each normalised."""
    deep = Tree.fromstring("(S " + " ".join(f"(A{i % 3} (B b) (C c))" for i in range(500)) + ")")
    shallow = Tree.fromstring("(S (A0 (B b) (C c)))")
    symbols = SymbolTable()
    support, other, cands = (TreeSetDAG([deep, shallow], symbols), TreeSetDAG([deep], symbols),
                             TreeSetDAG([deep, shallow], symbols))
    parts = [(support, [1.0, -0.5]), (other, [2.0])]
    sums = dag_weighted_sums_over(parts, cands, lam=1.0, normalize=True)
    expected = sum(dag_weighted_sums(a, w, cands, lam=1.0, normalize=True) for a, w in parts)
    np.testing.assert_allclose(sums, expected, rtol=1e-9)
    assert np.isfinite(sums).all()
    with pytest.raises(StructPrefError, match="double range"):  # the raw kernel overflows
        dag_weighted_sums_over(parts, cands, lam=1.0)
    assert dag_weighted_sums_over([], cands).tolist() == [0.0, 0.0]


def test_rebuilt_dags_share_what_is_derived_per_tree_until_a_tree_is_added():
    trees = ["(S (NP (DT the) (NN dog)) (VP (VB runs)))", "(S (NP (DT a) (NN cat)) (VP (VB runs)))"]
    dag = TreeSetDAG(trees)
    kept, arrays = {}, dag.to_arrays()
    first = TreeSetDAG.from_arrays(dag.symbols, *arrays, per_tree=kept)
    expected = dag_self_kernels(dag, lam=0.4)
    np.testing.assert_array_equal(dag_self_kernels(first, lam=0.4), expected)
    assert len(kept) == 1  # landed in the kept mapping
    again = TreeSetDAG.from_arrays(dag.symbols, *arrays, per_tree=kept)
    assert again.per_tree is kept
    np.testing.assert_array_equal(dag_self_kernels(again, lam=0.4), expected)
    again.add("(S (VP (VB runs)))")  # detaches: the kept values stay those of the two trees
    assert again.per_tree is not kept
    np.testing.assert_allclose(dag_self_kernels(again, lam=0.4), dag_self_kernels(TreeSetDAG(list(again)), lam=0.4))
    assert [len(v) for v in kept.values()] == [2]


@pytest.mark.parametrize("first", ["add_root", "intern", "join", "tree", "kernel"])
def test_a_dag_rebuilt_from_arrays_is_the_dag_it_came_from_whatever_is_asked_first(first):
    """Its nodes stay packed until something needs them as lists: any
    operation first, then the rest, gives what the original DAG gives."""
    trees = ["(S (NP (DT the) (NN dog)) (VP (VB runs)))", "(S (NP (DT a) (NN dog)) (VP (VB runs)))"]
    dag = TreeSetDAG(trees)
    again = TreeSetDAG.from_arrays(dag.symbols, *dag.to_arrays())
    assert again.n_dag_nodes == dag.n_dag_nodes
    steps = {"add_root": lambda d: d.add_root(d.roots[0]),
             "intern": lambda d: d.add("(S (NP (DT the) (NN cat)) (VP (VB runs)))"),
             "join": lambda d: TreeSetDAG.join([d, d]).roots,
             "tree": lambda d: str(d[1]),
             "kernel": lambda d: dag_kernel_block(d).tolist()}
    for name in [first] + [n for n in steps if n != first]:
        assert steps[name](again) == steps[name](dag), name
    assert (again.productions, again.children, again.roots) == (dag.productions, dag.children, dag.roots)
    assert [again.intern(p, k) for p, k in zip(dag.productions, dag.children)] == list(range(dag.n_dag_nodes))
    np.testing.assert_array_equal(np.concatenate(again.dag_arrays()), np.concatenate(dag.dag_arrays()))


def test_sharing_is_counted_once():
    t = Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (VB runs) (NP (DT the) (NN dog))))")
    dag = TreeSetDAG([t, t.copy(deep=True)])
    # distinct subtrees: DT, NN, NP, VB, VP, S
    assert dag.n_dag_nodes == 6 and dag.n_tree_nodes == 18
    assert dag.roots == [5, 5] and dag.children[5] == (2, 4) and dag.children[4] == (3, 2)
    assert dag.symbols.production_str(dag.productions[2]) == "NP -> DT NN"
    np.testing.assert_allclose(dag_kernel_block(dag), gram([t, t], normalize=False))
    i = dag.add("(S (NP (DT the) (NN cat)))")
    assert i == 2 and dag.n_dag_nodes == 9
    np.testing.assert_allclose(dag_kernel_block(dag), gram(list(dag), normalize=False))
    assert dag_nbytes(dag) > 0


def test_dag_errors():
    x, y = TreeSetDAG(["(S (A a))"]), TreeSetDAG(["(S (A a))"])
    with pytest.raises(StructPrefError, match="mismatched vocabularies"):
        dag_kernel_block(x, y)
    with pytest.raises(StructPrefError, match="mismatched vocabularies"):
        dag_weighted_sums(x, [1.0], y)
    with pytest.raises(StructPrefError, match="weights of shape"):
        dag_weighted_sums(x, [1.0, 2.0], TreeSetDAG(["(S (A a))"], x.symbols))
    with pytest.raises(StructPrefError, match="mismatched vocabularies"):
        dag_weighted_sums_over([(TreeSetDAG(["(S (A a))"], y.symbols), [1.0]), (x, [1.0])], y)
    with pytest.raises(StructPrefError, match="λ"):
        dag_kernel_block(x, lam=0)
    assert dag_kernel_block(TreeSetDAG([], symbols=x.symbols), x).shape == (0, 1)


@settings(max_examples=60, deadline=None)
@given(candidate_sets(), candidate_sets(), st.sampled_from([0.4, 1.0]), st.sampled_from([0, 1]))
def test_self_kernels_on_the_dag(set1, set2, lam, sigma):
    dag = TreeSetDAG(set1)
    expected = TreeBatch(set1, dag.symbols).self_kernels(lam, sigma)
    np.testing.assert_allclose(dag_self_kernels(dag, lam, sigma), expected, rtol=1e-12)
    for t in set2:  # the cache grows with the set
        dag.add(t)
    expected = TreeBatch(set1 + set2, dag.symbols).self_kernels(lam, sigma)
    np.testing.assert_allclose(dag_self_kernels(dag, lam, sigma), expected, rtol=1e-12)
    assert dag_self_kernels(dag, lam, sigma) is dag_self_kernels(dag, lam, sigma)


@settings(max_examples=60, deadline=None)
@given(candidate_sets())
def test_trees_come_back_from_the_dag(cands):
    dag = TreeSetDAG(cands)
    assert list(dag) == cands and dag[-1] == cands[-1] and dag.tree(0) == cands[0]
    assert dag.n_tree_nodes == sum(len(t.treepositions()) - len(t.leaves()) for t in cands)
    with pytest.raises(IndexError):
        dag[len(cands)]


def test_intern_and_add_root_by_hand():
    symbols = SymbolTable()
    trees_ = [Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (VB runs)))"),
              Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (VB barks)))")]
    dag = TreeSetDAG(symbols=symbols)
    lab, word = symbols.label_id, lambda w: -(symbols.word_id(w) + 1)
    dt = dag.intern(symbols.production_id(lab("DT"), [word("the")]), ())
    nn = dag.intern(symbols.production_id(lab("NN"), [word("dog")]), ())
    np_ = dag.intern(symbols.production_id(lab("NP"), [lab("DT"), lab("NN")]), (dt, nn))
    for verb in ("runs", "barks"):
        vp = dag.intern(symbols.production_id(lab("VP"), [lab("VB")]),
                        (dag.intern(symbols.production_id(lab("VB"), [word(verb)]), ()),))
        s = dag.intern(symbols.production_id(lab("S"), [lab("NP"), lab("VP")]), (np_, vp))
        dag.add_root(s)
    assert dag.intern(symbols.production_id(lab("DT"), [word("the")]), []) == dt  # already there
    assert list(dag) == trees_
    reference = TreeSetDAG(trees_, symbols)
    assert (dag.productions, dag.children, dag.roots, dag.occurrences) == \
        (reference.productions, reference.children, reference.roots, reference.occurrences)
    with pytest.raises(StructPrefError, match="needs 2 node children"):
        dag.intern(symbols.production_id(lab("NP"), [lab("DT"), lab("NN")]), (dt,))
    with pytest.raises(StructPrefError, match="needs 1 node children among the 9"):
        dag.intern(symbols.production_id(lab("VP"), [lab("VB")]), (99,))
    with pytest.raises(StructPrefError, match="not in the SymbolTable"):
        dag.intern(len(symbols), ())
    with pytest.raises(StructPrefError, match="no DAG node 9"):
        dag.add_root(9)
    with pytest.raises(StructPrefError, match="has no children"):
        dag.add(Tree("S", [Tree("NP", [])]))


@settings(max_examples=60, deadline=None)
@given(st.lists(candidate_sets(), min_size=1, max_size=4))
def test_join_equals_hash_consing_all_trees(parts):
    symbols = SymbolTable()
    dags = [TreeSetDAG(p, symbols) for p in parts]
    for d in dags[::2]:
        dag_self_kernels(d, 0.4, 1)
    joined = TreeSetDAG.join(dags)
    reference = TreeSetDAG([t for p in parts for t in p], symbols)
    assert (joined.productions, joined.children, joined.roots, joined.occurrences) == \
        (reference.productions, reference.children, reference.roots, reference.occurrences)
    # self-kernels carried over only when every part has them
    assert (("self_kernels", 0.4, 1.0) in joined.per_tree) == (len(dags) == 1)
    np.testing.assert_allclose(dag_self_kernels(joined), dag_self_kernels(reference), rtol=1e-12)
    with pytest.raises(StructPrefError, match="different SymbolTables"):
        TreeSetDAG.join([dags[0], TreeSetDAG(parts[0])])


def test_mixed_inputs():
    symbols = SymbolTable()
    t = Tree.fromstring("(S (NP (NN x)) (VP (VB y)))")
    (arrays,) = trees_to_arrays([t], symbols)
    dag = TreeSetDAG([t, "(S (NP (NN x)) (VP (VB y)))", arrays], symbols)
    assert dag.roots == [4, 4, 4] and list(dag) == [t, t, t]
    with pytest.raises(StructPrefError, match="mismatched vocabularies"):
        TreeSetDAG([arrays], SymbolTable())

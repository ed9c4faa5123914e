"""The kernels' parameter checks at their boundary (``kernels.inputs``):
wrong-typed, NaN, infinite or out-of-range ``lam``, ``sigma``, ``b``,
``n_threads``, ``max_nodes``, log probabilities and weights are a
StructPrefError at every entry point, never a bare TypeError or a silent NaN;
trees and forests above ``max_nodes`` are refused before their table is
allocated. The fuzz test draws any value for each."""
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.errors import StructPrefError
from spacy_structpref.kernels import (TreeBatch, composite_gram, composite_kernel, dag_kernel_block,
                                      dag_self_kernels, dag_weighted_sums, forest_gram, forest_kernel, gram,
                                      tree_kernel)
from spacy_structpref.kernels.inputs import MAX_NODES
from spacy_structpref.learners import CompositeKernel, TreeKernel
from spacy_structpref.trees import TreeSetDAG

T = "(S (NP (DT a) (NN b)) (VP (VB c)))"
FLAT = "(S " + " ".join(f"(NN w{i})" for i in range(MAX_NODES)) + ")"  # MAX_NODES + 1 nodes

ANY = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
                st.text(max_size=2), st.lists(st.floats(), max_size=2), st.just(np.float64("nan")))


def call(name, value):
    """The entry point ``name`` with ``value`` as the parameter it checks."""
    dag = TreeSetDAG([T, T])
    return {
        "tree_kernel lam": lambda: tree_kernel(T, T, lam=value),
        "tree_kernel sigma": lambda: tree_kernel(T, T, sigma=value),
        "tree_kernel max_nodes": lambda: tree_kernel(T, T, max_nodes=value),
        "gram n_threads": lambda: gram([T, T], n_threads=value, progress=False),
        "forest_kernel max_nodes": lambda: forest_kernel(T, T, max_nodes=value),
        "forest_gram lam": lambda: forest_gram([T], lam=value),
        "composite_kernel b": lambda: composite_kernel(T, T, -1.0, -2.0, b=value),
        "composite_kernel log p": lambda: composite_kernel(T, T, value, -2.0),
        "composite_gram log p": lambda: composite_gram([T, T], [-1.0, value]),
        "dag_weighted_sums weight": lambda: dag_weighted_sums(dag, [1.0, value], dag),
        "dag_kernel_block lam": lambda: dag_kernel_block(dag, lam=value),
        "dag_self_kernels max_nodes": lambda: dag_self_kernels(dag, max_nodes=value),
        "CompositeKernel b": lambda: CompositeKernel(TreeKernel(), b=value),
        "TreeBatch max_nodes": lambda: TreeBatch([T], max_nodes=value),
    }[name]()


CALLS = sorted(["tree_kernel lam", "tree_kernel sigma", "tree_kernel max_nodes", "gram n_threads",
                "forest_kernel max_nodes", "forest_gram lam", "composite_kernel b", "composite_kernel log p",
                "composite_gram log p", "dag_weighted_sums weight", "dag_kernel_block lam",
                "dag_self_kernels max_nodes", "CompositeKernel b", "TreeBatch max_nodes"])


@pytest.mark.parametrize("name, value", [
    ("tree_kernel lam", "0.4"), ("tree_kernel lam", None), ("tree_kernel lam", float("nan")),
    ("tree_kernel sigma", np.array([1, 0])), ("gram n_threads", "2"), ("gram n_threads", 0),
    ("gram n_threads", 1.5), ("forest_kernel max_nodes", float("nan")), ("forest_kernel max_nodes", "5"),
    ("composite_kernel b", float("nan")), ("composite_kernel b", -1), ("composite_kernel b", "x"),
    ("composite_kernel log p", float("nan")), ("composite_kernel log p", "x"),
    ("composite_gram log p", float("nan")), ("dag_weighted_sums weight", float("nan")),
    ("dag_weighted_sums weight", "a"), ("CompositeKernel b", float("inf")), ("TreeBatch max_nodes", True),
])
def test_bad_parameters_are_structpref_errors(name, value):
    with pytest.raises(StructPrefError):
        call(name, value)


def test_a_tree_above_max_nodes_is_refused_before_its_table():
    """A tree of MAX_NODES + 1 nodes: refused at once (its table against
    itself would take 1.2 GB), by every kernel that builds such a table; a
    larger max_nodes lets it through."""
    start = time.perf_counter()
    for compute in (lambda: tree_kernel(FLAT, FLAT), lambda: gram([FLAT, T], progress=False),
                    lambda: dag_self_kernels(TreeSetDAG([FLAT])), lambda: forest_kernel(FLAT, T),
                    lambda: dag_kernel_block(TreeSetDAG([FLAT]), normalize=True)):
        with pytest.raises(StructPrefError, match=f"a (tree|forest) of {MAX_NODES + 1} nodes is above max_nodes"):
            compute()
    assert time.perf_counter() - start < 30
    assert tree_kernel(FLAT, "(S (NN w0))", max_nodes=MAX_NODES + 1) > 0


@pytest.mark.fuzz
@settings(max_examples=250, deadline=None)
@given(st.sampled_from(CALLS), ANY)
def test_any_parameter_value_is_accepted_or_a_structpref_error(name, value):
    try:
        result = call(name, value)
    except StructPrefError:
        return
    assert np.all(np.isfinite(getattr(result, "b", result)))

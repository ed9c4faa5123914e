"""The learners' kernels save trees flat: a tree as deep as 5,000 levels
saves and loads inside a trained perceptron, and damaged saved trees are
refused."""
import numpy as np
import pytest

from spacy_structpref.errors import SavedModelError
from spacy_structpref.learners import KernelPerceptron, TreeKernel, fit
from spacy_structpref.trees import parse_bracketed

from tests.helpers.deep_trees import DEPTH, chain


def test_learner_with_a_deep_tree_saves_and_loads(tmp_path):
    """A learner trained on a tree deeper than the recursion limit saves and
    loads (nested saved trees fail from depth ~497)."""
    # one label per level: Δ pairs stay linear in the depth
    deep, shallow = chain(DEPTH, lambda level: f"X{level}"), parse_bracketed("(TOP (X0 (NN w)))")
    learner = fit(KernelPerceptron(TreeKernel(lam=0.4)), [[shallow, deep], [deep, shallow]], [1, 0])
    learner.to_disk(tmp_path / "learner")
    loaded = KernelPerceptron(TreeKernel(lam=0.4)).from_disk(tmp_path / "learner")
    assert np.array_equal(loaded.utilities([shallow, deep]), learner.utilities([shallow, deep]))


def test_saved_trees_are_flat_and_checked():
    kernel = TreeKernel()
    tree = parse_bracketed("(TOP (S (NP (NN w)) (VP (VB v))))")
    data = kernel.encode([tree])[0]
    assert data[:2] == [["TOP", 1], ["S", 2]] and kernel.decode([data]) == [tree]
    # the nested lists of earlier saves still load
    assert kernel.decode([["TOP", ["S", ["NP", ["NN", "w"]], ["VP", ["VB", "v"]]]]]) == [tree]
    for damaged in (data[:-1], data + ["x"], [["S", 0]], [["S", 1.5], "a"]):
        with pytest.raises(SavedModelError, match="saved tree"):
            kernel.decode([damaged])

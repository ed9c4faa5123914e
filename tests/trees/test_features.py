"""Tree features for the linear reranker: Collins's head table on hand-made
cases, every feature of a small tree written out by hand, coordination, the
counts that follow from a tree's shape (hypothesis), and bad trees refused."""
from collections import Counter

import pytest
from hypothesis import given, settings
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.trees.features import head_child, tree_features

from tests.helpers.strategies import TAGS, trees


@pytest.mark.parametrize("label, children, head", [
    ("VP", ["VBD", "NP", "PP"], 0),
    ("VP", ["MD", "VP"], 0),           # MD before VP in the priority list
    ("S", ["NP", "VP", "."], 1),
    ("S", ["PP", ",", "NP", "VP"], 3),
    ("PP", ["IN", "NP"], 0),
    ("PP", ["IN", "IN", "NP"], 1),     # searched from the right
    ("NP", ["DT", "JJ", "NN"], 2),
    ("NP", ["NP", "PP"], 0),           # no noun child: the leftmost NP
    ("NP", ["NN", "NNS", "CD"], 1),    # the rightmost of the noun tags
    ("NP", ["DT", "CD"], 1),
    ("NP", ["DT", "DT"], 1),           # nothing found: the last child
    ("ADVP", ["IN", "RB"], 1),
    ("SBAR", ["IN", "S"], 0),
    ("S-TPC-1", ["NP", "VP"], 1),      # function tags ignored
    ("UCP", ["NN", "CC", "JJ"], 2),    # rightward, no priority: the last child
    ("FOO", ["NN", "VB"], 0),          # an unknown label: the first child
])
def test_head_child_follows_collins_table(label, children, head):
    assert head_child(label, children) == head


def test_head_child_refuses_no_children():
    with pytest.raises(StructPrefError, match="no head"):
        head_child("NP", [])


def test_every_feature_of_a_small_tree():
    tree = Tree.fromstring("(S (NP (DT The) (NN dog)) (VP (VBZ barks)))")
    features, n = tree_features(tree)
    assert n == 3
    expected = [
        # S: head VP (S searches TO IN VP …), whose head word is barks
        "R:S>NP VP", "G:ROOT^S>NP VP", "B:S:<_NP", "B:S:NP_VP", "B:S:VP_>", "L:S:3", "E:S:<s>:</s>",
        "H:S:3:final:ROOT", "HW:S:barks", "HR:VBZ:S>NP VP", "DT:SLNP:VBZ:NN", "DW:SLNP:barks:dog",
        # NP: head NN (dog), words lowercased
        "R:NP>DT NN", "G:S^NP>DT NN", "B:NP:<_DT", "B:NP:DT_NN", "B:NP:NN_>", "L:NP:2", "E:NP:<s>:barks",
        "H:NP:2:mid:S", "HW:NP:dog", "HR:NN:NP>DT NN", "DT:NPLDT:NN:DT", "DW:NPLDT:dog:the",
        # VP: a single child, its own head
        "R:VP>VBZ", "G:S^VP>VBZ", "B:VP:<_VBZ", "B:VP:VBZ_>", "L:VP:1", "E:VP:dog:</s>", "H:VP:1:final:S",
        "HW:VP:barks", "HR:VBZ:VP>VBZ",
    ]
    assert Counter(features) == Counter(expected)


def test_coordination_features():
    tree = Tree.fromstring("(NP (NP (NNS cats)) (CC and) (NP (DT the) (JJ big) (JJ old) (JJ brown) (NNS dogs)))")
    features, _ = tree_features(tree)
    assert "C:NP:NP=NP:True" in features
    assert "CL:NP:1" in features  # conjunct lengths 1 and 5: buckets 1 and 5, a gap of 4


def test_length_buckets():
    words = " ".join(f"(NN w{i})" for i in range(25))
    features, _ = tree_features(Tree.fromstring(f"(NP {words})"))
    assert "L:NP:21" in features


@settings(max_examples=60, deadline=None)
@given(trees(tags=TAGS + ["CC", ",", ":"]))
def test_counts_follow_the_tree(tree):
    features, n = tree_features(tree)
    constituents = [t for t in tree.subtrees() if not (len(t) == 1 and isinstance(t[0], str))]
    assert n == len(constituents)
    kinds = Counter(f.split(":")[0] for f in features)
    assert kinds["R"] == kinds["G"] == kinds["L"] == kinds["E"] == kinds["H"] == kinds["HW"] == kinds["HR"] == n
    assert kinds["B"] == sum(len(t) + 1 for t in constituents)
    # one head per constituent: every other child is a dependent, by tags and by words
    assert kinds["DT"] == kinds["DW"] == sum(len(t) - 1 for t in constituents)
    coordinations = [[c.label() for c in t] for t in constituents if "CC" in [c.label() for c in t]]
    assert kinds["C"] == len(coordinations)
    # a length contrast for each coordination of two conjuncts or more (CC, commas and colons are no conjuncts)
    assert kinds["CL"] == sum(1 for kids in coordinations if len([k for k in kids if k not in ("CC", ",", ":")]) >= 2)


@pytest.mark.parametrize("bad", [Tree("S", []), "(S (NN a))", Tree("S", ["word", Tree("NN", ["b"])])])
def test_bad_trees_are_refused(bad):
    with pytest.raises(StructPrefError):
        tree_features(bad)

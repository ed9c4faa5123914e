import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.errors import StructPrefError
from spacy_structpref.kernels import tree_kernel
from spacy_structpref.trees import Forest, ForestBuilder, SymbolTable, TreeArrays, parse_bracketed
from spacy_structpref.trees.arrays import FlatTrees, offsets

from tests.helpers.strategies import trees


def test_tree_arrays_layout():
    t = parse_bracketed("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))")
    sym = SymbolTable()
    a = TreeArrays.from_tree(t, sym)
    # post-order: DT NN NP VBZ VP S
    assert [sym.labels[i] for i in a.label] == ["DT", "NN", "NP", "VBZ", "VP", "S"]
    assert [sym.production_str(p) for p in a.prod] == [
        "DT -> the", "NN -> dog", "NP -> DT NN", "VBZ -> barks", "VP -> VBZ", "S -> NP VP"]
    assert a.start.tolist() == [0, 1, 0, 2, 2, 0] and a.end.tolist() == [1, 2, 2, 3, 3, 3]
    assert a.child_refs(5).tolist() == [2, 4]
    assert a.child_refs(0).tolist() == [-1]
    assert a.is_preterminal().tolist() == [True, True, False, True, False, False]
    assert a.root == 5


def test_word_and_label_children_do_not_collide():
    sym = SymbolTable()
    a = TreeArrays.from_tree(parse_bracketed("(X (NN NN))"), sym)
    b = TreeArrays.from_tree(parse_bracketed("(X (NN (NN z)))"), sym)
    assert a.prod[0] != b.prod[1]  # NN -> word 'NN' vs NN -> node NN


@given(trees())
def test_arrays_round_trip(tree):
    sym = SymbolTable()
    assert TreeArrays.from_tree(tree, sym).to_tree() == tree


def test_symbol_table_serialises():
    sym = SymbolTable()
    TreeArrays.from_tree(parse_bracketed("(S (NP (DT a)) (VP (VB b)))"), sym)
    again = SymbolTable.from_dict(sym.to_dict())
    assert again.productions == sym.productions and again.labels == sym.labels


def _ambiguous_forest():
    """'time flies': S -> NN VBZ (0.5) | VB NNS (0.5), with lexical choices."""
    sym, words = SymbolTable(), ["time", "flies"]
    b = ForestBuilder(sym, 2)
    nn, vb = b.add_node("NN", 0, 1), b.add_node("VB", 0, 1)
    nns, vbz = b.add_node("NNS", 1, 2), b.add_node("VBZ", 1, 2)
    b.add_edge(nn, [-1], 0.6, words)
    b.add_edge(vb, [-1], 0.4, words)
    b.add_edge(nns, [-2], 0.3, words)
    b.add_edge(vbz, [-2], 0.7, words)
    s = b.add_node("S", 0, 2)
    b.add_edge(s, [nn, vbz], 0.5)
    b.add_edge(s, [vb, nns], 0.5)
    return b.build(s), words


def test_forest_builder_words_at_construction_and_shared_rule_ids():
    """The parser's way (sentence given once, edges per head, one rule-id
    cache across sentences) builds the same forest as per-edge words."""
    f, words = _ambiguous_forest()
    rule_ids = {}
    for _ in range(2):
        b = ForestBuilder(f.symbols, 2, words, rule_ids=rule_ids)
        nn, vb = b.add_node_id(f.label[0], 0, 1, state=7), b.add_node("VB", 0, 1)
        nns, vbz = b.add_node("NNS", 1, 2), b.add_node("VBZ", 1, 2)
        for v, w, p in ((nn, -1, 0.6), (vb, -1, 0.4), (nns, -2, 0.3), (vbz, -2, 0.7)):
            b.add_edges(v, [([w], p)])
        s = b.add_node("S", 0, 2)
        b.add_edges(s, [([nn, vbz], 0.5), ([vb, nns], 0.5)])
        g = b.build(s)
        for name in ("label", "start", "end", "head", "tail_start", "tails", "rule", "prob"):
            assert np.array_equal(getattr(g, name), getattr(f, name)), name
        assert g.state.tolist() == [7, -1, -1, -1, -1]
    assert len(rule_ids) == len(f.symbols.productions) == 6
    b = ForestBuilder(f.symbols, 2)
    with pytest.raises(StructPrefError, match="needs the sentence's words"):
        b.add_edge(b.add_node("NN", 0, 1), [-1], 1.0)


def test_forest_inside_outside_hand_computed():
    f, words = _ambiguous_forest()
    f.compute_inside_outside()
    total = 0.5 * 0.6 * 0.7 + 0.5 * 0.4 * 0.3
    assert math.isclose(math.exp(f.log_total), total)
    post = f.node_posterior()
    assert math.isclose(post[0], 0.21 / total) and math.isclose(post[4], 1.0)
    assert np.allclose(f.edge_given_head()[4:], [0.21 / total, 0.06 / total])
    enumerated = sorted(p for p, _ in f.trees(words))
    assert np.allclose(enumerated, [0.06, 0.21])


@st.composite
def random_forests(draw):
    """Random forests over n words: every span/label node gets 1–3 random
    hyperedges built from smaller nodes, so the forest is bottom-up by construction."""
    n = draw(st.integers(1, 3))
    sym, words = SymbolTable(), [f"w{i}" for i in range(n)]
    b = ForestBuilder(sym, n)
    by_span = {}
    for i in range(n):
        for tag in draw(st.lists(st.sampled_from(["A", "B"]), min_size=1, max_size=2, unique=True)):
            v = b.add_node(tag, i, i + 1)
            b.add_edge(v, [-(i + 1)], draw(st.floats(0.1, 1.0)), words)
            by_span.setdefault((i, i + 1), []).append(v)
    for width in range(1, n + 1):
        for i in range(n - width + 1):
            j = i + width
            for label in ["X", "Y"] if width > 1 or draw(st.booleans()) else []:
                splits = [(a, c) for k in range(i + 1, j) for a in by_span.get((i, k), []) for c in by_span.get((k, j), [])]
                unaries = [u for u in by_span.get((i, j), [])]
                options = [[a, c] for a, c in splits] + [[u] for u in unaries]
                if not options:
                    continue
                v = b.add_node(label, i, j)
                for tails in draw(st.lists(st.sampled_from(options), min_size=1, max_size=3, unique_by=tuple)):
                    b.add_edge(v, tails, draw(st.floats(0.1, 1.0)), words)
                by_span.setdefault((i, j), []).append(v)
    root = max(by_span[(0, n)])
    return b.build(root), words


@settings(max_examples=60, deadline=None)
@given(random_forests())
def test_inside_outside_against_enumeration(forest_words):
    f, words = forest_words
    f.compute_inside_outside()
    trees_ = list(f.trees(words))
    total = sum(p for p, _ in trees_)
    assert math.isclose(math.exp(f.log_total), total, rel_tol=1e-9)
    # node posterior = probability mass of trees using the node's (label, span)
    post = f.node_posterior()
    for v in range(f.n_nodes):
        lab, s, e = f.symbols.labels[f.label[v]], f.start[v], f.end[v]
        if sum(1 for u in range(f.n_nodes) if (f.label[u], f.start[u], f.end[u]) == (f.label[v], s, e)) > 1:
            continue  # duplicate items are not distinguishable in the enumerated trees
        mass = sum(p for p, t in trees_ if any(
            st_.label() == lab and _span(t, st_) == (s, e) for st_ in t.subtrees()))
        assert math.isclose(post[v], mass / total, rel_tol=1e-7, abs_tol=1e-12)


def _span(tree, sub):
    for pos in tree.treepositions():
        if tree[pos] is sub:
            start = len([1 for p in tree.treepositions("leaves") if p < pos])
            return start, start + len(sub.leaves())
    raise AssertionError


def test_forest_dict_round_trip():
    import srsly

    f, words = _ambiguous_forest()
    g = Forest.from_dict(srsly.msgpack_loads(srsly.msgpack_dumps(f.to_dict())), SymbolTable())
    assert sorted(str(t) for _, t in g.trees(words)) == sorted(str(t) for _, t in f.trees(words))
    assert math.isclose(g.log_total, f.log_total)


def test_tree_is_a_forest_with_one_edge_per_node():
    sym = SymbolTable()
    t = parse_bracketed("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))")
    f = Forest.from_tree_arrays(TreeArrays.from_tree(t, sym))
    assert [tree for _, tree in f.trees()] == [t]
    assert np.allclose(f.node_posterior(), 1.0) and math.isclose(f.log_total, 0.0)


def test_forest_errors():
    sym = SymbolTable()
    with pytest.raises(StructPrefError, match="no root"):
        Forest([0], [0], [1], [0], [0, 1], [-1], [0], [1.0], 5, 1, sym)
    with pytest.raises(StructPrefError, match="bottom-up"):
        Forest([0, 0], [0, 0], [1, 1], [0], [0, 1], [1], [0], [1.0], 1, 1, sym)
    with pytest.raises(StructPrefError, match="at least one node"):
        Forest([], [], [], [], [0], [], [], [], 0, 0, sym)


# -- arrays reach the compiled code only when every id in them is in range ----------------------
def _arrays(text: str, symbols: SymbolTable) -> TreeArrays:
    return TreeArrays.from_tree(Tree.fromstring(text), symbols)


ARRAY_FIELDS = ("label", "prod", "start", "end", "child_start", "children")


def _rebuilt(t: TreeArrays, **changes) -> TreeArrays:
    fields = {name: getattr(t, name).copy() for name in ARRAY_FIELDS}
    fields.update(changes)
    return TreeArrays(**fields, n_words=t.n_words, symbols=t.symbols)


@pytest.mark.parametrize("field, index, value, match", [
    ("prod", 0, 10**6, "'prod'.*is not a production id"),
    ("prod", 0, -1, "'prod'.*is not a production id"),
    ("label", 1, 999, "'label'.*is not a label id"),
    ("children", 0, -99, "'children'.*refers to a word outside"),
    ("children", 2, 5, "'children'.*refers to a node not numbered below its parent"),
    ("end", 0, 9, "'end'.*lies past"),
    ("child_start", 1, 7, "'child offsets' must rise"),
])
def test_hand_built_tree_arrays_with_bad_ids_are_refused(field, index, value, match):
    t = _arrays("(S (NP (DT a) (NN b)) (VP (VB c)))", SymbolTable())
    arr = getattr(t, field).copy()
    arr[index] = value
    with pytest.raises(StructPrefError, match=match):
        _rebuilt(t, **{field: arr})


@pytest.mark.parametrize("index, value, match", [
    (5, 1, "not the child of exactly one node"),  # S's children NP, NP -> the first NP twice
    (2, -1, "not exactly one leaf per word"),  # the second DT's word -> the first word
])
def test_tree_arrays_that_are_not_a_tree_are_refused(index, value, match):
    t = _arrays("(S (NP (DT a)) (NP (DT b)))", SymbolTable())
    children = t.children.copy()
    children[index] = value
    with pytest.raises(StructPrefError, match=match):
        _rebuilt(t, children=children)


def test_a_node_with_other_children_than_its_production_is_refused():
    symbols = SymbolTable()
    small, big = _arrays("(NP (DT a))", symbols), _arrays("(NP (DT a) (NN b))", symbols)
    # big's root relabelled with small's root production: one node child too many
    prod = big.prod.copy()
    prod[-1] = small.prod[-1]
    with pytest.raises(StructPrefError, match="does not have its production's children"):
        _rebuilt(big, prod=prod)


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None)
@given(trees(), st.sampled_from(ARRAY_FIELDS), st.integers(0, 50), st.integers(-60, 60))
def test_corrupted_tree_arrays_are_refused_or_still_a_tree(tree, field, index, value):
    """Any one id changed: a StructPrefError, or arrays that are still a
    consistent tree (the kernels then agree with its rebuilt nltk tree)."""
    symbols = SymbolTable()
    t = TreeArrays.from_tree(tree, symbols)
    arr = getattr(t, field).copy()
    arr[index % len(arr)] = value
    try:
        changed = _rebuilt(t, **{field: arr})
    except StructPrefError:
        return
    again = TreeArrays.from_tree(changed.to_tree(), symbols)
    assert tree_kernel(changed, changed, symbols=symbols) == tree_kernel(again, again, symbols=symbols)


def test_flat_trees_with_bad_ids_are_refused():
    symbols = SymbolTable()
    ok = FlatTrees.from_trees([_arrays("(NP (DT a))", symbols), _arrays("(VP (VB b))", symbols)], symbols)
    args = [ok.node_off, ok.label, ok.prod, ok.start, ok.end, ok.child_off, ok.children, ok.n_words, symbols]
    FlatTrees(*args)
    prod = ok.prod.copy()
    prod[-1] = 77
    with pytest.raises(StructPrefError, match="FlatTrees array 'prod'"):
        FlatTrees(*args[:2], prod, *args[3:])
    with pytest.raises(StructPrefError, match="FlatTrees array 'node_off'"):
        FlatTrees(np.array([0, 1, 9]), *args[1:])


@pytest.mark.parametrize("change, match", [
    (lambda f: dict(rule=[10**5, 0]), "'rule'.*is not a production id"),
    (lambda f: dict(label=[0, 50]), "'label'.*is not a label id"),
    (lambda f: dict(end=[1, 3]), "'end'.*lies past"),
    (lambda f: dict(tails=[-1, -1]), "'tails'.*is a node where its rule has a word"),
    (lambda f: dict(label=f.label[::-1]), "'rule'.*another label than its head"),
    (lambda f: dict(tail_start=[0, 1, 1], tails=[-1]), "'tail_start'|no tails"),
    (lambda f: dict(prob=[1.0, np.nan]), "finite and non-negative"),
])
def test_hand_built_forests_with_bad_ids_are_refused(change, match):
    symbols = SymbolTable()
    forest = Forest.from_tree_arrays(_arrays("(NP (NN a))", symbols))
    fields = dict(label=forest.label, start=forest.start, end=forest.end, head=forest.head,
                  tail_start=forest.tail_start, tails=forest.tails, rule=forest.rule, prob=forest.prob)
    Forest(**fields, root=1, n_words=1, symbols=symbols)
    fields.update(change(forest))
    with pytest.raises(StructPrefError, match=match):
        Forest(**fields, root=1, n_words=1, symbols=symbols)


@given(st.lists(st.integers(0, 1000), max_size=20), st.sampled_from([np.int32, np.int64]))
def test_offsets_start_each_run_and_end_with_the_total(counts, dtype):
    off = offsets(np.asarray(counts, dtype=np.int64), dtype)
    assert off.dtype == dtype and len(off) == len(counts) + 1
    assert off.tolist() == [sum(counts[:i]) for i in range(len(counts) + 1)]
    assert offsets([True, False, True]).tolist() == [0, 1, 1, 2]


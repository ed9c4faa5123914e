"""k-best lists as hash-consed tree sets, and derivations deeper than
Python's recursion limit."""
import math
import sys
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nltk.tree import Tree

from spacy_structpref.parsing.grammar import Annotation, estimate_grammar
from spacy_structpref.parsing.parser import KBest, Parser
from spacy_structpref.trees.arrays import SymbolTable
from spacy_structpref.trees.brackets import parse_bracketed
from spacy_structpref.trees.dag import TreeSetDAG

# words with brackets and spaces: the DAG keeps the words themselves, not their escaped forms
VOCAB = ["the", "company", "said", "it", "rose", "shares", "sold", "he", "%", "5", "of", ".", "(", "a b"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6), st.integers(1, 12), st.booleans())
def test_dag_holds_the_kbest_trees(grammar, words, k, own_table):
    res = Parser(grammar, threshold=1e-4).parse(words, k=k)
    if res.fallback:
        return
    kb = KBest(res.forest, words)
    best = kb.best(k)
    symbols = SymbolTable() if own_table else None
    dag, logps = kb.dag(k, symbols)
    assert isinstance(dag, TreeSetDAG) and dag.symbols is (symbols if own_table else res.forest.symbols)
    assert len(dag) == len(best) == len(logps)
    assert logps == [lp for lp, _, _ in best]
    for i, (_, _, r) in enumerate(best):
        assert dag[i] == kb.tree(res.forest.root, r)
        assert dag[i].leaves() == words
    # shared subtrees are stored once, exactly as hash-consing the trees gives
    assert dag.n_dag_nodes == TreeSetDAG([dag[i] for i in range(len(dag))], symbols=SymbolTable()).n_dag_nodes


def test_dag_without_words_uses_the_forests_words(grammar):
    words = "He sold the shares of the company .".split()
    forest = Parser(grammar).parse(words).forest
    with_words, logps = KBest(forest, words).dag(5)
    without, logps2 = KBest(forest).dag(5)
    assert logps == logps2 and len(with_words) == 5
    assert [with_words[i] for i in range(5)] == [without[i] for i in range(5)]


def _stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


@contextmanager
def low_recursion_limit(monkeypatch, headroom: int):
    """Python's recursion limit ``headroom`` frames above the current depth,
    and no way to raise it."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + headroom)
    monkeypatch.setattr(sys, "setrecursionlimit", lambda n: pytest.fail("the recursion limit was raised"))
    try:
        yield
    finally:
        monkeypatch.undo()
        sys.setrecursionlimit(limit)


def _flat(tree) -> list:
    # Iterative walk (comparing nltk Trees recurses): labels and words in pre-order, with brackets.
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Tree):
            out.append("(" + node.label())
            stack.append(")")
            stack.extend(reversed(node))
        else:
            out.append(node)
    return out


def test_deep_forest_needs_no_recursion_limit(monkeypatch):
    """A 500-word right-branching parse: forest building and k-best
    extraction recursing per tree level would need thousands of frames."""
    plain = Annotation(horizontal_markov=-1, vertical_markov=1, tag_parent=False, split_unary_tags=False,
                       split_in=False, split_percent=False)
    g = estimate_grammar([parse_bracketed("(TOP (NP (NN a) (NP (NN a) (NP (NN a) (NN a)))))"),
                          parse_bracketed("(TOP (NP (NN b) (NN c)))")], plain)
    n = 500  # old recursive forest building took two frames per level
    words = ["a"] * n
    with low_recursion_limit(monkeypatch, 60):
        res = Parser(g).parse(words, k=3)
        kb = KBest(res.forest, words)
        dag, logps = kb.dag(3)
        tree = dag[0]
    # P(TOP -> NP) = 1 (chain), NP -> NN NP 2/4, NP -> NN NN 2/4, P(a | NN) = P(a) / P(NN) = 4/6
    expected = (n - 1) * math.log(0.5) + n * math.log(4 / 6)
    assert len(res.nbest) == 1 and logps == [res.log_prob]
    assert res.log_prob == pytest.approx(expected, rel=1e-9)
    text = "(TOP " + "(NP (NN a) " * (n - 1) + "(NN a)" + ")" * n  # n - 1 NPs and TOP close
    assert res.nbest[0][1] == text
    assert _flat(tree) == _flat(res.tree) == _flat(kb.tree(res.forest.root, 0))
    assert _flat(tree)[:6] == ["(TOP", "(NP", "(NN", "a", ")", "(NP"]


def _random_hypergraph(data, n_nodes):
    """Nodes 0..n-1 bottom-up; each node's edges take node tails among the
    nodes below it (none for the first nodes: edges over words only). Edge
    log-weights come from a small set, so ties are common, and may be -inf."""
    heads, tails, logp = [], [], []
    for v in range(n_nodes):
        for _ in range(data.draw(st.integers(1 if v < 2 else 0, 3))):
            arity = 0 if v < 2 else data.draw(st.integers(1, 3))
            heads.append(v)
            tails.append([data.draw(st.integers(0, v - 1)) for _ in range(arity)])
            logp.append(data.draw(st.sampled_from([0.0, -0.5, -1.0, -1.5, -math.inf])))
    return heads, tails, logp


def _enumerated(heads, tails, logp, n_nodes):
    """Every derivation of every node, sorted as the lists must be: best
    score first (the tails' scores added in order), then by edge, then by
    the tails' ranks; -inf derivations left out."""
    import itertools

    lists = []
    for v in range(n_nodes):
        found = []
        for e in (e for e, h in enumerate(heads) if h == v):
            for ranks in itertools.product(*(range(len(lists[t])) for t in tails[e])):
                s = logp[e]
                for t, r in zip(tails[e], ranks):
                    s += lists[t][r][0]
                if s > -math.inf:
                    found.append((s, e, tuple(ranks)))
        lists.append(sorted(found, key=lambda d: (-d[0], d[1], d[2])))
    return lists


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(1, 6))
def test_compiled_kbest_lists_every_derivation_in_order(data, n_nodes):
    import numpy as np

    from spacy_structpref.parsing._kbest import ForestKBest
    from spacy_structpref.trees.arrays import offsets

    heads, tails, logp = _random_hypergraph(data, n_nodes)
    order = np.argsort(heads, kind="stable").astype(np.intc)
    flat = np.asarray([t for tl in tails for t in tl], dtype=np.intc)
    zeros = np.zeros(n_nodes, dtype=np.intc)
    core = ForestKBest(offsets(np.bincount(heads, minlength=n_nodes), np.intc), order,
                       offsets([len(tl) for tl in tails], np.intc), flat, np.asarray(logp, dtype=float),
                       zeros, zeros, zeros)
    expected = _enumerated(heads, tails, logp, n_nodes)
    v = n_nodes - 1
    # ask for the ranks out of order: lists found on demand must not depend on the order of requests
    ranks = data.draw(st.permutations(range(min(len(expected[v]), 40) + 1)))
    for r in ranks:
        got = core.kth(v, r)
        assert got == (expected[v][r] if r < len(expected[v]) else None)
    for u in range(n_nodes):
        assert [core.kth(u, r) for r in range(min(len(expected[u]), 40))] == expected[u][:40]


def test_compiled_kbest_refuses_nodes_and_ranks_out_of_range(grammar):
    words = "He sold the shares .".split()
    kb = KBest(Parser(grammar).parse(words).forest, words)
    with pytest.raises(IndexError, match="not in the forest"):
        kb.kth(kb.forest.n_nodes, 0)
    with pytest.raises(IndexError, match="negative"):
        kb.kth(kb.forest.root, -1)

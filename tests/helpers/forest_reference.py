"""Slow reference for the forest dynamic programmes of
``spacy_structpref.trees._forest``: the same recursions written out one
hyperedge at a time with numpy, and random small forests to check them on."""
import numpy as np
from hypothesis import strategies as st

from spacy_structpref.trees.arrays import SymbolTable
from spacy_structpref.trees.forest import ForestBuilder


def reference_scores(forest):
    """``(log inside, log outside, Viterbi log inside, Viterbi merit per
    edge)`` of a forest whose edges may come in any order."""
    n = forest.n_nodes
    with np.errstate(divide="ignore"):
        log_prob = np.log(forest.prob)
    inside = np.full(n, -np.inf)
    viterbi = np.full(n, -np.inf)
    edge_score = np.empty(forest.n_edges)
    edge_best = np.empty(forest.n_edges)
    order = np.argsort(forest.head, kind="stable")  # heads ascend: tails are done first
    for k in order:
        tails = forest.edge_tails(k)
        nodes = tails[tails >= 0]
        edge_score[k] = log_prob[k] + inside[nodes].sum()
        edge_best[k] = log_prob[k] + viterbi[nodes].sum()
        inside[forest.head[k]] = np.logaddexp(inside[forest.head[k]], edge_score[k])
        viterbi[forest.head[k]] = max(viterbi[forest.head[k]], edge_best[k])
    outside = np.full(n, -np.inf)
    v_outside = np.full(n, -np.inf)
    merit = np.full(forest.n_edges, -np.inf)
    outside[forest.root] = v_outside[forest.root] = 0.0
    for k in order[::-1]:
        h = forest.head[k]
        nodes = [t for t in forest.edge_tails(k) if t >= 0]
        if outside[h] > -np.inf and edge_score[k] > -np.inf:
            for t in nodes:
                outside[t] = np.logaddexp(outside[t], outside[h] + edge_score[k] - inside[t])
        if v_outside[h] > -np.inf and edge_best[k] > -np.inf:
            merit[k] = v_outside[h] + edge_best[k]
            for t in nodes:
                v_outside[t] = max(v_outside[t], merit[k] - viterbi[t])
    return inside, outside, viterbi, merit


@st.composite
def random_forests(draw):
    """Forests of up to 10 nodes over up to 4 words: 0-3 hyperedges per node
    (so some nodes have no tree), tails drawn among the words and lower
    nodes, some probabilities 0, some nodes unreachable from the root, and
    the hyperedges added in a random order (not grouped by head)."""
    n_words = draw(st.integers(1, 4))
    n_nodes = draw(st.integers(1, 10))
    words = [f"w{i}" for i in range(n_words)]
    builder = ForestBuilder(SymbolTable(), n_words, words)
    for _ in range(n_nodes):
        builder.add_node(draw(st.sampled_from(["A", "B", "C"])), 0, n_words)
    edges = []
    for v in range(n_nodes):
        for _ in range(draw(st.integers(0, 3))):
            tails = draw(st.lists(st.integers(-n_words, v - 1), min_size=1, max_size=3))
            prob = draw(st.one_of(st.just(0.0), st.floats(0.05, 1.0)))
            edges.append((v, tails, prob))
    for v, tails, prob in draw(st.permutations(edges)):
        builder.add_edge(v, tails, prob)
    return builder.build(draw(st.integers(0, n_nodes - 1))), words

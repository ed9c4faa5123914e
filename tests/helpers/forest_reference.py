"""Slow references for forests: the dynamic programmes of
``spacy_structpref.trees._forest`` written out one hyperedge at a time with
numpy, and random small forests to check them on; random CKY-style forests
and the forest kernel's definition, the expected tree kernel over their
trees (Zhang et al. 2010), by enumeration."""
import numpy as np
from hypothesis import strategies as st

from spacy_structpref.kernels import gram
from spacy_structpref.trees import trees_to_arrays
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


WORDS = ["a", "b"]


@st.composite
def forests(draw, symbols, max_words=3):
    """Random small CKY-style forests: tags X/Y over each word, labels A/B
    over longer spans from binary splits (and a unary A -> B), a root S over
    the sentence with unary edges to what spans it."""
    n = draw(st.integers(1, max_words))
    words = [draw(st.sampled_from(WORDS)) for _ in range(n)]
    prob = st.floats(0.05, 1.0)
    fb = ForestBuilder(symbols, n)
    chart = {}
    for i in range(n):
        for tag in draw(st.lists(st.sampled_from(["X", "Y"]), min_size=1, max_size=2, unique=True)):
            v = fb.add_node(tag, i, i + 1)
            fb.add_edge(v, [-(i + 1)], draw(prob), words)
            chart.setdefault((i, i + 1), []).append(v)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            for label in ("B", "A"):
                splits = [(l, r) for k in range(i + 1, j) for l in chart.get((i, k), []) for r in chart.get((k, j), [])]
                chosen = [s for s in splits if draw(st.booleans())]
                unary = [u for u in chart.get((i, j), []) if label == "A" and fb.label[u] == symbols.label_id("B")]
                chosen_unary = [u for u in unary if draw(st.booleans())]
                if not chosen and not chosen_unary:
                    continue
                v = fb.add_node(label, i, j)
                for tails in chosen:
                    fb.add_edge(v, list(tails), draw(prob))
                for u in chosen_unary:
                    fb.add_edge(v, [u], draw(prob))
                chart.setdefault((i, j), []).append(v)
    tops = chart.get((0, n), [])
    root = fb.add_node("S", 0, n)
    for u in tops:
        fb.add_edge(root, [u], draw(prob))
    if not tops:  # keep a root with at least one tree
        fb.add_edge(root, [chart[(0, 1)][0]] if n == 1 else [-1], 1.0, words)
    return fb.build(root), words


def expected_tree_kernel(f1, w1, f2, w2, lam, symbols):
    """The expected subset-tree kernel between the normalised tree
    distributions of two forests, by enumerating their trees."""
    t1, t2 = list(f1.trees(w1)), list(f2.trees(w2))
    p1 = np.array([p for p, _ in t1]) / sum(p for p, _ in t1)
    p2 = np.array([p for p, _ in t2]) / sum(p for p, _ in t2)
    K = gram(trees_to_arrays([t for _, t in t1], symbols), trees_to_arrays([t for _, t in t2], symbols),
             lam=lam, normalize=False, n_threads=1, progress=False)
    return float(p1 @ K @ p2)

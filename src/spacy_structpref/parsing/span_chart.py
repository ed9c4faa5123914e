"""The chart of a span-based tree CRF parser: partition function, span
marginals and CKY decoding over labelled binary span trees.

Scores are a float array ``scores[i, j, l]`` of shape ``(n, n + 1, L)``,
read for ``0 <= i < j <= n`` (other entries are ignored); label 0 is the
empty label (span models fix its score at 0, but nothing here assumes it).
A tree ``T`` is a full binary bracketing with one label per span (see
:mod:`.span_trees`), ``S(T) = sum_{(i,j,l) in T} s(i, j, l)`` and
``p(T) = exp S(T) / Z`` (Stern, Andreas & Klein 2017, eq. 3; the CRF of
Zhang, Zhou & Li 2020, eq. 6-7). ``log Z`` comes from the inside algorithm
and the span marginals from outside; the marginals are the gradient
``d log Z / d s(i, j, l)``, so the gradient of the loss ``-log p(T_gold)`` is
``mu - gold indicator`` (Eisner 2016, "Inside-outside and forward-backward
algorithms are just backprop"). The dynamic programmes are O(n^3 + n^2 L),
in :mod:`._span_chart`.
"""
import heapq
import math
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import SymbolTable
from ..trees.forest import Forest, ForestBuilder
from ..trees.normalize import TOP
from . import _span_chart
from .span_trees import CHAIN_JOIN, SpanLabels

LabelledSpan = Tuple[int, int, int]


def check_scores(scores) -> np.ndarray:
    """``scores`` as a C-contiguous float64 array of shape ``(n, n + 1, L)``,
    ``n, L >= 1``, whose used entries (``i < j``) are finite or ``-inf``."""
    try:
        arr = np.ascontiguousarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise StructPrefError(f"span scores must be a float array: {err}") from None
    if arr.ndim != 3 or arr.shape[0] < 1 or arr.shape[1] != arr.shape[0] + 1 or arr.shape[2] < 1:
        raise StructPrefError(f"span scores must have shape (n, n + 1, L) with n, L >= 1, got {arr.shape}")
    n = arr.shape[0]
    used = arr[np.triu_indices(n, k=1, m=n + 1)]
    if np.isnan(used).any() or (used == np.inf).any():
        i, j = _first_bad(arr)
        raise StructPrefError(f"span scores must be finite or -inf; span [{i}, {j}) has NaN or +inf")
    return arr


def _first_bad(arr: np.ndarray) -> Tuple[int, int]:
    bad = (np.isnan(arr) | (arr == np.inf)).any(axis=2)
    bad &= np.triu(np.ones(bad.shape, dtype=bool), k=1)
    i, j = np.argwhere(bad)[0]
    return int(i), int(j)


def _no_tree(n: int) -> StructPrefError:
    return StructPrefError(f"no tree over the {n} words has a finite score (every tree uses a -inf span score)")


class SpanChart:
    """Inside and (on demand) outside charts of one sentence's span scores:
    ``lab[i, j]`` (log-sum of the span's label scores), ``beta`` (log
    inside), ``alpha`` (log outside), ``log_z``."""

    def __init__(self, scores):
        self.scores = check_scores(scores)
        self.n = self.scores.shape[0]
        self.lab, self.beta = _span_chart.inside(self.scores)
        self.log_z = float(self.beta[0, self.n])
        if self.log_z == -np.inf:
            raise _no_tree(self.n)
        self._alpha = None

    @property
    def alpha(self) -> np.ndarray:
        if self._alpha is None:
            self._alpha = _span_chart.outside(self.lab, self.beta)
        return self._alpha

    def span_marginals(self) -> np.ndarray:
        """``m[i, j]``: the probability that span ``[i, j)`` is in the tree (any label)."""
        return np.exp(self.alpha + self.beta - self.log_z)

    def label_marginals(self) -> np.ndarray:
        """``mu[i, j, l]``: the probability that the tree holds ``[i, j)`` labelled ``l``."""
        return _span_chart.label_marginals(self.scores, self.lab, self.beta, self.alpha, self.log_z)


def log_partition(scores) -> float:
    """``log Z``, the log-sum of ``exp S(T)`` over every labelled binary tree."""
    return SpanChart(scores).log_z


def marginals(scores) -> Tuple[float, np.ndarray]:
    """``(log Z, mu)`` with ``mu[i, j, l] = p((i, j, l) in T) = d log Z / d s(i, j, l)``
    (zero where ``i >= j``)."""
    chart = SpanChart(scores)
    return chart.log_z, chart.label_marginals()


def viterbi(scores) -> Tuple[float, List[LabelledSpan]]:
    """``(S(T*), spans)``: the best tree by CKY, its ``2n - 1`` spans
    ``(i, j, label id)`` ordered by start, then longest first (ties go to the
    lowest label id and the leftmost split)."""
    scores = check_scores(scores)
    n = scores.shape[0]
    best, label, split = _span_chart.viterbi(scores)
    if best[0, n] == -np.inf:
        raise _no_tree(n)
    spans: List[LabelledSpan] = []
    stack = [(0, n)]
    while stack:
        i, j = stack.pop()
        spans.append((i, j, int(label[i, j])))
        if j - i > 1:
            k = int(split[i, j])
            stack.append((k, j))
            stack.append((i, k))
    return float(best[0, n]), spans


def kbest(scores, k: int) -> List[Tuple[float, List[LabelledSpan]]]:
    """The ``k`` best trees ``(S(T), spans)``, best first (fewer when fewer
    trees have finite scores), by lazy k-best extraction over the span
    hypergraph (Huang & Chiang 2005, algorithm 3); the first is
    :func:`viterbi`'s up to ties. Scores are exact, so ``log p(T) = S(T) -
    log Z``. Spans are ordered as :func:`viterbi` orders them. Each labelled
    binary tree is one derivation, so the list has no repeats (distinct
    binary trees can still un-binarise to the same treebank tree)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise StructPrefError(f"k must be a positive integer, got {k!r}")
    scores = check_scores(scores)
    tree_scores, spans = _span_chart.kbest(scores, int(k))
    if not len(tree_scores):
        raise _no_tree(scores.shape[0])
    return [(float(score), list(map(tuple, tree.tolist()))) for score, tree in zip(tree_scores, spans)]


# ------------------------------------------------------------------ forest
# Fragments: (tails, omega) pairs, tails being forest node ids or word
# references (-i - 1) and omega a log inside weight; lists of them are kept
# sorted by omega, best first.
Fragment = Tuple[Tuple[int, ...], float]


def _log_add(a: float, b: float) -> float:
    if a < b:
        a, b = b, a
    return a + math.log1p(math.exp(b - a))


def _log_sum(values: List[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def _best_pairs(left: List[Fragment], right: List[Fragment], cap: int) -> List[Fragment]:
    """The ``cap`` best concatenations of a fragment of ``left`` with one of
    ``right`` (both sorted best first), best first: a heap over the grid of
    ranks where (a, b) is pushed by (a - 1, b), or by (0, b - 1) when a = 0,
    so each pair is pushed once."""
    if len(left) * len(right) <= cap:
        out = [(lt + rt, lw + rw) for lt, lw in left for rt, rw in right]
        out.sort(key=lambda f: -f[1])
        return out
    heap = [(-(left[0][1] + right[0][1]), 0, 0)]
    out = []
    while heap and len(out) < cap:
        _, a, b = heapq.heappop(heap)
        out.append((left[a][0] + right[b][0], left[a][1] + right[b][1]))
        if a + 1 < len(left):
            heapq.heappush(heap, (-(left[a + 1][1] + right[b][1]), a + 1, b))
        if a == 0 and b + 1 < len(right):
            heapq.heappush(heap, (-(left[0][1] + right[b + 1][1]), 0, b + 1))
    return out


def _kept(chart: "SpanChart", log_t: float, viterbi_spans: List[LabelledSpan]):
    """Labelled spans with ``log mu >= log_t`` and, below the spans that keep
    a label, binary splits whose log posterior
    ``alpha(i, j) + lab(i, j) + beta(i, k) + beta(k, j) - log Z`` is ``>= log_t``,
    with the Viterbi tree's spans and splits: ``({(i, j): label ids},
    {(i, j): split points})``. Nothing of probability zero is kept."""
    n, log_z = chart.n, chart.log_z
    alpha, beta, lab = chart.alpha, chart.beta, chart.lab
    with np.errstate(invalid="ignore"):  # -inf - -inf where i >= j
        base = alpha + beta - lab - log_z
    base[~np.isfinite(base)] = -np.inf
    log_mu = base[:, :, None] + chart.scores
    labels: Dict[Tuple[int, int], Set[int]] = {}
    for i, j, lab_id in zip(*np.nonzero((log_mu >= log_t) & np.isfinite(log_mu))):
        labels.setdefault((int(i), int(j)), set()).add(int(lab_id))
    splits: Dict[Tuple[int, int], Set[int]] = {}
    parent = alpha + lab - log_z
    beta_k = np.vstack([beta, np.full(n + 1, -np.inf)])  # beta_k[k, j] for k = 0 .. n
    for i in range(n):
        # log_post[k, j] for the split of [i, j) at k; -inf unless i < k < j.
        log_post = parent[i][None, :] + beta[i][:, None] + beta_k
        for k, j in zip(*np.nonzero((log_post >= log_t) & np.isfinite(log_post))):
            if (i, int(j)) in labels:
                splits.setdefault((i, int(j)), set()).add(int(k))
    for pos, (i, j, lab_id) in enumerate(viterbi_spans):
        labels.setdefault((i, j), set()).add(lab_id)
        if j - i > 1:  # in preorder a span's left child follows it
            splits.setdefault((i, j), set()).add(viterbi_spans[pos + 1][1])
    return labels, splits


def span_forest(scores, labels: SpanLabels, words: Sequence[str], tags: Sequence[str], threshold: float = 1e-3,
                symbols: Optional[SymbolTable] = None, max_expansions: int = 200,
                rule_ids: Optional[Dict[tuple, int]] = None) -> Forest:
    """The span CRF's pruned parse forest, in treebank space.

    Labelled spans whose marginal is at least ``threshold`` and binary splits
    whose posterior is at least ``threshold`` are kept, with the Viterbi
    tree's always (the posterior pruning of Huang 2008 on the CRF's
    marginals). Binary trees over what is kept are then un-binarised as
    :func:`.span_trees.spans_to_tree` does: a node per labelled span (a
    chain label becomes a path of unary nodes; label-less spans are spliced
    into their parent, whose hyperedges are the n-ary child sequences they
    leave, duplicates summed; per span at most ``max_expansions`` sequences,
    the most probable), a preterminal ``tags[i] -> words[i]`` per word (probability 1)
    and ``TOP`` over the sentence. A hyperedge's weight ``w(e)`` is the sum
    of ``exp`` of the scores its binarisations add (its children's labels and
    the spliced spans); its probability is ``q(e) = w(e) prod beta(tails) /
    beta(head)`` (inside over the pruned forest), so a tree's probability in
    the forest is its CRF probability (summed over its binarisations)
    restricted to the forest and renormalised, exactly unless the cap drops
    expansions. Node and rule ids go into ``symbols`` (a new table unless
    given; ``rule_ids``: a production-id cache shared across sentences, see
    :class:`~spacy_structpref.trees.ForestBuilder`)."""
    chart = SpanChart(scores)
    n, L = chart.n, chart.scores.shape[2]
    if not isinstance(labels, SpanLabels) or len(labels) != L:
        raise StructPrefError(f"labels must be the SpanLabels of the scores' {L} labels, "
                              f"got {labels!r}")
    if len(words) != n or len(tags) != n:
        raise StructPrefError(f"the scores are for {n} words; got {len(words)} words and {len(tags)} tags")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise StructPrefError(f"threshold must be a probability in [0, 1], got {threshold!r}")
    if isinstance(max_expansions, bool) or not isinstance(max_expansions, (int, np.integer)) or max_expansions < 1:
        raise StructPrefError(f"max_expansions must be an integer of at least 1, got {max_expansions!r}")
    log_t = float(np.log(threshold)) if threshold > 0 else -np.inf
    kept_labels, kept_splits = _kept(chart, log_t, viterbi(chart.scores)[1])
    s = chart.scores
    names = labels.labels

    # Fragments carry their inside weight omega = log w + sum of the tails'
    # log inside, so a node's log inside is the log-sum of its edges' omega
    # and q(e) = exp(omega(e) - log beta(head)).
    node_label: List[str] = []
    node_span: List[Tuple[int, int]] = []
    node_edges: List[List[Fragment]] = []
    log_beta: List[float] = []

    def add(label: str, i: int, j: int, edges: List[Fragment]) -> int:
        node_label.append(label)
        node_span.append((i, j))
        node_edges.append(edges)
        log_beta.append(_log_sum([omega for _, omega in edges]))
        return len(node_label) - 1

    # What span [a, b) adds to a parent's child sequence, over its kept labels.
    options: Dict[Tuple[int, int], List[Fragment]] = {}
    chains: Dict[Tuple[int, int, str], int] = {}  # node of each chain (suffix) label over a span
    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            if (i, j) not in kept_labels:
                continue
            if length == 1:
                content = [((add(tags[i], i, j, [((-(i + 1),), 0.0)]),), 0.0)]
            else:
                merged: Dict[Tuple[int, ...], float] = {}
                for k in sorted(kept_splits.get((i, j), ())):
                    for tails, omega in _best_pairs(options.get((i, k), []), options.get((k, j), []),
                                                    max_expansions):
                        merged[tails] = _log_add(merged[tails], omega) if tails in merged else omega
                content = sorted(merged.items(), key=lambda f: -f[1])[:max_expansions]
            if not content:
                continue
            opts: List[Fragment] = []
            for lab_id in sorted(kept_labels[i, j]):
                name, score = names[lab_id], float(s[i, j, lab_id])
                if not name:
                    opts.extend((tails, omega + score) for tails, omega in content)
                    continue
                parts = name.split(CHAIN_JOIN)
                below: Optional[int] = None
                for depth in range(len(parts) - 1, -1, -1):
                    key = (i, j, CHAIN_JOIN.join(parts[depth:]))
                    if key not in chains:
                        edges = content if below is None else [((below,), log_beta[below])]
                        chains[key] = add(parts[depth], i, j, edges)
                    below = chains[key]
                opts.append(((below,), score + log_beta[below]))
            opts.sort(key=lambda f: -f[1])
            options[i, j] = opts
    if not options.get((0, n)):
        raise StructPrefError("the pruned span chart holds no tree (the Viterbi tree should always be kept)")
    root = add(TOP, 0, n, options[0, n])

    reach = np.zeros(len(node_label), dtype=bool)
    reach[root] = True
    for v in range(root, -1, -1):
        if reach[v]:
            for tails, _ in node_edges[v]:
                reach[[t for t in tails if t >= 0]] = True
    symbols = SymbolTable() if symbols is None else symbols
    builder = ForestBuilder(symbols, n, list(words), rule_ids=rule_ids)
    new_id: Dict[int, int] = {}
    for v in np.flatnonzero(reach).tolist():
        new_id[v] = builder.add_node(node_label[v], *node_span[v])
        builder.add_edges(new_id[v], [([new_id[t] if t >= 0 else t for t in tails], math.exp(omega - log_beta[v]))
                                      for tails, omega in node_edges[v]])
    return builder.build(new_id[root]).compute_inside_outside()

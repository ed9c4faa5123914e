"""The chart of a span-based tree CRF parser: partition function, span
marginals, CKY, lazy k-best and posterior-pruned treebank-space forests over
labelled binary span trees.

Scores are a float array ``scores[i, j, l]`` of shape ``(n, n + 1, L)``,
read for ``0 <= i < j <= n`` (other entries are ignored); label 0 is the
empty label (span models fix its score at 0, but nothing here assumes it).
A tree ``T`` is a full binary bracketing with one label per span (see
:mod:`.span_trees`) in which a right child of two or more words has a
non-empty label, i.e. the left-factored binarisation of exactly one
treebank tree; ``S(T) = sum_{(i,j,l) in T} s(i, j, l)`` and
``p(T) = exp S(T) / Z`` (the span scores of Stern, Andreas & Klein 2017 in
the tree CRF of Zhang, Zhou & Li 2020, over treebank trees rather than
over their binarisations). ``log Z`` comes from the inside algorithm
and the span marginals from outside; the marginals are the gradient
``d log Z / d s(i, j, l)``, so the gradient of the loss ``-log p(T_gold)`` is
``mu - gold indicator`` (Eisner 2016, "Inside-outside and forward-backward
algorithms are just backprop"). The dynamic programmes are O(n^3 + n^2 L),
in :mod:`._span_chart`; k-best and the forest are described where defined.
"""
import heapq
import math
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import StructPrefError
from ..trees.arrays import SymbolTable
from ..trees.forest import Forest, ForestBuilder
from ..trees.normalize import TOP
from .span_trees import CHAIN_JOIN, SpanLabels

LabelledSpan = Tuple[int, int, int]


def _compiled():
    # Imported when first needed: spaCy imports plugin entry points whenever
    # it builds a pipeline, and they must load even where an extension is broken.
    from . import _span_chart

    return _span_chart


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
    """Inside and (on demand) outside charts of one sentence's span scores,
    each span in two positions (the sentence or a left child; a right
    child, which takes no empty label when it has two or more words):
    ``lab``/``lab_right`` (log-sum of the label scores a position allows),
    ``beta``/``beta_right`` (log inside), ``alpha``/``alpha_right`` (log
    outside), ``up`` (log outside times label mass, summed over the two
    positions) and ``log_z``."""

    def __init__(self, scores):
        self.scores = check_scores(scores)
        self.n = self.scores.shape[0]
        self.lab, self.lab_right, self.beta, self.beta_right = _compiled().inside(self.scores)
        self.log_z = float(self.beta[0, self.n])
        if self.log_z == -np.inf:
            raise _no_tree(self.n)
        self._outside = None

    def _outside_charts(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._outside is None:
            self._outside = _compiled().outside(self.lab, self.lab_right, self.beta, self.beta_right)
        return self._outside

    @property
    def alpha(self) -> np.ndarray:
        return self._outside_charts()[0]

    @property
    def alpha_right(self) -> np.ndarray:
        return self._outside_charts()[1]

    @property
    def up(self) -> np.ndarray:
        return self._outside_charts()[2]

    def span_marginals(self) -> np.ndarray:
        """``m[i, j]``: the probability that span ``[i, j)`` is in the tree (any label)."""
        return np.exp(np.logaddexp(self.alpha + self.beta, self.alpha_right + self.beta_right) - self.log_z)

    def label_marginals(self) -> np.ndarray:
        """``mu[i, j, l]``: the probability that the tree holds ``[i, j)`` labelled ``l``."""
        return _compiled().label_marginals(self.scores, self.beta, self.lab, self.alpha, self.alpha_right,
                                           self.log_z)


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
    best, label, label_right, split = _compiled().viterbi(scores)
    if best[0, n] == -np.inf:
        raise _no_tree(n)
    spans: List[LabelledSpan] = []
    stack = [(0, n, label)]
    while stack:
        i, j, labels = stack.pop()
        spans.append((i, j, int(labels[i, j])))
        if j - i > 1:
            k = int(split[i, j])
            stack.append((k, j, label_right))
            stack.append((i, k, label))
    return float(best[0, n]), spans


def kbest(scores, k: int) -> List[Tuple[float, List[LabelledSpan]]]:
    """The ``k`` best trees ``(S(T), spans)``, best first (fewer when fewer
    trees have finite scores), by lazy k-best extraction over the span
    hypergraph (Huang & Chiang 2005, algorithm 3); the first is
    :func:`viterbi`'s up to ties. Scores are exact, so ``log p(T) = S(T) -
    log Z``. Spans are ordered as :func:`viterbi` orders them. Each treebank
    tree is one derivation, so the list has no repeats."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise StructPrefError(f"k must be a positive integer, got {k!r}")
    scores = check_scores(scores)
    tree_scores, spans = _compiled().kbest(scores, int(k))
    if not len(tree_scores):
        raise _no_tree(scores.shape[0])
    return [(float(score), list(map(tuple, tree.tolist()))) for score, tree in zip(tree_scores, spans)]


# ------------------------------------------------------------------ forest
# Fragments: (tails, omega) pairs, tails being forest node ids or word
# references (-i - 1) and omega a log inside weight; lists of them are kept
# sorted by omega, best first.
Fragment = Tuple[Tuple[int, ...], float]


def _log_sum(values: List[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def _child_sequences(grids: List[Tuple[List[Fragment], List[Fragment]]], cap: int) -> Dict[Tuple[int, ...], float]:
    """Child sequences of a span from the pairs (left part, right part) of
    its splits' ``grids`` (each list sorted best first), best pair first
    across all splits, until ``cap`` are found: ``{tails: omega}``. The right
    part is one child, whose start fixes the split, so each sequence comes
    from one pair. Pairs come off one heap: in a split's grid of ranks (a, b)
    is pushed by (a - 1, b), or by (0, b - 1) when a = 0, so each pair is
    pushed once."""
    heap = [(-(left[0][1] + right[0][1]), g, 0, 0) for g, (left, right) in enumerate(grids) if left and right]
    heapq.heapify(heap)
    out: Dict[Tuple[int, ...], float] = {}
    while heap and len(out) < cap:
        neg, g, a, b = heapq.heappop(heap)
        left, right = grids[g]
        out[left[a][0] + right[b][0]] = -neg
        if a + 1 < len(left):
            heapq.heappush(heap, (-(left[a + 1][1] + right[b][1]), g, a + 1, b))
        if a == 0 and b + 1 < len(right):
            heapq.heappush(heap, (-(left[0][1] + right[b + 1][1]), g, 0, b + 1))
    return out


def _tree_splits(tree: Sequence[LabelledSpan], n: int, n_labels: int) -> Dict[Tuple[int, int], int]:
    """``{(i, j): k}``, the split point of each span of two or more words of
    ``tree``, given as :func:`kbest` gives trees (spans in preorder); a clear
    error unless it is a tree the chart can hold: a full binary bracketing
    of the ``n`` words, label ids below ``n_labels``, and a label on each
    right child of two or more words."""
    try:
        spans = [(int(i), int(j), int(lab)) for i, j, lab in tree]
    except (TypeError, ValueError):
        raise StructPrefError(f"a kept tree must be a list of (i, j, label id) spans, got {tree!r}") from None
    splits: Dict[Tuple[int, int], int] = {}
    # What the next span must be, innermost last: (start, end, role); a left
    # child ends before its parent and fixes the parent's split, where its
    # right sibling starts; a right child of two or more words has a label.
    due: List[Tuple[int, int, str]] = [(0, n, "sentence")]
    for i, j, lab in spans:
        if not due:
            raise StructPrefError(f"a kept tree over {n} words has more than {2 * n - 1} spans: {spans!r}")
        start, end, role = due.pop()
        if role == "left":
            ok = start == i < j < end
            if ok:
                splits[i, end] = j
                due[-1] = (j, end, "right")
        else:
            ok = (i, j) == (start, end) and (role == "sentence" or lab != 0 or j - i == 1)
        if not ok or not 0 <= lab < n_labels:
            raise StructPrefError(f"not a binary span tree over {n} words with labels below {n_labels} "
                                  f"(span {(i, j, lab)}): {spans!r}")
        if j - i > 1:
            due.append((-1, j, "right"))  # its start comes with the left child
            due.append((i, j, "left"))
    if due:
        raise StructPrefError(f"a kept tree over {n} words must have {2 * n - 1} spans, got {len(spans)}: {spans!r}")
    return splits


def _kept(chart: "SpanChart", log_t: float, trees: List[List[LabelledSpan]],
          tree_splits: List[Dict[Tuple[int, int], int]]):
    """Labelled spans with ``log mu >= log_t`` and, below the spans that keep
    a label, binary splits whose log posterior
    ``up(i, j) + beta(i, k) + beta_right(k, j) - log Z`` is ``>= log_t``,
    with the spans and splits of ``trees`` (with their ``tree_splits``), as
    far as trees made of them reach: ``({(i, j): label ids}, {(i, j): split
    points})``. Nothing of probability zero is kept."""
    n, log_z, beta = chart.n, chart.log_z, chart.beta
    lengths = np.arange(n + 1)[None, :] - np.arange(n)[:, None]
    with np.errstate(invalid="ignore"):  # -inf - -inf where i >= j
        split = beta - chart.lab - log_z
        log_mu = (split + np.logaddexp(chart.alpha, chart.alpha_right))[:, :, None] + chart.scores
        log_mu[:, :, 0] = np.where(lengths > 1, split + chart.alpha + chart.scores[:, :, 0], log_mu[:, :, 0])
    log_mu[np.isnan(log_mu)] = -np.inf
    labels: Dict[Tuple[int, int], Set[int]] = {}
    for i, j, lab_id in zip(*np.nonzero((log_mu >= log_t) & np.isfinite(log_mu))):
        labels.setdefault((int(i), int(j)), set()).add(int(lab_id))
    splits: Dict[Tuple[int, int], Set[int]] = {}
    parent = chart.up - log_z
    beta_k = np.vstack([chart.beta_right, np.full(n + 1, -np.inf)])  # beta_right[k, j] for k = 0 .. n
    for i in range(n):
        # log_post[k, j] for the split of [i, j) at k; -inf unless i < k < j.
        log_post = parent[i][None, :] + beta[i][:, None] + beta_k
        for k, j in zip(*np.nonzero((log_post >= log_t) & np.isfinite(log_post))):
            if (i, int(j)) in labels:
                splits.setdefault((i, int(j)), set()).add(int(k))
    # the trees of a k-best list share most of their spans: each distinct one once
    for i, j, lab_id in {span for tree in trees for span in tree}:
        labels.setdefault((i, j), set()).add(lab_id)
    for cell, k in {item for tree_split in tree_splits for item in tree_split.items()}:
        splits.setdefault(cell, set()).add(k)
    # Only what a tree over kept spans and splits can reach from the sentence.
    reach, todo = {(0, n)}, [(0, n)]
    while todo:
        i, j = todo.pop()
        usable = {k for k in splits.get((i, j), ()) if (i, k) in labels and (k, j) in labels}
        splits[i, j] = usable
        for cell in [(i, k) for k in usable] + [(k, j) for k in usable]:
            if cell not in reach:
                reach.add(cell)
                todo.append(cell)
    return ({cell: ids for cell, ids in labels.items() if cell in reach},
            {cell: ks for cell, ks in splits.items() if cell in reach})


class _Draft:
    """The treebank-space hypergraph of a pruned span chart before it
    becomes a :class:`Forest`: per node its label, span and hyperedges as
    fragments (tails, omega), ``omega`` being the edge's log weight plus its
    tails' log inside, so a node's log inside is the log-sum of its edges'
    omega; ``protected`` holds the (node, tails) of the Viterbi tree's edges.

    The nodes of one span's labels share one list of hyperedges (the
    span's child sequences, best first), added as a group by
    :meth:`add_shared`: the outside pass then goes through the list once
    for the whole group, and each node keeps a prefix of it."""

    def __init__(self) -> None:
        self.label: List[str] = []
        self.span: List[Tuple[int, int]] = []
        self.edges: List[List[Fragment]] = []
        self.log_beta: List[float] = []
        self.group: List[int] = []  # first node of the node's shared-edges group, or -1
        self.protected: Dict[int, Set[Tuple[int, ...]]] = {}

    def add(self, label: str, i: int, j: int, edges: List[Fragment], first: Optional[int] = None,
            shared: bool = False) -> int:
        """A node over [i, j) with hyperedges ``edges``; ``shared``: the
        list is shared with the nodes added before with it, the first of
        which is ``first`` (None: this is the first)."""
        v = len(self.label)
        self.label.append(label)
        self.span.append((i, j))
        self.edges.append(edges)
        self.group.append(-1 if not shared else v if first is None else first)
        self.log_beta.append(self.log_beta[first] if shared and first is not None
                             else _log_sum([omega for _, omega in edges]))
        return v

    def protect(self, v: int, tails: Tuple[int, ...]) -> None:
        self.protected.setdefault(v, set()).add(tails)

    def prune(self, root: int, log_t: float) -> None:
        """Drops the hyperedges whose posterior ``alpha(head) w(e) prod
        beta(tails) / beta(root)`` is below ``exp(log_t)`` (the Viterbi
        tree's stay), then the nodes left without a complete hyperedge, and
        recomputes omega and the inside scores."""
        n_nodes, log_z, log_beta = len(self.label), self.log_beta[root], self.log_beta
        into: List[List[float]] = [[] for _ in range(n_nodes)]
        into[root].append(0.0)
        group_alpha: Dict[int, List[float]] = {}
        kept: List[Dict[Tuple[int, ...], float]] = [{} for _ in range(n_nodes)]
        for v in range(root, -1, -1):
            log_alpha = _log_sum(into[v]) if into[v] else -math.inf
            first = self.group[v]
            if log_alpha > -math.inf:
                # A shared list is sorted best first: what reaches the threshold is a prefix.
                for tails, omega in self.edges[v]:
                    if log_alpha + omega - log_z >= log_t:
                        kept[v][tails] = omega
                    elif first >= 0:
                        break
                for tails in self.protected.get(v, ()):
                    if tails not in kept[v]:
                        kept[v][tails] = dict(self.edges[v])[tails]
                if first >= 0:
                    group_alpha.setdefault(first, []).append(log_alpha)
                else:
                    group_alpha[v] = [log_alpha]
            if v == first or first < 0:
                # Outside contributions to the tails, once per list of hyperedges.
                alphas = group_alpha.pop(v, None)
                if alphas:
                    log_alpha = _log_sum(alphas)
                    for tails, omega in self.edges[v]:
                        for t in tails:
                            if t >= 0:
                                into[t].append(log_alpha + omega - log_beta[t])
        new_beta = log_beta[:]
        for v in range(n_nodes):
            edges = [(tails, omega + sum(new_beta[t] - log_beta[t] for t in tails if t >= 0))
                     for tails, omega in kept[v].items() if all(t < 0 or self.edges[t] for t in tails)]
            edges.sort(key=lambda f: -f[1])
            self.edges[v] = edges
            new_beta[v] = _log_sum([omega for _, omega in edges]) if edges else -math.inf
        self.log_beta = new_beta

    def to_forest(self, root: int, words: Sequence[str], symbols: SymbolTable,
                  rule_ids: Optional[Dict[tuple, int]]) -> Forest:
        """The nodes reachable from ``root`` as a Forest with ``q(e) = exp(omega(e) - log beta(head))``."""
        reach = np.zeros(len(self.label), dtype=bool)
        reach[root] = True
        for v in range(root, -1, -1):
            if reach[v]:
                for tails, _ in self.edges[v]:
                    reach[[t for t in tails if t >= 0]] = True
        builder = ForestBuilder(symbols, len(words), list(words), rule_ids=rule_ids)
        new_id: Dict[int, int] = {}
        for v in np.flatnonzero(reach).tolist():
            new_id[v] = builder.add_node(self.label[v], *self.span[v])
            builder.add_edges(new_id[v], [([new_id[t] if t >= 0 else t for t in tails],
                                           math.exp(omega - self.log_beta[v])) for tails, omega in self.edges[v]])
        return builder.build(new_id[root]).compute_inside_outside()


def span_forest(scores, labels: SpanLabels, words: Sequence[str], tags: Sequence[str], threshold: float = 1e-3,
                symbols: Optional[SymbolTable] = None, max_expansions: int = 100,
                rule_ids: Optional[Dict[tuple, int]] = None,
                keep: Sequence[Sequence[LabelledSpan]] = ()) -> Forest:
    """The span CRF's pruned parse forest, in treebank space.

    First the chart is pruned: labelled spans whose marginal is at least
    ``threshold`` and binary splits whose posterior is at least
    ``threshold`` are kept, with those of the Viterbi tree and of the
    trees in ``keep`` always (posterior pruning, Huang 2008, on the CRF's
    marginals; ``keep`` takes trees as :func:`kbest` gives them, so that a
    k-best list and its forest agree). Binary trees over what is
    kept are un-binarised as :func:`.span_trees.spans_to_tree` does: a node
    per labelled span (a chain label becomes a path of unary nodes;
    label-less spans are spliced into their parent, whose hyperedges are the
    n-ary child sequences they leave; per span at most ``max_expansions``
    sequences, the most probable, and the kept trees'), a preterminal
    ``tags[i] -> words[i]`` per word (probability 1) and ``TOP`` over the
    sentence. A hyperedge's weight ``w(e)`` is ``exp`` of the scores its
    left-factored binarisation adds (its children's labels and the spliced
    spans). Then hyperedges whose posterior in this forest is below
    ``threshold`` are dropped, the kept trees' kept. Each hyperedge gets
    ``q(e) = w(e) prod beta(tails) / beta(head)`` from the inside scores of
    what is left, so a tree's probability in the forest is its CRF
    probability restricted to the forest's trees and renormalised. Node and
    rule ids go into ``symbols`` (a new table unless
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
    log_t = math.log(threshold) if threshold > 0 else -math.inf
    trees = [viterbi(chart.scores)[1]] + [list(t) for t in keep]
    tree_split = [_tree_splits(t, n, L) for t in trees]
    s, names, draft = chart.scores, labels.labels, _Draft()
    if len(trees) > 1:
        cells = np.array([span for t in trees[1:] for span in t], dtype=np.intp).reshape(-1, 3)
        finite = np.isfinite(s[cells[:, 0], cells[:, 1], cells[:, 2]])
        if not finite.all():
            bad = trees[1 + int(np.flatnonzero(~finite)[0]) // (2 * n - 1)]  # _tree_splits checked the sizes
            raise StructPrefError(f"a kept tree has probability zero (a -inf span score): {bad!r}")
    kept_labels, kept_splits = _kept(chart, log_t, trees, tree_split)
    holders: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}  # span -> (kept tree, its label there)
    for x, t in enumerate(trees):
        for i, j, lab in t:
            holders.setdefault((i, j), []).append((x, lab))

    # What span [a, b) adds to a parent's child sequence, over its kept
    # labels, as a left child (or the sentence) and as a right child (no
    # empty label over two or more words), and what it adds in each kept tree.
    options: Dict[Tuple[int, int], List[Fragment]] = {}
    options_right: Dict[Tuple[int, int], List[Fragment]] = {}
    tree_option: List[Dict[Tuple[int, int], Fragment]] = [{} for _ in trees]
    chains: Dict[Tuple[int, int, str], int] = {}  # node of each chain (suffix) label over a span
    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            if (i, j) not in kept_labels:
                continue
            own = holders.get((i, j), [])
            tails_of: Dict[int, Tuple[int, ...]] = {}  # each kept tree's children here
            if length == 1:
                pre = draft.add(tags[i], i, j, [((-(i + 1),), 0.0)])
                draft.protect(pre, (-(i + 1),))
                content = [((pre,), 0.0)]
                tails_of = {x: (pre,) for x, _ in own}
            else:
                merged = _child_sequences([(options.get((i, k), []), options_right.get((k, j), []))
                                           for k in sorted(kept_splits.get((i, j), ()))], max_expansions)
                for x, _ in own:
                    k = tree_split[x][i, j]
                    left, right = tree_option[x][i, k], tree_option[x][k, j]
                    tails_of[x] = left[0] + right[0]
                    # one cut by the cap is lighter than all it kept: the list stays sorted
                    merged.setdefault(tails_of[x], left[1] + right[1])
                content = sorted(merged.items(), key=lambda f: -f[1])
            if not content:
                continue
            omega_of = dict(content)
            opts: List[Fragment] = []
            opts_right: List[Fragment] = []
            first_bottom: Optional[int] = None
            for lab_id in sorted(kept_labels[i, j]):
                name, score = names[lab_id], float(s[i, j, lab_id])
                labelled_here = [x for x, lab in own if lab == lab_id]
                if not name:
                    opts.extend((tails, omega + score) for tails, omega in content)
                    if length == 1:
                        opts_right.extend((tails, omega + score) for tails, omega in content)
                    for x in labelled_here:
                        tree_option[x][i, j] = (tails_of[x], omega_of[tails_of[x]] + score)
                    continue
                parts = name.split(CHAIN_JOIN)
                below: Optional[int] = None
                for depth in range(len(parts) - 1, -1, -1):
                    key = (i, j, CHAIN_JOIN.join(parts[depth:]))
                    if key not in chains:
                        if below is None:  # the chain's bottom: the span's child sequences
                            chains[key] = draft.add(parts[depth], i, j, content, first_bottom, shared=True)
                            first_bottom = chains[key] if first_bottom is None else first_bottom
                        else:
                            chains[key] = draft.add(parts[depth], i, j, [((below,), draft.log_beta[below])])
                    for x in labelled_here:
                        draft.protect(chains[key], tails_of[x] if below is None else (below,))
                    below = chains[key]
                opts.append(((below,), score + draft.log_beta[below]))
                opts_right.append(opts[-1])
                for x in labelled_here:
                    tree_option[x][i, j] = opts[-1]
            opts.sort(key=lambda f: -f[1])
            opts_right.sort(key=lambda f: -f[1])
            options[i, j] = opts
            options_right[i, j] = opts_right
    root = draft.add(TOP, 0, n, options[0, n])
    for option in tree_option:
        draft.protect(root, option[0, n][0])
    if log_t > -math.inf:
        draft.prune(root, log_t)
    return draft.to_forest(root, words, SymbolTable() if symbols is None else symbols, rule_ids)

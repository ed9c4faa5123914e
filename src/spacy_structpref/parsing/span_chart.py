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
from typing import List, Tuple

import numpy as np

from ..errors import StructPrefError
from . import _span_chart

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

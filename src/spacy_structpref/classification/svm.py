"""One-vs-others kernel SVMs on precomputed kernel matrices (Zhang et al.
2010, §4: "SVM … and the one vs. others strategy is adopted to select the
one with the largest margin as the final answer").

Each class c gets a binary ``sklearn.svm.SVC(kernel="precomputed")``
(libsvm) trained on the Gram matrix; its decision function is
``f_c(x) = Σ_{i ∈ SV_c} y_i α_i K(x_i, x) + b_c``. The classes' support
vectors are pooled into one support set S (sorted training indices) and
the dual coefficients into a matrix ``coef`` (classes × |S|, zero where a
class does not use a support vector), so that prediction is one matrix
product with the kernel rows against S only:
``F(x) = K(x, S) @ coefᵀ + intercept``, the class ``argmax_c F_c(x)``.
"""
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, NamedTuple, Optional, Sequence

import numpy as np

from ..errors import StructPrefError, check_number


class OneVsRest(NamedTuple):
    """A trained one-vs-others SVM: ``support`` (indices of the training
    items that are a support vector of some class, ascending), ``coef``
    (classes × len(support) dual coefficients y_i α_i) and ``intercept``
    (one b per class)."""
    support: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray

    def decision(self, rows: np.ndarray) -> np.ndarray:
        """Margins (items × classes) from kernel rows against the support set."""
        rows = np.asarray(rows, dtype=float)
        if rows.ndim != 2 or rows.shape[1] != len(self.support):
            raise StructPrefError(f"kernel rows of shape {rows.shape} do not match the {len(self.support)} "
                                  "support vectors")
        return rows @ self.coef.T + self.intercept


def check_C(C: float) -> float:
    return check_number("the SVM's C", C, 0.0, above=True)


def _binary(K: np.ndarray, positive: np.ndarray, C: float):
    """(support indices, dual coefficients, intercept) of one class against the others."""
    from sklearn import config_context
    from sklearn.svm import SVC

    if positive.all() or not positive.any():  # one side only: a constant decision
        return np.zeros(0, dtype=np.int64), np.zeros(0), 1.0 if positive.all() else -1.0
    # fit_one_vs_rest checked K once; sklearn would scan all of it again for every class and C
    # (a tenth of the TREC table's time). Its configuration is per thread, so it is set here.
    with config_context(assume_finite=True):
        svc = SVC(kernel="precomputed", C=C).fit(K, positive)
    # classes_ is [False, True]: a positive decision is the class, as dual_coef_ and intercept_ give it
    return svc.support_.astype(np.int64), svc.dual_coef_[0].astype(float), float(svc.intercept_[0])


def fit_one_vs_rest(K: np.ndarray, y: np.ndarray, n_classes: int, C: float = 1.0,
                    n_threads: int = 1) -> OneVsRest:
    """One binary SVM per class (``y``: class ids 0 .. n_classes-1) on the
    Gram matrix ``K`` of the training items, ``n_threads`` classes at a time."""
    K = np.asarray(K, dtype=float)
    y = np.asarray(y)
    n = len(y)
    if K.shape != (n, n):
        raise StructPrefError(f"the Gram matrix has shape {K.shape} for {n} training items")
    if n == 0:
        raise StructPrefError("no training items")
    if y.min() < 0 or y.max() >= n_classes:
        raise StructPrefError(f"class ids must lie in 0 .. {n_classes - 1}")
    if not np.isfinite(K).all():
        raise StructPrefError("the Gram matrix has values that are not finite")
    C = check_C(C)
    with ThreadPoolExecutor(max(1, n_threads)) as pool:
        parts = list(pool.map(lambda c: _binary(K, y == c, C), range(n_classes)))
    support = np.unique(np.concatenate([s for s, _, _ in parts])).astype(np.int64)
    coef = np.zeros((n_classes, len(support)))
    for c, (s, a, _) in enumerate(parts):
        coef[c, np.searchsorted(support, s)] = a
    return OneVsRest(support, coef, np.array([b for _, _, b in parts]))


def predict(model: OneVsRest, rows: np.ndarray) -> np.ndarray:
    """The class of largest margin per item (ties: the first class)."""
    return np.argmax(model.decision(rows), axis=1)


def dev_mask(n: int, every: int) -> np.ndarray:
    """Every ``every``-th item (index % every == every - 1) is held out:
    TREC QC's dev split when the items are its training questions in order."""
    if not isinstance(every, int) or every < 2:
        raise StructPrefError(f"dev_every must be an integer of at least 2, got {every!r}")
    return np.arange(n) % every == every - 1


def tune_C(K: np.ndarray, y: np.ndarray, n_classes: int, held_out: np.ndarray, grid: Sequence[float],
           n_threads: int = 1, progress: bool = False) -> Dict[float, float]:
    """Accuracy on the ``held_out`` items of the SVMs trained on the others,
    for each C of ``grid``."""
    from ..progress import progress_bar

    grid = [check_C(c) for c in grid]
    if not grid:
        raise StructPrefError("the C grid is empty")
    train = np.flatnonzero(~held_out)
    dev = np.flatnonzero(held_out)
    if not len(train) or not len(dev):
        raise StructPrefError(f"tuning C needs training and held-out items, got {len(train)} and {len(dev)}")
    K_train = K[np.ix_(train, train)]
    scores = {}
    for C in progress_bar(grid, desc="tune C", unit="C", disable=not progress):
        model = fit_one_vs_rest(K_train, y[train], n_classes, C, n_threads)
        rows = K[np.ix_(dev, train[model.support])]
        scores[C] = float(np.mean(predict(model, rows) == y[dev]))
    return scores


def best_C(scores: Dict[float, float]) -> float:
    """The C of the best held-out accuracy (ties: the smallest C)."""
    return min(scores, key=lambda C: (-scores[C], C))


def fit_tuned(K: np.ndarray, y: np.ndarray, n_classes: int, grid: Sequence[float], held_out: Optional[np.ndarray],
              n_threads: int = 1, progress: bool = False):
    """C chosen on the held-out items (when ``grid`` has more than one C),
    then the SVMs refit on all items: ``(model, C, held-out accuracy per C)``."""
    grid = list(grid)
    scores = {}
    if len(grid) > 1:
        if held_out is None:
            raise StructPrefError("choosing C from a grid needs held-out items")
        scores = tune_C(K, y, n_classes, held_out, grid, n_threads, progress)
        C = best_C(scores)
    else:
        C = check_C(grid[0]) if grid else 1.0
    return fit_one_vs_rest(K, y, n_classes, C, n_threads), C, scores

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Inside, outside and CKY over labelled binary span trees (a tree CRF).

A tree over ``n`` words is a full binary bracketing with a label on each of
its ``2n - 1`` spans; it scores ``S(T) = sum of s(i, j, l)`` over its
labelled spans (Stern, Andreas & Klein 2017, eq. 3; Zhang, Zhou & Li 2020,
eq. 6). Everything is in log space over ``(n, n + 1)`` charts indexed by
``[i, j]``, ``0 <= i < j <= n``:

- ``lab[i, j] = log sum_l exp s(i, j, l)``;
- inside ``beta[i, i+1] = lab[i, i+1]``,
  ``beta[i, j] = lab[i, j] + log sum_{i<k<j} exp(beta[i, k] + beta[k, j])``;
- outside ``alpha[0, n] = 0`` and, gathering over the parents of ``[i, j)``,
  ``alpha[i, j] = log( sum_{m>j} exp(alpha[i, m] + lab[i, m] + beta[j, m])
  + sum_{h<i} exp(alpha[h, j] + lab[h, j] + beta[h, i]) )``.

Every log-sum is taken as ``max + log sum exp(x - max)`` (two passes), so
long sentences neither overflow nor underflow, and a sum of nothing or of
``-inf`` terms is ``-inf`` (a score of ``-inf`` forbids a labelled span).
The callers check shapes and values; nothing here raises.
"""
import numpy as np
from libc.math cimport exp, log, INFINITY


cdef inline double lse_labels(const double[:, :, ::1] s, Py_ssize_t i, Py_ssize_t j,
                              Py_ssize_t L) noexcept nogil:
    cdef double m = -INFINITY, acc = 0.0
    cdef Py_ssize_t l
    for l in range(L):
        if s[i, j, l] > m:
            m = s[i, j, l]
    if m == -INFINITY:
        return m
    for l in range(L):
        acc += exp(s[i, j, l] - m)
    return m + log(acc)


cdef inline double lse_splits(const double[:, ::1] beta, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    cdef double m = -INFINITY, acc = 0.0, v
    cdef Py_ssize_t k
    for k in range(i + 1, j):
        v = beta[i, k] + beta[k, j]
        if v > m:
            m = v
    if m == -INFINITY:
        return m
    for k in range(i + 1, j):
        acc += exp(beta[i, k] + beta[k, j] - m)
    return m + log(acc)


cdef void inside_kernel(const double[:, :, ::1] s, double[:, ::1] lab, double[:, ::1] beta) noexcept nogil:
    cdef Py_ssize_t n = s.shape[0], L = s.shape[2], span, i, j
    for span in range(1, n + 1):
        for i in range(n - span + 1):
            j = i + span
            lab[i, j] = lse_labels(s, i, j, L)
            if span == 1:
                beta[i, j] = lab[i, j]
            else:
                beta[i, j] = lab[i, j] + lse_splits(beta, i, j)


cdef inline double parent_term(const double[:, ::1] lab, const double[:, ::1] beta, const double[:, ::1] alpha,
                               Py_ssize_t pi, Py_ssize_t pj, Py_ssize_t si, Py_ssize_t sj) noexcept nogil:
    # Outside weight a parent [pi, pj) with sibling [si, sj) passes down.
    return alpha[pi, pj] + lab[pi, pj] + beta[si, sj]


cdef void outside_kernel(const double[:, ::1] lab, const double[:, ::1] beta, double[:, ::1] alpha) noexcept nogil:
    cdef Py_ssize_t n = lab.shape[0], span, i, j, h, m
    cdef double mx, acc, v
    alpha[0, n] = 0.0
    for span in range(n - 1, 0, -1):
        for i in range(n - span + 1):
            j = i + span
            mx = -INFINITY
            for m in range(j + 1, n + 1):
                v = parent_term(lab, beta, alpha, i, m, j, m)
                if v > mx:
                    mx = v
            for h in range(i):
                v = parent_term(lab, beta, alpha, h, j, h, i)
                if v > mx:
                    mx = v
            if mx == -INFINITY:
                alpha[i, j] = mx
                continue
            acc = 0.0
            for m in range(j + 1, n + 1):
                acc += exp(parent_term(lab, beta, alpha, i, m, j, m) - mx)
            for h in range(i):
                acc += exp(parent_term(lab, beta, alpha, h, j, h, i) - mx)
            alpha[i, j] = mx + log(acc)


def inside(const double[:, :, ::1] scores):
    """``(lab, beta)``: per span the log-sum of its label scores and its log
    inside score; ``beta[0, n]`` is ``log Z``."""
    cdef Py_ssize_t n = scores.shape[0]
    lab_a = np.full((n, n + 1), -np.inf)
    beta_a = np.full((n, n + 1), -np.inf)
    cdef double[:, ::1] lab = lab_a
    cdef double[:, ::1] beta = beta_a
    with nogil:
        inside_kernel(scores, lab, beta)
    return lab_a, beta_a


def outside(const double[:, ::1] lab, const double[:, ::1] beta):
    """Log outside scores ``alpha`` of every span, from :func:`inside`'s charts."""
    cdef Py_ssize_t n = lab.shape[0]
    alpha_a = np.full((n, n + 1), -np.inf)
    cdef double[:, ::1] alpha = alpha_a
    with nogil:
        outside_kernel(lab, beta, alpha)
    return alpha_a


def label_marginals(const double[:, :, ::1] scores, const double[:, ::1] lab, const double[:, ::1] beta,
                    const double[:, ::1] alpha, double log_z):
    """``mu[i, j, l] = exp(alpha[i, j] + beta[i, j] - lab[i, j] + s(i, j, l) - log Z)``,
    the posterior probability that the tree holds span ``[i, j)`` labelled ``l``."""
    cdef Py_ssize_t n = scores.shape[0], L = scores.shape[2], i, j, l
    cdef double base
    mu_a = np.zeros((n, n + 1, L))
    cdef double[:, :, ::1] mu = mu_a
    with nogil:
        for i in range(n):
            for j in range(i + 1, n + 1):
                base = alpha[i, j] + beta[i, j] - lab[i, j] - log_z
                if base == -INFINITY or lab[i, j] == -INFINITY:
                    continue
                for l in range(L):
                    mu[i, j, l] = exp(base + scores[i, j, l])
    return mu_a


cdef void viterbi_kernel(const double[:, :, ::1] s, double[:, ::1] best, int[:, ::1] label,
                         int[:, ::1] split) noexcept nogil:
    cdef Py_ssize_t n = s.shape[0], L = s.shape[2], span, i, j, k, l
    cdef double bl, bk, v
    for span in range(1, n + 1):
        for i in range(n - span + 1):
            j = i + span
            bl = -INFINITY
            label[i, j] = 0
            for l in range(L):
                if s[i, j, l] > bl:
                    bl = s[i, j, l]
                    label[i, j] = <int>l
            if span == 1:
                best[i, j] = bl
                continue
            bk = -INFINITY
            split[i, j] = <int>(i + 1)
            for k in range(i + 1, j):
                v = best[i, k] + best[k, j]
                if v > bk:
                    bk = v
                    split[i, j] = <int>k
            best[i, j] = bl + bk


def viterbi(const double[:, :, ::1] scores):
    """CKY with max: ``(best, label, split)``, the best tree score of every
    span, its best label and its best split point (first of equals)."""
    cdef Py_ssize_t n = scores.shape[0]
    best_a = np.full((n, n + 1), -np.inf)
    label_a = np.zeros((n, n + 1), dtype=np.intc)
    split_a = np.zeros((n, n + 1), dtype=np.intc)
    cdef double[:, ::1] best = best_a
    cdef int[:, ::1] label = label_a
    cdef int[:, ::1] split = split_a
    with nogil:
        viterbi_kernel(scores, best, label, split)
    return best_a, label_a, split_a

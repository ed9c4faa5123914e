# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Dynamic programmes over packed forests, in log space: inside/outside
(Baker 1979; Lari & Young 1990, over hypergraphs as in Klein & Manning
2001), the Viterbi (max-product) inside, and the Viterbi merit of each
hyperedge (Huang 2008, forest pruning).

Every function visits hyperedges in ``order``: edge ids sorted by head, so
that the edges of a node's tails come before the node's own (forests number
nodes bottom-up). Arrays are checked by :class:`~.forest.Forest`.
"""
import numpy as np
from libc.math cimport exp, log, log1p, INFINITY


cdef inline double log_add_exp(double a, double b) noexcept nogil:
    """log(exp(a) + exp(b)) without leaving log space; -inf is log 0."""
    if a < b:
        a, b = b, a
    if b == -INFINITY:
        return a
    return a + log1p(exp(b - a))


def inside_outside(const int[::1] head, const int[::1] tail_start, const int[::1] tails,
                   const double[::1] prob, const int[::1] order, int n_nodes, int root):
    """Log inside β, log outside α (normalised so that ``α(root) = 0``) and
    the Viterbi log inside of every node."""
    cdef Py_ssize_t E = order.shape[0], idx, e, q, h, t
    li_a = np.full(n_nodes, -np.inf)
    lo_a = np.full(n_nodes, -np.inf)
    vi_a = np.full(n_nodes, -np.inf)
    es_a = np.empty(head.shape[0], dtype=np.float64)
    cdef double[::1] li = li_a
    cdef double[::1] lo = lo_a
    cdef double[::1] vi = vi_a
    cdef double[::1] es = es_a  # log P(e) + Σ β(tails): the edge's inside
    cdef double s, v
    with nogil:
        for idx in range(E):
            e = order[idx]
            h = head[e]
            s = log(prob[e]) if prob[e] > 0.0 else -INFINITY
            v = s
            for q in range(tail_start[e], tail_start[e + 1]):
                t = tails[q]
                if t >= 0:
                    s += li[t]
                    v += vi[t]
            es[e] = s
            li[h] = log_add_exp(li[h], s)
            if v > vi[h]:
                vi[h] = v
        lo[root] = 0.0
        for idx in range(E - 1, -1, -1):
            e = order[idx]
            h = head[e]
            if lo[h] == -INFINITY or es[e] == -INFINITY:
                continue
            for q in range(tail_start[e], tail_start[e + 1]):
                t = tails[q]
                if t >= 0:
                    lo[t] = log_add_exp(lo[t], lo[h] + es[e] - li[t])
    return li_a, lo_a, vi_a


def viterbi_merit(const int[::1] head, const int[::1] tail_start, const int[::1] tails,
                  const double[::1] prob, const int[::1] order, const double[::1] vi, int root):
    """Max-product merit of every hyperedge: the log-probability of the best
    tree that uses it, from the Viterbi inside ``vi``."""
    cdef Py_ssize_t E = order.shape[0], n = vi.shape[0], idx, e, q, h, t
    vo_a = np.full(n, -np.inf)
    merit_a = np.full(head.shape[0], -np.inf)
    cdef double[::1] vo = vo_a  # Viterbi outside
    cdef double[::1] merit = merit_a
    cdef double s
    with nogil:
        vo[root] = 0.0
        for idx in range(E - 1, -1, -1):
            e = order[idx]
            h = head[e]
            if vo[h] == -INFINITY or prob[e] <= 0.0:
                continue
            s = log(prob[e])
            for q in range(tail_start[e], tail_start[e + 1]):
                if tails[q] >= 0:
                    s += vi[tails[q]]
            merit[e] = vo[h] + s
            for q in range(tail_start[e], tail_start[e + 1]):
                t = tails[q]
                if t >= 0 and merit[e] - vi[t] > vo[t]:
                    vo[t] = merit[e] - vi[t]
    return merit_a

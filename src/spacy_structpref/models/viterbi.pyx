# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""First-order Viterbi over a whole batch of sequences, without the GIL.

Sequences are concatenated: ``scores`` is (N, M) for N tokens in total and
``lengths`` gives each sequence's length. A sequence y scores
``init[y_0] + Σ_i scores[i, y_i] + Σ_i trans[y_{i-1}, y_i]``.

``viterbi_batch`` takes two optional per-token int arrays:
- ``cost_gold``: loss augmentation with Hamming cost — every label other than
  ``cost_gold[i]`` gets ``+cost`` at token i (a token with -1 gets no cost);
- ``allowed``: constraints — where ``allowed[i] >= 0`` only that label may be
  used (the best sequence consistent with partial gold annotation).
"""
import numpy

from libc.math cimport INFINITY


cdef inline float _emission(const float[:, ::1] scores, const int[::1] cost_gold, float cost,
                            int use_cost, int t, int y) noexcept nogil:
    if use_cost and cost_gold[t] >= 0 and cost_gold[t] != y:
        return scores[t, y] + cost
    return scores[t, y]


cdef inline int _best_prev(const float[:, ::1] delta, const float[:, ::1] trans, int t,
                           int y, int M) noexcept nogil:
    """argmax over y' of delta[t - 1, y'] + trans[y', y]."""
    cdef int yp, arg = 0
    cdef float v, top = -INFINITY
    for yp in range(M):
        v = delta[t - 1, yp] + trans[yp, y]
        if v > top:
            top = v
            arg = yp
    return arg


cdef void _viterbi_one(const float[:, ::1] scores, const float[:, ::1] trans,
                       const float[::1] init, const int[::1] cost_gold,
                       const int[::1] allowed, float cost, int use_cost,
                       int use_allowed, int start, int length,
                       float[:, ::1] delta, int[::1] out, float[::1] best, int b) noexcept nogil:
    # The forward pass keeps only the max scores, as elementwise maxima over
    # contiguous rows (the compiler vectorises them); the backtrace recomputes
    # the argmax for the chosen labels only.
    cdef int M = scores.shape[1]
    cdef int i, y, yp, arg, t
    cdef float p, v, top
    cdef float* cur
    cdef const float* row
    for y in range(M):
        if use_allowed and allowed[start] >= 0 and allowed[start] != y:
            delta[start, y] = -INFINITY
        else:
            delta[start, y] = _emission(scores, cost_gold, cost, use_cost, start, y) + init[y]
    for i in range(1, length):
        t = start + i
        cur = &delta[t, 0]
        for y in range(M):
            cur[y] = -INFINITY
        for yp in range(M):
            p = delta[t - 1, yp]
            row = &trans[yp, 0]
            for y in range(M):
                v = p + row[y]
                cur[y] = v if v > cur[y] else cur[y]
        for y in range(M):
            if use_allowed and allowed[t] >= 0 and allowed[t] != y:
                cur[y] = -INFINITY
            else:
                cur[y] += _emission(scores, cost_gold, cost, use_cost, t, y)
    t = start + length - 1
    top = -INFINITY
    arg = 0
    for y in range(M):
        if delta[t, y] > top:
            top = delta[t, y]
            arg = y
    best[b] = top
    for i in range(length - 1, 0, -1):
        out[start + i] = arg
        arg = _best_prev(delta, trans, start + i, arg, M)
    out[start] = arg


def viterbi_batch(scores, lengths, trans, init, cost_gold=None, float cost=1.0,
                  allowed=None):
    """Best label sequence of every sequence in the batch.

    Returns ``(paths, best_scores)``: int32 (N,) labels and float32 (B,) the
    score of each best path (including the loss augmentation if given)."""
    cdef const float[:, ::1] S = numpy.ascontiguousarray(scores, dtype=numpy.float32)
    cdef const float[:, ::1] T = numpy.ascontiguousarray(trans, dtype=numpy.float32)
    cdef const float[::1] P = numpy.ascontiguousarray(init, dtype=numpy.float32)
    cdef const int[::1] L = numpy.ascontiguousarray(lengths, dtype=numpy.int32)
    cdef int N = S.shape[0]
    cdef int M = S.shape[1]
    if T.shape[0] != M or T.shape[1] != M or P.shape[0] != M:
        raise ValueError(f"trans must be ({M}, {M}) and init ({M},), got "
                         f"{numpy.shape(trans)} and ({P.shape[0]},)")
    lengths_np = numpy.asarray(L)
    if (lengths_np < 0).any() or int(lengths_np.sum()) != N:
        raise ValueError(f"lengths sum to {int(lengths_np.sum())} but scores has {N} rows")
    dummy = numpy.zeros((1,), dtype=numpy.int32)
    cdef int use_cost = cost_gold is not None
    cdef int use_allowed = allowed is not None
    cdef const int[::1] G = (numpy.ascontiguousarray(cost_gold, dtype=numpy.int32)
                             if use_cost else dummy)
    cdef const int[::1] C = (numpy.ascontiguousarray(allowed, dtype=numpy.int32)
                             if use_allowed else dummy)
    if (use_cost and G.shape[0] != N) or (use_allowed and C.shape[0] != N):
        raise ValueError("cost_gold and allowed must have one entry per token")
    if use_allowed and M > 0 and (numpy.asarray(C) >= M).any():
        raise ValueError(f"allowed labels must be < {M}")
    paths = numpy.zeros((N,), dtype=numpy.int32)
    best_np = numpy.zeros((L.shape[0],), dtype=numpy.float32)
    delta_np = numpy.empty((max(N, 1), max(M, 1)), dtype=numpy.float32)
    cdef int[::1] out = paths
    cdef float[::1] best = best_np
    cdef float[:, ::1] delta = delta_np
    cdef int b, start = 0
    cdef int B = L.shape[0]
    if M == 0:
        return paths, best_np
    with nogil:
        for b in range(B):
            if L[b] > 0:
                _viterbi_one(S, T, P, G, C, cost, use_cost, use_allowed, start, L[b],
                             delta, out, best, b)
            start += L[b]
    return paths, best_np

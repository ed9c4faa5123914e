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

``viterbi_restricted`` decodes with a candidate set per token (a tag
dictionary, Ratnaparkhi 1996; Collins 2002): token t may only take the labels
``cand_tags[cand_offsets[t]:cand_offsets[t + 1]]``, and the work per token is
the product of two neighbouring candidate counts instead of M². With every
label a candidate of every token it is the ordinary Viterbi.
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


cdef void _restricted_one(const float[:, ::1] scores, const float[:, ::1] trans,
                          const float[::1] init, const int[::1] cost_gold, float cost,
                          int use_cost, const int[::1] offs, const int[::1] tags,
                          int start, int length, float[::1] delta, int[::1] back,
                          int[::1] out, float[::1] best, int b) noexcept nogil:
    # delta and back are indexed by candidate slot (positions in ``tags``);
    # back[j] is the slot of the best predecessor of slot j.
    cdef int i, t, j, k, y, arg
    cdef float v, top
    t = start
    for j in range(offs[t], offs[t + 1]):
        y = tags[j]
        delta[j] = _emission(scores, cost_gold, cost, use_cost, t, y) + init[y]
        back[j] = -1
    for i in range(1, length):
        t = start + i
        for j in range(offs[t], offs[t + 1]):
            y = tags[j]
            top = -INFINITY
            arg = offs[t - 1]
            for k in range(offs[t - 1], offs[t]):
                v = delta[k] + trans[tags[k], y]
                if v > top:
                    top = v
                    arg = k
            delta[j] = top + _emission(scores, cost_gold, cost, use_cost, t, y)
            back[j] = arg
    t = start + length - 1
    top = -INFINITY
    arg = offs[t]
    for j in range(offs[t], offs[t + 1]):
        if delta[j] > top:
            top = delta[j]
            arg = j
    best[b] = top
    for i in range(length - 1, -1, -1):
        out[start + i] = tags[arg]
        arg = back[arg]


cdef void _candidate_dots(const float[:, ::1] E, const float[:, ::1] At,
                          const int[::1] offs, const int[::1] tags,
                          const unsigned char[::1] dense, float[:, ::1] out) noexcept nogil:
    cdef int N = E.shape[0]
    cdef int d = E.shape[1]
    cdef int t, j, k, y
    cdef float a0, a1, a2, a3
    cdef const float* e
    cdef const float* a
    for t in range(N):
        if dense[t]:
            continue
        e = &E[t, 0]
        for j in range(offs[t], offs[t + 1]):
            y = tags[j]
            a = &At[y, 0]
            a0 = a1 = a2 = a3 = 0.0  # four partial sums: independent multiply-adds
            k = 0
            while k + 4 <= d:
                a0 = a0 + e[k] * a[k]
                a1 = a1 + e[k + 1] * a[k + 1]
                a2 = a2 + e[k + 2] * a[k + 2]
                a3 = a3 + e[k + 3] * a[k + 3]
                k += 4
            while k < d:
                a0 = a0 + e[k] * a[k]
                k += 1
            out[t, y] = (a0 + a1) + (a2 + a3)


def candidate_emissions(E, A, cand_offsets, cand_tags):
    """Emission scores ``S[t, y] = e_tᵀ a_y`` (Srikumar & Manning 2014, eq. 3,
    for an atomic part) for each token's candidate labels only; every other
    entry of the (N, M) result is -inf, so the work is d per candidate
    instead of d·M per token. ``E`` is (N, d), ``A`` (d, M). Rows with more
    than a quarter of the labels as candidates (unknown words) are computed
    whole, by a matrix product."""
    cdef const float[:, ::1] Ec = numpy.ascontiguousarray(E, dtype=numpy.float32)
    cdef const float[:, ::1] At = numpy.ascontiguousarray(numpy.asarray(A).T, dtype=numpy.float32)
    cdef const int[::1] O = numpy.ascontiguousarray(cand_offsets, dtype=numpy.int32)
    cdef const int[::1] C = numpy.ascontiguousarray(cand_tags, dtype=numpy.int32)
    cdef int N = Ec.shape[0]
    cdef int M = At.shape[0]
    if At.shape[1] != Ec.shape[1]:
        raise ValueError(f"E is (N, {Ec.shape[1]}) but A has {At.shape[1]} rows")
    _check_candidates(O, C, N, M)
    out_np = numpy.full((N, M), -numpy.inf, dtype=numpy.float32)
    dense_np = numpy.diff(numpy.asarray(O)) * 4 > M
    if dense_np.any():
        out_np[dense_np] = numpy.asarray(Ec)[dense_np] @ numpy.asarray(At).T
    cdef const unsigned char[::1] dense = dense_np.view(numpy.uint8)
    cdef float[:, ::1] out = out_np
    with nogil:
        _candidate_dots(Ec, At, O, C, dense, out)
    return out_np


def _check_candidates(const int[::1] O, const int[::1] C, int N, int M):
    offs_np, tags_np = numpy.asarray(O), numpy.asarray(C)
    if O.shape[0] != N + 1 or offs_np[0] != 0 or offs_np[N] != C.shape[0]:
        raise ValueError(f"cand_offsets must have N + 1 = {N + 1} entries from 0 to "
                         f"len(cand_tags) = {C.shape[0]}, got {O.shape[0]} entries")
    if N and (numpy.diff(offs_np) < 1).any():
        raise ValueError("every token needs at least one candidate label "
                         "(cand_offsets must be strictly increasing)")
    if C.shape[0] and (tags_np.min() < 0 or tags_np.max() >= M):
        raise ValueError(f"candidate labels must lie in [0, {M}), got "
                         f"[{tags_np.min()}, {tags_np.max()}]")


def viterbi_restricted(scores, lengths, trans, init, cand_offsets, cand_tags,
                       cost_gold=None, float cost=1.0):
    """Best label sequence of every sequence in the batch with each token's
    labels restricted to its candidates (see the module docstring; the
    candidates of token t are ``cand_tags[cand_offsets[t]:cand_offsets[t+1]]``,
    at least one per token). ``cost_gold`` and ``cost`` as for
    :func:`viterbi_batch`. Returns ``(paths, best_scores)``."""
    cdef const float[:, ::1] S = numpy.ascontiguousarray(scores, dtype=numpy.float32)
    cdef const float[:, ::1] T = numpy.ascontiguousarray(trans, dtype=numpy.float32)
    cdef const float[::1] P = numpy.ascontiguousarray(init, dtype=numpy.float32)
    cdef const int[::1] L = numpy.ascontiguousarray(lengths, dtype=numpy.int32)
    cdef const int[::1] O = numpy.ascontiguousarray(cand_offsets, dtype=numpy.int32)
    cdef const int[::1] C = numpy.ascontiguousarray(cand_tags, dtype=numpy.int32)
    cdef int N = S.shape[0]
    cdef int M = S.shape[1]
    _check_shapes(S, T, P, L, trans)
    _check_candidates(O, C, N, M)
    dummy = numpy.zeros((1,), dtype=numpy.int32)
    cdef int use_cost = cost_gold is not None
    cdef const int[::1] G = (numpy.ascontiguousarray(cost_gold, dtype=numpy.int32)
                             if use_cost else dummy)
    if use_cost and G.shape[0] != N:
        raise ValueError("cost_gold must have one entry per token")
    paths = numpy.zeros((N,), dtype=numpy.int32)
    best_np = numpy.zeros((L.shape[0],), dtype=numpy.float32)
    delta_np = numpy.empty((max(C.shape[0], 1),), dtype=numpy.float32)
    back_np = numpy.empty((max(C.shape[0], 1),), dtype=numpy.int32)
    cdef int[::1] out = paths
    cdef float[::1] best = best_np
    cdef float[::1] delta = delta_np
    cdef int[::1] back = back_np
    cdef int b, start = 0
    cdef int B = L.shape[0]
    with nogil:
        for b in range(B):
            if L[b] > 0:
                _restricted_one(S, T, P, G, cost, use_cost, O, C, start, L[b],
                                delta, back, out, best, b)
            start += L[b]
    return paths, best_np


def _check_shapes(const float[:, ::1] S, const float[:, ::1] T, const float[::1] P,
                  const int[::1] L, trans):
    cdef int N = S.shape[0]
    cdef int M = S.shape[1]
    if T.shape[0] != M or T.shape[1] != M or P.shape[0] != M:
        raise ValueError(f"trans must be ({M}, {M}) and init ({M},), got "
                         f"{numpy.shape(trans)} and ({P.shape[0]},)")
    lengths_np = numpy.asarray(L)
    if (lengths_np < 0).any() or int(lengths_np.sum()) != N:
        raise ValueError(f"lengths sum to {int(lengths_np.sum())} but scores has {N} rows")


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
    _check_shapes(S, T, P, L, trans)
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

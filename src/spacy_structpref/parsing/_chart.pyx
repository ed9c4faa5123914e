# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""CKY inside/outside over a binarised PCFG with collapsed unary chains.

Each cell holds two layers over the grammar's states: ``pre`` (built by a
binary rule, or a tag over its word) and ``fin`` (``pre`` plus at most one
chain rule on top); binary rules combine ``fin`` items. Values are scaled per
cell: the true inside score is ``value * exp(scale[cell])``, and each cell is
renormalised so its best ``fin`` value is 1, so long sentences neither
underflow nor overflow. A beam drops items below ``beam`` times the best of
their layer in the cell. The outside pass recomputes the same loops top-down
with outside values normalised so that ``inside * outside`` is the posterior,
and emits every hyperedge whose posterior reaches the threshold.
"""
import numpy as np
cimport numpy as cnp
from libc.math cimport exp, log, INFINITY
from libc.stdlib cimport realloc, free

ctypedef cnp.int32_t i32


cdef inline Py_ssize_t cidx(Py_ssize_t i, Py_ssize_t j, Py_ssize_t n) noexcept nogil:
    # Triangular index of span [i, j), 0 <= i < j <= n.
    return i * n - (i * (i - 1)) // 2 + (j - i - 1)


cdef inline double touched_max(double[:, ::1] layer, Py_ssize_t cell, i32[::1] touched,
                               Py_ssize_t nt) noexcept nogil:
    # Best value of a cell's layer among the states written in it.
    cdef double best = 0.0
    cdef Py_ssize_t q
    for q in range(nt):
        if layer[cell, touched[q]] > best:
            best = layer[cell, touched[q]]
    return best


def inside(const i32[::1] bl_start, const i32[::1] b_right, const i32[::1] b_parent,
           const double[::1] b_prob, const i32[::1] c_start, const i32[::1] c_top,
           const double[::1] c_prob, const double[:, ::1] lex, double beam):
    """Returns (pre, fin, scale, act, nact): scaled inside layers per cell,
    the cell's log scale, and per cell the states with ``fin > 0``."""
    cdef Py_ssize_t n = lex.shape[0], S = lex.shape[1]
    cdef Py_ssize_t nc = n * (n + 1) // 2
    pre_a = np.zeros((nc, S), dtype=np.float64)
    fin_a = np.zeros((nc, S), dtype=np.float64)
    scale_a = np.zeros(nc, dtype=np.float64)
    act_a = np.zeros((nc, S), dtype=np.int32)
    nact_a = np.zeros(nc, dtype=np.int32)
    mark_a = np.zeros(S, dtype=np.int8)
    touched_a = np.zeros(S, dtype=np.int32)
    sc_a = np.zeros(max(n, 1), dtype=np.float64)
    cdef double[:, ::1] pre = pre_a
    cdef double[:, ::1] fin = fin_a
    cdef double[::1] scale = scale_a
    cdef i32[:, ::1] act = act_a
    cdef i32[::1] nact = nact_a
    cdef signed char[::1] mark = mark_a
    cdef i32[::1] touched = touched_a
    cdef double[::1] sc = sc_a
    cdef Py_ssize_t span, i, j, k, cell, L, R, a, b, r, p, t, nt, nt0, q
    cdef double cmax, f, lb, rv, pmax, fmax, v
    with nogil:
        for span in range(1, n + 1):
            for i in range(0, n - span + 1):
                j = i + span
                cell = cidx(i, j, n)
                nt = 0
                cmax = 0.0
                if span == 1:
                    for p in range(S):
                        if lex[i, p] > 0.0:
                            pre[cell, p] = lex[i, p]
                            touched[nt] = p
                            mark[p] = 1
                            nt += 1
                else:
                    cmax = -INFINITY
                    for k in range(i + 1, j):
                        L = cidx(i, k, n)
                        R = cidx(k, j, n)
                        if nact[L] == 0 or nact[R] == 0:
                            sc[k - i - 1] = -INFINITY
                            continue
                        sc[k - i - 1] = scale[L] + scale[R]
                        if sc[k - i - 1] > cmax:
                            cmax = sc[k - i - 1]
                    if cmax == -INFINITY:
                        continue
                    for k in range(i + 1, j):
                        if sc[k - i - 1] == -INFINITY:
                            continue
                        f = exp(sc[k - i - 1] - cmax)
                        if f < 1e-250:
                            continue
                        L = cidx(i, k, n)
                        R = cidx(k, j, n)
                        for a in range(nact[L]):
                            b = act[L, a]
                            lb = fin[L, b] * f
                            for r in range(bl_start[b], bl_start[b + 1]):
                                rv = fin[R, b_right[r]]
                                if rv != 0.0:
                                    p = b_parent[r]
                                    pre[cell, p] += lb * b_prob[r] * rv
                                    if mark[p] == 0:
                                        mark[p] = 1
                                        touched[nt] = p
                                        nt += 1
                # beam on the pre layer
                pmax = touched_max(pre, cell, touched, nt)
                if pmax <= 0.0:
                    for q in range(nt):
                        mark[touched[q]] = 0
                        pre[cell, touched[q]] = 0.0
                    continue
                nt0 = nt
                for q in range(nt0):
                    p = touched[q]
                    v = pre[cell, p]
                    if v < beam * pmax:
                        pre[cell, p] = 0.0
                        v = 0.0
                    fin[cell, p] += v
                    if v > 0.0:
                        for r in range(c_start[p], c_start[p + 1]):
                            t = c_top[r]
                            fin[cell, t] += v * c_prob[r]
                            if mark[t] == 0:
                                mark[t] = 1
                                touched[nt] = t
                                nt += 1
                fmax = touched_max(fin, cell, touched, nt)
                for q in range(nt):
                    p = touched[q]
                    mark[p] = 0
                    if fin[cell, p] < beam * fmax:
                        fin[cell, p] = 0.0
                    else:
                        fin[cell, p] /= fmax
                        act[cell, nact[cell]] = p
                        nact[cell] += 1
                    pre[cell, p] /= fmax
                scale[cell] = cmax + log(fmax)
    return pre_a, fin_a, scale_a, act_a, nact_a


cdef struct Buf:
    i32* ints
    double* vals
    Py_ssize_t n, cap, width


cdef int buf_push(Buf* buf, i32 a, i32 b, i32 c, i32 d, double v) noexcept nogil:
    cdef i32* ni
    cdef double* nv
    if buf.n == buf.cap:
        buf.cap = buf.cap * 2 + 64
        ni = <i32*> realloc(buf.ints, buf.cap * 4 * sizeof(i32))
        nv = <double*> realloc(buf.vals, buf.cap * sizeof(double))
        if ni == NULL or nv == NULL:
            return -1
        buf.ints, buf.vals = ni, nv
    buf.ints[4 * buf.n] = a
    buf.ints[4 * buf.n + 1] = b
    buf.ints[4 * buf.n + 2] = c
    buf.ints[4 * buf.n + 3] = d
    buf.vals[buf.n] = v
    buf.n += 1
    return 0


cdef object buf_take(Buf* buf):
    ints = np.empty((buf.n, 4), dtype=np.int32)
    vals = np.empty(buf.n, dtype=np.float64)
    cdef Py_ssize_t q
    cdef i32[:, ::1] iv = ints
    cdef double[::1] vv = vals
    for q in range(buf.n):
        iv[q, 0] = buf.ints[4 * q]
        iv[q, 1] = buf.ints[4 * q + 1]
        iv[q, 2] = buf.ints[4 * q + 2]
        iv[q, 3] = buf.ints[4 * q + 3]
        vv[q] = buf.vals[q]
    free(buf.ints)
    free(buf.vals)
    buf.ints = NULL
    buf.vals = NULL
    return ints, vals


def outside(const i32[::1] bl_start, const i32[::1] b_right, const i32[::1] b_parent,
            const double[::1] b_prob, const i32[::1] c_start, const i32[::1] c_top,
            const double[::1] c_prob, double[:, ::1] pre, double[:, ::1] fin,
            const double[::1] scale, const i32[:, ::1] act, const i32[::1] nact,
            int root, double threshold):
    """Posterior of every chart hyperedge; returns the ones with posterior >=
    ``threshold`` as ``(binary, chains, lexical)``, each ``(int rows,
    posteriors)``: binary rows ``(i, k, j, rule)``, chain rows ``(i, j,
    chain, 0)``, lexical rows ``(i, tag, 0, 0)``; rule and chain indices are
    positions in the sorted arrays."""
    cdef Py_ssize_t nc = pre.shape[0], S = pre.shape[1]
    cdef Py_ssize_t n = 0
    while n * (n + 1) // 2 < nc:
        n += 1
    ofin_a = np.zeros((nc, S), dtype=np.float64)
    opre_a = np.zeros((nc, S), dtype=np.float64)
    cdef double[:, ::1] ofin = ofin_a
    cdef double[:, ::1] opre = opre_a
    cdef Buf bb, cb, lb_
    bb.ints = NULL; bb.vals = NULL; bb.n = 0; bb.cap = 0
    cb.ints = NULL; cb.vals = NULL; cb.n = 0; cb.cap = 0
    lb_.ints = NULL; lb_.vals = NULL; lb_.n = 0; lb_.cap = 0
    cdef Py_ssize_t span, i, j, k, cell, L, R, a, b, c, r, p, t
    cdef double o, g, lv, rv, oh, w, mu
    cdef int err = 0
    top = cidx(0, n, n)
    if fin[top, root] <= 0.0:
        return None
    ofin[top, root] = 1.0 / fin[top, root]
    with nogil:
        for span in range(n, 0, -1):
            for i in range(0, n - span + 1):
                j = i + span
                cell = cidx(i, j, n)
                if nact[cell] == 0:
                    continue
                # chain rules: F(top) <- P(bottom)
                for b in range(S):
                    if pre[cell, b] > 0.0:
                        for r in range(c_start[b], c_start[b + 1]):
                            o = ofin[cell, c_top[r]]
                            if o > 0.0:
                                opre[cell, b] += o * c_prob[r]
                                mu = o * c_prob[r] * pre[cell, b]
                                if mu >= threshold:
                                    err |= buf_push(&cb, i, j, r, 0, mu)
                if span == 1:
                    for t in range(S):
                        if pre[cell, t] > 0.0:
                            mu = (ofin[cell, t] + opre[cell, t]) * pre[cell, t]
                            if mu >= threshold:
                                err |= buf_push(&lb_, i, t, 0, 0, mu)
                    continue
                for k in range(i + 1, j):
                    L = cidx(i, k, n)
                    R = cidx(k, j, n)
                    if nact[L] == 0 or nact[R] == 0:
                        continue
                    g = exp(scale[L] + scale[R] - scale[cell])
                    for a in range(nact[L]):
                        b = act[L, a]
                        lv = fin[L, b]
                        for r in range(bl_start[b], bl_start[b + 1]):
                            c = b_right[r]
                            rv = fin[R, c]
                            if rv == 0.0:
                                continue
                            p = b_parent[r]
                            if pre[cell, p] == 0.0:
                                continue
                            oh = ofin[cell, p] + opre[cell, p]
                            if oh == 0.0:
                                continue
                            w = oh * b_prob[r] * g
                            ofin[L, b] += w * rv
                            ofin[R, c] += w * lv
                            mu = w * lv * rv
                            if mu >= threshold:
                                err |= buf_push(&bb, i, k, j, r, mu)
    if err:
        free(bb.ints); free(bb.vals); free(cb.ints); free(cb.vals); free(lb_.ints); free(lb_.vals)
        raise MemoryError("out of memory while collecting chart hyperedges")
    return buf_take(&bb), buf_take(&cb), buf_take(&lb_)

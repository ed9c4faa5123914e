# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Summed embedding rows of sparse indicator features, without the GIL: the
forward pass of :func:`~.sparse_features.SparseFeatures` (a linear model over
indicators is the sum of the weight rows of the indicators that fire)."""
import numpy


def gather_sum(table, rows):
    """``out[t] = Σ_k table[rows[t, k]]`` for a (V, d) float32 table and
    (N, K) int32 row ids in [0, V)."""
    rows = numpy.ascontiguousarray(rows, dtype=numpy.int32)
    if rows.ndim != 2:
        raise ValueError(f"rows must be (N, K), got shape {rows.shape}")
    N, K = rows.shape
    return gather_sum_ragged(table, rows.ravel(), numpy.arange(N + 1, dtype=numpy.int32) * K)


cdef void _gather_sum_ragged(const float[:, ::1] E, const int[::1] rows,
                             const int[::1] offs, float[:, ::1] out) noexcept nogil:
    cdef int N = offs.shape[0] - 1
    cdef int d = E.shape[1]
    cdef int t, k, j
    cdef const float* src
    cdef float* dst
    for t in range(N):
        dst = &out[t, 0]
        for j in range(d):
            dst[j] = 0.0
        for k in range(offs[t], offs[t + 1]):
            src = &E[rows[k], 0]
            for j in range(d):
                dst[j] += src[j]


def gather_sum_ragged(table, rows, offsets):
    """``out[t] = Σ table[rows[offsets[t]:offsets[t + 1]]]``: a varying
    number of rows per output (e.g. the words of a document)."""
    cdef const float[:, ::1] E = numpy.ascontiguousarray(table, dtype=numpy.float32)
    cdef const int[::1] R = numpy.ascontiguousarray(rows, dtype=numpy.int32)
    cdef const int[::1] O = numpy.ascontiguousarray(offsets, dtype=numpy.int32)
    rows_np, offs_np = numpy.asarray(R), numpy.asarray(O)
    if O.shape[0] < 1 or offs_np[0] != 0 or offs_np[-1] != R.shape[0] or (numpy.diff(offs_np) < 0).any():
        raise ValueError(f"offsets must rise from 0 to len(rows) = {R.shape[0]}")
    if R.shape[0] and (rows_np.min() < 0 or rows_np.max() >= E.shape[0]):
        raise ValueError(f"row ids must lie in [0, {E.shape[0]}), got "
                         f"[{rows_np.min()}, {rows_np.max()}]")
    out_np = numpy.empty((O.shape[0] - 1, E.shape[1]), dtype=numpy.float32)
    cdef float[:, ::1] out = out_np
    if E.shape[1]:
        with nogil:
            _gather_sum_ragged(E, R, O, out)
    return out_np

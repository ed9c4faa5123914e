# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The recursive network's forward and backward passes over a label DAG
(Menchetti et al. 2005, eq. 5), node by node without the GIL:

    u(v) = tanh(ω_0 + Ω z(label(v)) + Σ_k W_k u(c_k(v)))

``order`` lists the node ids children first (e.g. level by level);
children rows are left-packed, ``-1`` padded. Everything is double
precision; the Python side converts and checks shapes and ids."""
import numpy as np
from libc.math cimport tanh


def forward(const long[::1] order, const long[::1] labels, const long[:, ::1] children,
            const double[:, ::1] E, const double[:, :, ::1] W, const double[::1] b,
            double[:, ::1] U) -> None:
    """Fill ``U`` (n_nodes × H) with every node's state."""
    # W_k transposed: the inner loop runs over contiguous output units, no reduction
    cdef const double[:, :, ::1] WT = np.ascontiguousarray(np.transpose(W, (0, 2, 1)))
    with nogil:
        _forward(order, labels, children, E, WT, b, U)


cdef void _forward(const long[::1] order, const long[::1] labels, const long[:, ::1] children,
                   const double[:, ::1] E, const double[:, :, ::1] WT, const double[::1] b,
                   double[:, ::1] U) noexcept nogil:
    cdef Py_ssize_t n = order.shape[0], K = children.shape[1], H = U.shape[1]
    cdef Py_ssize_t i, k, j, l
    cdef long v, c, lab
    cdef double x
    cdef double* out
    cdef const double* row
    for i in range(n):
        v = order[i]
        lab = labels[v]
        out = &U[v, 0]
        for j in range(H):
            out[j] = E[lab, j] + b[j]
        for k in range(K):
            c = children[v, k]
            if c < 0:
                break
            for l in range(H):
                x = U[c, l]
                row = &WT[k, l, 0]
                for j in range(H):
                    out[j] += row[j] * x
        for j in range(H):
            out[j] = tanh(out[j])


def backward(const long[::1] order, const long[::1] labels, const long[:, ::1] children,
             const double[:, :, ::1] W, const double[:, ::1] U, double[:, ::1] dU,
             double[:, ::1] dE, double[:, :, ::1] dW, double[::1] db) -> None:
    """Backpropagate ``dU`` (the loss gradient at each node's state, filled
    in at the roots; used as scratch) through the DAG, adding the gradients
    of ``E``, ``W`` and ``b`` to ``dE``, ``dW`` and ``db``."""
    cdef double[::1] d_pre = np.zeros(U.shape[1])
    with nogil:
        _backward(order, labels, children, W, U, dU, dE, dW, db, d_pre)


cdef void _backward(const long[::1] order, const long[::1] labels, const long[:, ::1] children,
                    const double[:, :, ::1] W, const double[:, ::1] U, double[:, ::1] dU,
                    double[:, ::1] dE, double[:, :, ::1] dW, double[::1] db,
                    double[::1] d_pre) noexcept nogil:
    cdef Py_ssize_t n = order.shape[0], K = children.shape[1], H = U.shape[1]
    cdef Py_ssize_t i, k, j, l
    cdef long v, c, lab
    cdef double g
    cdef double* dw
    cdef double* du
    cdef const double* w
    cdef const double* u
    for i in range(n - 1, -1, -1):
        v = order[i]
        lab = labels[v]
        for j in range(H):
            d_pre[j] = dU[v, j] * (1.0 - U[v, j] * U[v, j])
            db[j] += d_pre[j]
            dE[lab, j] += d_pre[j]
        for k in range(K):
            c = children[v, k]
            if c < 0:
                break
            u = &U[c, 0]
            du = &dU[c, 0]
            for j in range(H):
                g = d_pre[j]
                if g == 0.0:
                    continue
                dw = &dW[k, j, 0]
                w = &W[k, j, 0]
                for l in range(H):
                    dw[l] += g * u[l]
                for l in range(H):
                    du[l] += g * w[l]

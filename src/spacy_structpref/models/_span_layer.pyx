# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The span CRF's hidden layer over every span in one pass per span: from
the fencepost projections ``a_k`` (float64), the row of span ``[i, j)`` is

    z = (a_j - a_i) + b,  r = ReLU(z),
    y = ((r - mean(r)) / sqrt(var(r) + 1e-8) * G + beta) * mask

(Stern, Andreas & Klein 2017's span difference through a ReLU layer, layer
normalisation of Ba, Kiros & Hinton 2016 as Thinc's ``LayerNorm`` computes
it, inverted dropout). Layered, as Thinc runs it, this is six passes over a
(spans, width) array with a temporary each, and the gradient of the span
differences a dense (n + 1, n + 1, width) array per sentence; here forward
and backward read each span's row once and scatter its gradient onto its two
fenceposts. Moments and gradient sums accumulate in double precision. The
caller checks shapes and dtypes; nothing here raises."""
from cython cimport floating
from libc.math cimport sqrt
from libc.stdlib cimport free, malloc


def span_layer_forward(const double[:, ::1] A, const Py_ssize_t[::1] I, const Py_ssize_t[::1] J,
                       const floating[::1] b, const floating[::1] G, const floating[::1] beta,
                       const floating[:, ::1] mask, bint masked,
                       floating[:, ::1] R, double[::1] mu, double[::1] rstd, floating[:, ::1] Y):
    """Fill ``R`` (the ReLU's output), ``mu`` and ``rstd`` (each row's mean
    and 1 / standard deviation) and ``Y`` for the spans ``(I[s], J[s])``
    (rows of ``A``); ``mask`` is read only when ``masked``."""
    cdef Py_ssize_t S = I.shape[0], H = A.shape[1], s, h, i, j
    cdef double z, mean, var, d, inv
    with nogil:
        for s in range(S):
            i, j = I[s], J[s]
            mean = 0.0
            for h in range(H):
                z = <floating>(A[j, h] - A[i, h]) + b[h]
                if z < 0.0:
                    z = 0.0
                R[s, h] = <floating>z
                mean += R[s, h]
            mean /= H
            var = 0.0
            for h in range(H):
                d = R[s, h] - mean
                var += d * d
            inv = 1.0 / sqrt(var / H + 1e-8)
            mu[s], rstd[s] = mean, inv
            for h in range(H):
                z = (R[s, h] - mean) * inv * G[h] + beta[h]
                if masked:
                    z = z * mask[s, h]
                Y[s, h] = <floating>z


def span_layer_backward(const floating[:, ::1] dY, const floating[:, ::1] mask, bint masked,
                        const floating[:, ::1] R, const double[::1] mu, const double[::1] rstd,
                        const floating[::1] G, const Py_ssize_t[::1] I, const Py_ssize_t[::1] J,
                        double[:, ::1] dA, double[::1] db, double[::1] dG, double[::1] dbeta):
    """Add the gradients of ``A`` (the fenceposts' rows), ``b``, ``G`` and
    ``beta`` for the output gradient ``dY``, given the forward's ``R``,
    ``mu`` and ``rstd`` (layer norm's input gradient as Thinc's: with x̂ the
    normalised row and g the gain times the output gradient,
    ``rstd * (g - mean(g) - x̂ * mean(g * x̂))``)."""
    cdef Py_ssize_t S = I.shape[0], H = R.shape[1], s, h, i, j
    cdef double dy, xhat, m1, m2, dz
    cdef double* g = <double*>malloc(max(H, 1) * sizeof(double))
    cdef double* xh = <double*>malloc(max(H, 1) * sizeof(double))
    if g == NULL or xh == NULL:
        free(g)
        free(xh)
        raise MemoryError()
    with nogil:
        for s in range(S):
            i, j = I[s], J[s]
            m1 = 0.0
            m2 = 0.0
            for h in range(H):
                dy = dY[s, h]
                if masked:
                    dy = dy * mask[s, h]
                xhat = (R[s, h] - mu[s]) * rstd[s]
                dbeta[h] += dy
                dG[h] += dy * xhat
                g[h] = dy * G[h]
                xh[h] = xhat
                m1 += g[h]
                m2 += g[h] * xhat
            m1 /= H
            m2 /= H
            for h in range(H):
                if R[s, h] > 0.0:
                    dz = rstd[s] * (g[h] - m1 - xh[h] * m2)
                    db[h] += dz
                    dA[j, h] += dz
                    dA[i, h] -= dz
    free(g)
    free(xh)

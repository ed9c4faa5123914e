# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The recursive network's forward and backward passes over a label DAG
(Menchetti et al. 2005, eq. 5), node by node without the GIL:

    u(v) = tanh(ω_0 + Ω z(label(v)) + Σ_k W_k u(c_k(v)))

``order`` lists the node ids children first (e.g. level by level);
children rows are left-packed, ``-1`` padded. Everything is double
precision; the Python side converts and checks shapes and ids.

``NodeTable`` hash-conses the label DAG's nodes, ``level_plan`` lays a
DAG out for the batched passes of ``recursive.py``, ``merge_layouts``
joins the layouts of a minibatch's DAGs, and ``plan_forward`` /
``plan_backward`` are those passes in single precision on a CPU (C
compiled for AVX-512 and AVX2 beside the baseline): every height in one call, without
the per-height array calls that dominate at a state size of 25."""
import numpy as np
cimport numpy as cnp
from libc.math cimport tanh
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc, realloc

cnp.import_array()


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


cdef extern from *:
    """
    /* The batched passes as C over raw arrays, compiled three times where
       GCC can (x86-64 Linux): for AVX-512, for AVX2 with FMA and for the
       baseline, the best the CPU runs chosen when the module loads
       (target_clones). At a state of 25 AVX2 makes the passes about 1.4
       times as fast as the baseline, and AVX-512 the forward pass 1.3
       times as fast again (its 32 outputs in two registers); a build for
       the baseline alone would leave that on every user's machine. GCC
       if-converts tanh's clamps only without trapping math. */
    #include <string.h>
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC push_options
    #pragma GCC optimize("no-trapping-math")
    #endif
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
    #define SPP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
    #else
    #define SPP_CLONES
    #endif

    /* tanh in single precision as a rational function of the clamped input
       (the minimax approximation of Eigen's generic_fast_tanh_float, within
       4e-7 of tanh), written as plain C arithmetic that the compiler
       vectorizes: libm's tanhf, called per element, costs more than the
       matrix products */
    static inline void spp_tanh_inplace(float* x, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) {
            const float v = x[i];
            float c = v < 7.90531110763549805f ? v : 7.90531110763549805f;
            c = c > -7.90531110763549805f ? c : -7.90531110763549805f;
            const float x2 = c * c;
            float p = -2.76076847742355e-16f;
            p = p * x2 + 2.00018790482477e-13f;
            p = p * x2 - 8.60467152213735e-11f;
            p = p * x2 + 5.12229709037114e-08f;
            p = p * x2 + 1.48572235717979e-05f;
            p = p * x2 + 6.37261928875436e-04f;
            p = p * x2 + 4.89352455891786e-03f;
            float q = 1.19825839466702e-06f;
            q = q * x2 + 1.18534705686654e-04f;
            q = q * x2 + 2.26843463243900e-03f;
            q = q * x2 + 4.89352518554385e-03f;
            const float t = c * p / q;
            x[i] = fabsf(v) < 0.0004f ? v : t;
        }
    }

    /* out[0:h] = (or +=) sum_l x[l] M[l, 0:h], M with rows of `stride` >= h
       rounded up to 32 floats (zero padded): BLOCK outputs at a time held in
       registers over the whole sum. Measured at a state of 25: the forward
       pass, storing its outputs, runs fastest with 32 (two or four
       independent vector sums, where one would wait on its own latency at
       every step), the backward pass, adding into rows of dX, with 16
       (0.75 -> 0.58 ms a minibatch of the 300-sentence bench with AVX2,
       0.53 with AVX-512). */
    #define SPP_VECMAT(NAME, BLOCK, OP) \
    static inline void NAME(const float* x, const float* M, Py_ssize_t h, Py_ssize_t stride, float* out) { \
        for (Py_ssize_t jb = 0; jb < h; jb += BLOCK) { \
            float acc[BLOCK] = {0}; \
            for (Py_ssize_t l = 0; l < h; l++) { \
                const float xl = x[l]; \
                const float* m = M + l * stride + jb; \
                for (int jj = 0; jj < BLOCK; jj++) \
                    acc[jj] += m[jj] * xl; \
            } \
            const Py_ssize_t n = h - jb < BLOCK ? h - jb : BLOCK; \
            for (Py_ssize_t jj = 0; jj < n; jj++) \
                out[jb + jj] OP acc[jj]; \
        } \
    }
    SPP_VECMAT(spp_vecmat_store, 32, =)
    SPP_VECMAT(spp_vecmat_add, 16, +=)

    /* Over row r's edges (pair_of: rows x width, -1 after the last): add
       each pair's row into x (gather: the forward pass) or x into each
       pair's row (the backward pass) */
    static inline void spp_edge_sums(const int* pair_of, Py_ssize_t width, Py_ssize_t r, float* pairs,
                                     Py_ssize_t h, float* x, int gather) {
        for (Py_ssize_t k = 0; k < width; k++) {
            const int p = pair_of[r * width + k];
            if (p < 0)
                break;
            float* row = pairs + (Py_ssize_t)p * h;
            if (gather)
                for (Py_ssize_t j = 0; j < h; j++)
                    x[j] += row[j];
            else
                for (Py_ssize_t j = 0; j < h; j++)
                    row[j] += x[j];
        }
    }

    /* See plan_forward; WT: each W_k transposed, rows of `stride` floats;
       pair_bounds: width x (n_levels + 1) */
    SPP_CLONES static void spp_plan_forward(const int* labels, const int* pair_of, Py_ssize_t width,
                                            const int* pair_child, const long* level_ends, Py_ssize_t n_levels,
                                            const long* pair_bounds, const float* E, const float* WT,
                                            Py_ssize_t stride, const float* b, float* U, float* products,
                                            Py_ssize_t h) {
        Py_ssize_t start = 0;
        for (Py_ssize_t lev = 0; lev < n_levels; lev++) {
            for (Py_ssize_t r = start; r < level_ends[lev]; r++) {
                float* out = U + r * h;
                const float* e = E + (Py_ssize_t)labels[r] * h;
                for (Py_ssize_t j = 0; j < h; j++)
                    out[j] = e[j] + b[j];
                spp_edge_sums(pair_of, width, r, products, h, out, 1);
            }
            if (level_ends[lev] > start)
                spp_tanh_inplace(U + start * h, (level_ends[lev] - start) * h);
            start = level_ends[lev];
            /* W_k u(c) of the pairs whose child has this height (their parents are all higher) */
            for (Py_ssize_t k = 0; k < width; k++)
                for (long p = pair_bounds[k * (n_levels + 1) + lev]; p < pair_bounds[k * (n_levels + 1) + lev + 1]; p++)
                    spp_vecmat_store(U + (Py_ssize_t)pair_child[p] * h, WT + k * h * stride, h, stride, products + p * h);
        }
    }

    /* dW_k += sum over the pairs p of position k of d_pairs[p] u(child p)^T
       (h x h each): the pairs taken in chunks copied to rows of `stride`
       floats, zeros past h (a child's state read in place, where a BLAS
       product would need the children gathered first), SPP_GRAD_ROWS rows
       by 32 columns of the sum held in registers over a chunk */
    #define SPP_GRAD_ROWS 4
    #define SPP_GRAD_CHUNK 128
    SPP_CLONES static void spp_weight_grads(const int* pair_child, const long* pair_bounds, Py_ssize_t width,
                                        Py_ssize_t n_levels, const float* U, const float* d_pairs, Py_ssize_t h,
                                        Py_ssize_t stride, float* dW, float* cbuf, float* dbuf) {
        for (Py_ssize_t k = 0; k < width; k++) {
            const long a = pair_bounds[k * (n_levels + 1)], b = pair_bounds[k * (n_levels + 1) + n_levels];
            float* G = dW + k * h * h;
            for (long c0 = a; c0 < b; c0 += SPP_GRAD_CHUNK) {
                const Py_ssize_t n = b - c0 < SPP_GRAD_CHUNK ? b - c0 : SPP_GRAD_CHUNK;
                for (Py_ssize_t q = 0; q < n; q++) {  /* the padding stays as the caller zeroed it */
                    memcpy(cbuf + q * stride, U + (Py_ssize_t)pair_child[c0 + q] * h, h * sizeof(float));
                    memcpy(dbuf + q * stride, d_pairs + (c0 + q) * h, h * sizeof(float));
                }
                for (Py_ssize_t i0 = 0; i0 < h; i0 += SPP_GRAD_ROWS)
                    for (Py_ssize_t jb = 0; jb < h; jb += 32) {
                        float acc[SPP_GRAD_ROWS][32] = {{0}};
                        for (Py_ssize_t q = 0; q < n; q++) {
                            const float* c = cbuf + q * stride + jb;
                            const float* d = dbuf + q * stride + i0;
                            for (int r = 0; r < SPP_GRAD_ROWS; r++)
                                for (int jj = 0; jj < 32; jj++)
                                    acc[r][jj] += d[r] * c[jj];
                        }
                        const Py_ssize_t nj = h - jb < 32 ? h - jb : 32;
                        for (Py_ssize_t r = 0; r < SPP_GRAD_ROWS && i0 + r < h; r++)
                            for (Py_ssize_t jj = 0; jj < nj; jj++)
                                G[(i0 + r) * h + jb + jj] += acc[r][jj];
                    }
            }
        }
    }

    /* See plan_backward; Wp: each W_k, rows of `stride` floats */
    SPP_CLONES static void spp_plan_backward(const int* labels, const int* pair_of, Py_ssize_t width,
                                             const int* pair_child, const long* level_ends, Py_ssize_t n_levels,
                                             const long* pair_bounds, const float* Wp, Py_ssize_t stride,
                                             const float* U, float* dX, float* d_pairs, float* dE, float* db,
                                             float* dW, float* buf, Py_ssize_t h) {
        for (Py_ssize_t lev = n_levels - 1; lev >= 0; lev--) {
            /* the pairs whose child has this height: all their parents are higher, their gradients complete */
            for (Py_ssize_t k = 0; k < width; k++)
                for (long p = pair_bounds[k * (n_levels + 1) + lev]; p < pair_bounds[k * (n_levels + 1) + lev + 1]; p++)
                    spp_vecmat_add(d_pairs + p * h, Wp + k * h * stride, h, stride, dX + (Py_ssize_t)pair_child[p] * h);
            for (Py_ssize_t r = lev ? level_ends[lev - 1] : 0; r < level_ends[lev]; r++) {
                float* d = dX + r * h;
                const float* u = U + r * h;
                float* de = dE + (Py_ssize_t)labels[r] * h;
                for (Py_ssize_t j = 0; j < h; j++) {
                    d[j] *= 1 - u[j] * u[j];
                    de[j] += d[j];
                    db[j] += d[j];
                }
                spp_edge_sums(pair_of, width, r, d_pairs, h, d, 0);
            }
        }
        spp_weight_grads(pair_child, pair_bounds, width, n_levels, U, d_pairs, h, stride, dW, buf,
                         buf + SPP_GRAD_CHUNK * stride);
    }
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC pop_options
    #endif
    """
    void tanh_inplace "spp_tanh_inplace"(float* x, Py_ssize_t n) noexcept nogil
    void c_plan_forward "spp_plan_forward"(const int* labels, const int* pair_of, Py_ssize_t width,
                                           const int* pair_child, const long* level_ends, Py_ssize_t n_levels,
                                           const long* pair_bounds, const float* E, const float* WT,
                                           Py_ssize_t stride, const float* b, float* U, float* products,
                                           Py_ssize_t h) noexcept nogil
    void c_plan_backward "spp_plan_backward"(const int* labels, const int* pair_of, Py_ssize_t width,
                                             const int* pair_child, const long* level_ends, Py_ssize_t n_levels,
                                             const long* pair_bounds, const float* Wp, Py_ssize_t stride,
                                             const float* U, float* dX, float* d_pairs, float* dE, float* db,
                                             float* dW, float* buf, Py_ssize_t h) noexcept nogil
    const int GRAD_CHUNK "SPP_GRAD_CHUNK"


def padded_rows(const float[:, :, ::1] W, bint transpose):
    """Each ``W_k`` (or its transpose) with rows zero-padded to a multiple of
    32 floats, as the passes read them."""
    cdef Py_ssize_t H = W.shape[1]
    out = np.zeros((W.shape[0], H, (H + 31) // 32 * 32), dtype=np.float32)
    out[:, :, :H] = np.transpose(W, (0, 2, 1)) if transpose else W
    return out


cdef int _check_plan(const int[::1] labels, const int[:, ::1] pair_of, const int[::1] pair_child,
                     const long[::1] level_ends, const long[:, ::1] pair_bounds, Py_ssize_t n_labels,
                     Py_ssize_t n_weights, Py_ssize_t H, Py_ssize_t rows, Py_ssize_t n_pairs) except -1:
    """Shapes that fit together (ids are the layout's own: ``level_plan`` made them in range)."""
    if not (labels.shape[0] == pair_of.shape[0] == rows and pair_child.shape[0] == n_pairs
            and pair_bounds.shape[0] == pair_of.shape[1] <= n_weights
            and pair_bounds.shape[1] == level_ends.shape[0] + 1
            and (level_ends.shape[0] == 0 or level_ends[level_ends.shape[0] - 1] == rows)):
        raise ValueError("the layout's arrays, the weights and the outputs do not fit together")
    return 0


def plan_forward(const int[::1] labels, const int[:, ::1] pair_of, const int[::1] pair_child,
                 const long[::1] level_ends, const long[:, ::1] pair_bounds, const float[:, ::1] E,
                 const float[:, :, ::1] W, const float[::1] b, float[:, ::1] U, float[:, ::1] products) -> None:
    """The forward pass over a ``level_plan`` layout: fill ``U`` (rows × H)
    with every row's state and ``products`` (pairs × H) with each pair's
    ``W_k u(child)``, height by height (``level_ends``: each height's end
    row; ``labels``: each row's label id)."""
    cdef Py_ssize_t H = E.shape[1]
    if W.shape[1] != H or W.shape[2] != H or b.shape[0] != H or U.shape[1] != H or products.shape[1] != H:
        raise ValueError(f"E, W, b, U and the products must all have states of {H}")
    _check_plan(labels, pair_of, pair_child, level_ends, pair_bounds, E.shape[0], W.shape[0], H, U.shape[0],
                products.shape[0])
    cdef const float[:, :, ::1] WT = padded_rows(W, True)
    if U.shape[0] == 0:
        return
    with nogil:
        c_plan_forward(&labels[0], &pair_of[0, 0] if pair_of.shape[1] else NULL, pair_of.shape[1],
                       &pair_child[0] if pair_child.shape[0] else NULL, &level_ends[0], level_ends.shape[0],
                       &pair_bounds[0, 0] if pair_bounds.shape[0] else NULL, &E[0, 0], &WT[0, 0, 0],
                       WT.shape[2], &b[0], &U[0, 0], &products[0, 0] if products.shape[0] else NULL, H)


def plan_backward(const int[::1] labels, const int[:, ::1] pair_of, const int[::1] pair_child,
                  const long[::1] level_ends, const long[:, ::1] pair_bounds, const float[:, :, ::1] W,
                  const float[:, ::1] U, float[:, ::1] dX, float[:, ::1] d_pairs,
                  float[:, ::1] dE, float[::1] db, float[:, :, ::1] dW) -> None:
    """Backpropagation through structure over a ``level_plan`` layout,
    heights top down: ``dX`` holds the loss gradient at each row's state
    (filled in at the roots; then the gradient at its pre-activation),
    ``d_pairs`` (zeros) gets each pair's; the gradients of ``E``, ``b`` and
    ``W`` are added to ``dE``, ``db`` and ``dW`` (``dW_k = d_pairsᵀ
    U_children`` over position k's pairs, with the children's states read
    in place: 3 to 4 times as fast as gathering them for a BLAS product)."""
    cdef Py_ssize_t H = U.shape[1]
    if (W.shape[1] != H or W.shape[2] != H or dX.shape[0] != U.shape[0] or dX.shape[1] != H
            or d_pairs.shape[1] != H or dE.shape[1] != H or db.shape[0] != H
            or dW.shape[0] != W.shape[0] or dW.shape[1] != H or dW.shape[2] != H):
        raise ValueError(f"W, U, dX, d_pairs, dE, db and dW must all have states of {H}, dW as many as W")
    _check_plan(labels, pair_of, pair_child, level_ends, pair_bounds, dE.shape[0], W.shape[0], H, U.shape[0],
                d_pairs.shape[0])
    cdef const float[:, :, ::1] Wp = padded_rows(W, False)
    if U.shape[0] == 0:
        return
    cdef float[::1] buf = np.zeros(2 * GRAD_CHUNK * Wp.shape[2], dtype=np.float32)  # the chunks' padded rows
    with nogil:
        c_plan_backward(&labels[0], &pair_of[0, 0] if pair_of.shape[1] else NULL, pair_of.shape[1],
                        &pair_child[0] if pair_child.shape[0] else NULL, &level_ends[0], level_ends.shape[0],
                        &pair_bounds[0, 0] if pair_bounds.shape[0] else NULL, &Wp[0, 0, 0], Wp.shape[2], &U[0, 0],
                        &dX[0, 0], &d_pairs[0, 0] if d_pairs.shape[0] else NULL, &dE[0, 0], &db[0],
                        &dW[0, 0, 0], &buf[0], H)


def level_plan(const long[:, ::1] children, const long[::1] heights, long n_levels):
    """The layout of the batched passes. Rows: the nodes ordered by height,
    and within a height by falling number of children (counted up to the
    first -1), by a counting sort. Pairs: the distinct (child, position)
    pairs of the DAG's edges, ordered by position, then child row (so by
    the child's height). Returns ``(order, position, fills, pair_child,
    pair_bounds, pair_of)``: ``order[r]`` the node of row r, ``position``
    its inverse, ``fills[h, k]`` the number of height-h rows with more than
    k children (k below the largest number of children), ``pair_child``
    each pair's child row, ``pair_bounds[k, h]`` the first pair of position
    k whose child has height h or more, ``pair_of[r, k]`` the pair of row
    r's k-th edge (-1: none); None when a child is not below its parent."""
    cdef Py_ssize_t n = children.shape[0], K = children.shape[1]
    n_kids_arr = np.zeros(n, dtype=np.int_)
    cdef long[::1] n_kids = n_kids_arr
    cdef Py_ssize_t i, k, width = 0
    with nogil:
        for i in range(n):
            k = 0
            while k < K and children[i, k] >= 0:
                k += 1
            n_kids[i] = k
            if k > width:
                width = k
    order_arr = np.empty(n, dtype=np.int32)
    position_arr = np.empty(n, dtype=np.int32)
    child_arr = np.full((width, n), -1, dtype=np.int32)
    fills_arr = np.zeros((n_levels, width), dtype=np.int_)
    start_arr = np.zeros(n_levels * (width + 1) + 1, dtype=np.int_)
    pair_of_arr = np.full((n, width), -1, dtype=np.int32)
    pair_child_arr = np.empty(int(np.count_nonzero(np.asarray(children)[:, :width] >= 0)), dtype=np.int32)
    pair_bounds_arr = np.zeros((width, n_levels + 1), dtype=np.int_)
    cdef int[::1] order = order_arr, position = position_arr, pair_child = pair_child_arr
    cdef int[::1] pair_at = np.empty(n, dtype=np.int32)
    cdef int[:, ::1] child = child_arr, pair_of = pair_of_arr
    cdef long[:, ::1] fills = fills_arr, pair_bounds = pair_bounds_arr
    cdef long[::1] start = start_arr
    cdef long n_pairs
    with nogil:
        n_pairs = _level_plan(children, heights, n_kids, width, order, position, child, fills, start)
        if n_pairs >= 0:
            n_pairs = _pairs(child, heights, order, pair_of, pair_child, pair_bounds, pair_at)
    if n_pairs < 0:
        return None
    return order_arr, position_arr, fills_arr, pair_child_arr[:n_pairs], pair_bounds_arr, pair_of_arr


cdef long _level_plan(const long[:, ::1] children, const long[::1] heights, const long[::1] n_kids,
                      Py_ssize_t width, int[::1] order, int[::1] position, int[:, ::1] child,
                      long[:, ::1] fills, long[::1] start) noexcept nogil:
    cdef Py_ssize_t n = children.shape[0], n_levels = fills.shape[0]
    cdef Py_ssize_t i, k, r, key
    cdef long v, c
    # bucket (height, width - children): the rows of a height, most children first
    for i in range(n):
        if heights[i] < 0 or heights[i] >= n_levels:
            return -1
        start[heights[i] * (width + 1) + width - n_kids[i] + 1] += 1
        for k in range(n_kids[i]):
            fills[heights[i], k] += 1
    for key in range(1, start.shape[0]):
        start[key] += start[key - 1]
    for i in range(n):
        key = heights[i] * (width + 1) + width - n_kids[i]
        order[start[key]] = <int>i
        position[i] = <int>start[key]
        start[key] += 1
    for r in range(n):
        v = order[r]
        for k in range(n_kids[v]):
            c = children[v, k]
            if heights[c] >= heights[v]:
                return -1
            child[k, r] = position[c]
    return 0


cdef long _pairs(const int[:, ::1] child, const long[::1] heights, const int[::1] order, int[:, ::1] pair_of,
                 int[::1] pair_child, long[:, ::1] pair_bounds, int[::1] pair_at) noexcept nogil:
    """Number the distinct (child, position) pairs (``pair_at``: scratch)."""
    cdef Py_ssize_t width = child.shape[0], n = child.shape[1], n_levels = pair_bounds.shape[1] - 1
    cdef Py_ssize_t k, r, h
    cdef long n_pairs = 0
    cdef int c
    for k in range(width):
        # pair_at[c]: the pair of row c as a k-th child (-1: none; 0 before numbering: used)
        for r in range(n):
            pair_at[r] = -1
        for r in range(n):
            c = child[k, r]
            if c >= 0:
                pair_at[c] = 0
        h = 0
        for r in range(n):
            while h <= heights[order[r]]:
                pair_bounds[k, h] = n_pairs
                h += 1
            if pair_at[r] == 0:
                pair_child[n_pairs] = <int>r
                pair_at[r] = <int>n_pairs
                n_pairs += 1
        while h <= n_levels:
            pair_bounds[k, h] = n_pairs
            h += 1
        for r in range(n):
            c = child[k, r]
            if c >= 0:
                pair_of[r, k] = pair_at[c]
    return n_pairs


cdef struct _Part:
    # one DAG's layout (see merge_layouts), as pointers into its arrays
    const int* order
    const long* fills
    const int* pair_child
    const long* pair_bounds
    const int* pair_of
    const long* level_ends
    const int* labels
    Py_ssize_t n, width, n_levels


cdef const void* _data(object a, int typenum, int ndim) except NULL:
    """The data of a C-contiguous numpy array of that type and number of dimensions."""
    cdef cnp.ndarray arr = a
    if cnp.PyArray_TYPE(arr) != typenum or cnp.PyArray_NDIM(arr) != ndim or not cnp.PyArray_IS_C_CONTIGUOUS(arr):
        raise ValueError("a layout's arrays must be C-contiguous, of the types and shapes level_plan gives them")
    return cnp.PyArray_DATA(arr)


def merge_layouts(list layouts):
    """The layout of DAGs concatenated (node ids offset by the nodes before
    them) from each DAG's own ``level_plan`` layout ``(order, position,
    fills, pair_child, pair_bounds, pair_of, level_ends, labels)``, in the
    same form, without laying the concatenation out again: rows bucket by
    bucket (height, then falling number of children), pairs block by block
    (position, then child height), each bucket and block holding the DAGs'
    rows or pairs in turn, each DAG's in its own order. The rows come in
    the order ``level_plan`` of the concatenation gives them (its counting
    sort keeps node order within a bucket); its pairs of a block may come
    in another order (it orders them by child row), which changes no state
    or pair gradient, only the order of the terms of ``d_pairsᵀ U``."""
    cdef Py_ssize_t n_sets = len(layouts), s, i, n_levels = 0, width = 0, n = 0, n_pairs = 0, most_pairs = 0
    cdef void* out[11]
    cdef cnp.ndarray a
    cdef _Part* parts = <_Part*>malloc(sizeof(_Part) * max(n_sets, 1))
    if parts == NULL:
        raise MemoryError()
    try:
        for s in range(n_sets):
            lay = layouts[s]
            parts[s].order = <const int*>_data(lay[0], cnp.NPY_INT32, 1)
            parts[s].fills = <const long*>_data(lay[2], cnp.NPY_LONG, 2)
            parts[s].pair_child = <const int*>_data(lay[3], cnp.NPY_INT32, 1)
            parts[s].pair_bounds = <const long*>_data(lay[4], cnp.NPY_LONG, 2)
            parts[s].pair_of = <const int*>_data(lay[5], cnp.NPY_INT32, 2)
            parts[s].level_ends = <const long*>_data(lay[6], cnp.NPY_LONG, 1)
            parts[s].labels = <const int*>_data(lay[7], cnp.NPY_INT32, 1)
            parts[s].n = cnp.PyArray_DIM(lay[0], 0)
            parts[s].width = cnp.PyArray_DIM(lay[5], 1)
            parts[s].n_levels = cnp.PyArray_DIM(lay[6], 0)
            if (cnp.PyArray_DIM(lay[2], 0) != parts[s].n_levels or cnp.PyArray_DIM(lay[2], 1) != parts[s].width
                    or cnp.PyArray_DIM(lay[4], 0) != parts[s].width
                    or cnp.PyArray_DIM(lay[4], 1) != parts[s].n_levels + 1
                    or cnp.PyArray_DIM(lay[5], 0) != parts[s].n or cnp.PyArray_DIM(lay[7], 0) != parts[s].n):
                raise ValueError("a layout's arrays must have the shapes level_plan gives them")
            n_levels = max(n_levels, parts[s].n_levels)
            width = max(width, parts[s].width)
            n += parts[s].n
            n_pairs += cnp.PyArray_DIM(lay[3], 0)
            most_pairs = max(most_pairs, cnp.PyArray_DIM(lay[3], 0))
        arrays = (np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32), np.zeros((n_levels, width), dtype=np.int_),
                  np.empty(n_pairs, dtype=np.int32), np.empty((width, n_levels + 1), dtype=np.int_),
                  np.full((n, width), -1, dtype=np.int32), np.empty(n_levels, dtype=np.int_),
                  np.empty(n, dtype=np.int32))
        # rows per (height, width - children, DAG), then where each bucket starts; pairs per
        # (position, child height, DAG) likewise; scratch: the maps of rows and pairs
        rows = np.zeros((n_levels, width + 1, n_sets), dtype=np.int_)
        pairs = np.zeros((width, n_levels, n_sets), dtype=np.int_)
        scratch = np.empty(n + most_pairs, dtype=np.int32)
        for i, a in enumerate((rows, pairs, scratch) + arrays):
            out[i] = cnp.PyArray_DATA(a)
        with nogil:
            _merge(parts, n_sets, n_levels, width, n, n_pairs, <long*>out[0], <long*>out[1], <int*>out[2],
                   <int*>out[3], <int*>out[4], <long*>out[5], <int*>out[6], <long*>out[7], <int*>out[8],
                   <long*>out[9], <int*>out[10])
        return arrays
    finally:
        free(parts)


cdef inline Py_ssize_t _rows_with(const _Part* part, Py_ssize_t h, Py_ssize_t kids) noexcept nogil:
    """The number of a DAG's height-h rows with exactly ``kids`` children
    (its fills count the rows with more than k)."""
    cdef Py_ssize_t w = part.width
    cdef Py_ssize_t size = part.level_ends[h] - (part.level_ends[h - 1] if h else 0)
    return (part.fills[h * w + kids - 1] if kids else size) - (part.fills[h * w + kids] if kids < w else 0)


cdef void _merge(const _Part* parts, Py_ssize_t n_sets, Py_ssize_t n_levels, Py_ssize_t width, Py_ssize_t n,
                 Py_ssize_t n_pairs, long* rows, long* pairs, int* scratch, int* order, int* position, long* fills,
                 int* pair_child, long* pair_bounds, int* pair_of, long* level_ends, int* labels) noexcept nogil:
    cdef Py_ssize_t s, h, k, kids, i, r, p, q, w, off, start, total, size, L = n_levels, S = n_sets
    cdef const _Part* part
    cdef int* row_map = scratch       # each DAG's rows, one after another -> merged rows
    cdef int* pair_map = scratch + n  # one DAG's pairs -> merged pairs
    # sizes: rows[(h * (width + 1) + width - kids) * S + s], pairs[(k * L + h) * S + s]
    for s in range(S):
        part = &parts[s]
        w = part.width
        for h in range(part.n_levels):
            for kids in range(w + 1):
                rows[(h * (width + 1) + width - kids) * S + s] = _rows_with(part, h, kids)
                if kids < w:
                    fills[h * width + kids] += part.fills[h * w + kids]
        for k in range(w):
            for h in range(part.n_levels):
                pairs[(k * L + h) * S + s] = part.pair_bounds[k * (part.n_levels + 1) + h + 1] - \
                    part.pair_bounds[k * (part.n_levels + 1) + h]
    # sizes -> starts, in bucket (block) order
    total = 0
    for i in range(L * (width + 1) * S):
        size, rows[i] = rows[i], total
        total += size
        if (i + 1) % ((width + 1) * S) == 0:
            level_ends[i // ((width + 1) * S)] = total
    total = 0
    for i in range(width * L * S):
        if i % S == 0:
            pair_bounds[(i // (L * S)) * (L + 1) + (i // S) % L] = total
        size, pairs[i] = pairs[i], total
        total += size
    for k in range(width):
        pair_bounds[k * (L + 1) + L] = pair_bounds[(k + 1) * (L + 1)] if k + 1 < width else n_pairs
    off = 0
    for s in range(S):
        part = &parts[s]
        w = part.width
        start = 0
        for h in range(part.n_levels):
            for kids in range(w, -1, -1):
                r = start + (part.fills[h * w + kids] if kids < w else 0)
                q = rows[(h * (width + 1) + width - kids) * S + s]
                for i in range(_rows_with(part, h, kids)):
                    row_map[off + r + i] = <int>(q + i)
            start = part.level_ends[h]
        for r in range(part.n):
            q = row_map[off + r]
            order[q] = <int>(off + part.order[r])
            labels[q] = part.labels[r]
            position[off + part.order[r]] = <int>q
        for k in range(w):
            for h in range(part.n_levels):
                start = part.pair_bounds[k * (part.n_levels + 1) + h]
                q = pairs[(k * L + h) * S + s]
                for p in range(start, part.pair_bounds[k * (part.n_levels + 1) + h + 1]):
                    pair_map[p] = <int>(q + p - start)
                    pair_child[q + p - start] = row_map[off + part.pair_child[p]]
            for r in range(part.n):
                if part.pair_of[r * w + k] >= 0:
                    pair_of[row_map[off + r] * width + k] = pair_map[part.pair_of[r * w + k]]
        off += part.n


cdef class NodeTable:
    """Label-DAG nodes ``(label, children)`` hash-consed (open addressing
    over the node rows; ``share=False`` keeps every node apart), each with
    its height. ``node`` adds one node; ``add_dag`` maps the nodes of a
    TreeSetDAG that its roots reach through per-production templates (the
    label id, the numbers of kept child slots and of subtree slots among
    them, and per slot -1 for a subtree or the label id of a leaf) and
    returns the roots' nodes."""
    cdef long* labels
    cdef long* kids
    cdef long* heights
    cdef long* slots
    cdef Py_ssize_t n, cap, K, mask
    cdef bint share

    def __cinit__(self, Py_ssize_t max_children, bint share=True):
        self.K, self.share, self.n, self.cap, self.mask = max_children, share, 0, 256, 511
        self.labels = <long*>malloc(sizeof(long) * self.cap)
        self.kids = <long*>malloc(sizeof(long) * self.cap * self.K)
        self.heights = <long*>malloc(sizeof(long) * self.cap)
        self.slots = <long*>malloc(sizeof(long) * (self.mask + 1))
        if self.labels == NULL or self.kids == NULL or self.heights == NULL or self.slots == NULL:
            raise MemoryError()
        cdef Py_ssize_t i
        for i in range(self.mask + 1):
            self.slots[i] = -1

    def __dealloc__(self):
        free(self.labels)
        free(self.kids)
        free(self.heights)
        free(self.slots)

    def __len__(self):
        return self.n

    cdef uint64_t _hash(self, long label, const long* children, Py_ssize_t n_kids) noexcept nogil:
        cdef uint64_t h = <uint64_t>(label + 1) * 0x9E3779B97F4A7C15ULL
        cdef Py_ssize_t j
        for j in range(n_kids):
            h = (h ^ <uint64_t>(children[j] + 1)) * 0xBF58476D1CE4E5B9ULL
        return h ^ (h >> 31)

    cdef int _grow(self) noexcept nogil:
        cdef Py_ssize_t cap = self.cap * 2, i, slot
        cdef long* labels = <long*>realloc(self.labels, sizeof(long) * cap)
        if labels == NULL:
            return -1
        self.labels = labels
        cdef long* kids = <long*>realloc(self.kids, sizeof(long) * cap * self.K)
        if kids == NULL:
            return -1
        self.kids = kids
        cdef long* heights = <long*>realloc(self.heights, sizeof(long) * cap)
        if heights == NULL:
            return -1
        self.heights, self.cap = heights, cap
        # the slots stay at most half full
        cdef long* slots = <long*>realloc(self.slots, sizeof(long) * cap * 2)
        if slots == NULL:
            return -1
        self.slots, self.mask = slots, cap * 2 - 1
        for i in range(self.mask + 1):
            self.slots[i] = -1
        for i in range(self.n):
            slot = self._hash(self.labels[i], &self.kids[i * self.K], self._n_kids(i)) & self.mask
            while self.slots[slot] >= 0:
                slot = (slot + 1) & self.mask
            self.slots[slot] = i
        return 0

    cdef Py_ssize_t _n_kids(self, Py_ssize_t i) noexcept nogil:
        cdef Py_ssize_t j = 0
        while j < self.K and self.kids[i * self.K + j] >= 0:
            j += 1
        return j

    cdef long intern(self, long label, const long* children, Py_ssize_t n_kids) noexcept nogil:
        """The node's id (new if unseen, or always without sharing); -1: out of memory."""
        cdef Py_ssize_t slot = 0, j
        cdef long found, height = 0
        cdef bint same
        if self.share:
            slot = self._hash(label, children, n_kids) & self.mask
            while self.slots[slot] >= 0:
                found = self.slots[slot]
                same = self.labels[found] == label and (n_kids == self.K or self.kids[found * self.K + n_kids] < 0)
                j = 0
                while same and j < n_kids:
                    same = self.kids[found * self.K + j] == children[j]
                    j += 1
                if same:
                    return found
                slot = (slot + 1) & self.mask
        if self.n == self.cap:
            if self._grow() < 0:
                return -1
            if self.share:
                slot = self._hash(label, children, n_kids) & self.mask
                while self.slots[slot] >= 0:
                    slot = (slot + 1) & self.mask
        for j in range(self.K):
            self.kids[self.n * self.K + j] = children[j] if j < n_kids else -1
            if j < n_kids and self.heights[children[j]] >= height:
                height = self.heights[children[j]] + 1
        self.labels[self.n], self.heights[self.n] = label, height
        if self.share:
            self.slots[slot] = self.n
        self.n += 1
        return self.n - 1

    def node(self, long label, children) -> int:
        """The id of the node ``(label, children)`` (at most max_children node ids)."""
        cdef long buf[64]
        cdef Py_ssize_t j, n_kids = len(children)
        if n_kids > self.K or n_kids > 64:
            raise ValueError(f"{n_kids} children, at most {self.K}")
        for j in range(n_kids):
            buf[j] = children[j]
            if not 0 <= buf[j] < self.n:
                raise ValueError(f"no node {buf[j]}")
        cdef long found = self.intern(label, buf, n_kids)
        if found < 0:
            raise MemoryError()
        return found

    def add_dag(self, const int[::1] prod, const int[::1] kid_off, const int[::1] kids, const long[::1] roots,
                const long[::1] tmpl_label, const long[::1] tmpl_n, const long[::1] tmpl_kept,
                const long[:, ::1] tmpl_slots):
        """The nodes of a TreeSetDAG (``dag_arrays()``) that ``roots`` reach
        through kept subtree slots, children first; returns the roots' ids."""
        cdef Py_ssize_t n_dag = prod.shape[0]
        used_arr = np.zeros(n_dag, dtype=np.uint8)
        mapped_arr = np.full(n_dag, -1, dtype=np.int_)
        out_arr = np.empty(roots.shape[0], dtype=np.int_)
        cdef unsigned char[::1] used = used_arr
        cdef long[::1] mapped = mapped_arr, out = out_arr
        cdef long buf[64]
        cdef Py_ssize_t d, j, s, sub, cnt, i
        cdef long p, slot, leaf
        cdef int failed = 0
        if self.K > 64:
            raise ValueError("at most 64 children")
        with nogil:
            for i in range(roots.shape[0]):
                used[roots[i]] = 1
            for d in range(n_dag - 1, -1, -1):
                if used[d]:
                    for j in range(tmpl_kept[prod[d]]):
                        used[kids[kid_off[d] + j]] = 1
            for d in range(n_dag):
                if not used[d]:
                    continue
                p = prod[d]
                sub, cnt = kid_off[d], 0
                for s in range(tmpl_n[p]):
                    slot = tmpl_slots[p, s]
                    if slot < 0:
                        buf[cnt] = mapped[kids[sub]]
                        sub += 1
                    else:
                        leaf = self.intern(slot, buf, 0)
                        if leaf < 0:
                            failed = 1
                            break
                        buf[cnt] = leaf
                    cnt += 1
                mapped[d] = self.intern(tmpl_label[p], buf, cnt)
                if failed or mapped[d] < 0:
                    failed = 1
                    break
            for i in range(roots.shape[0]):
                out[i] = mapped[roots[i]]
        if failed:
            raise MemoryError()
        return out_arr

    def arrays(self):
        """``(labels, children, heights)`` of the nodes so far, as numpy
        arrays; children as wide as the most children of a node."""
        cdef Py_ssize_t i, j, width = 0
        for i in range(self.n):
            width = max(width, self._n_kids(i))
        labels = np.empty(self.n, dtype=np.int64)
        children = np.empty((self.n, width), dtype=np.int64)
        heights = np.empty(self.n, dtype=np.int64)
        cdef long[::1] lab = labels, hei = heights
        cdef long[:, ::1] kid = children
        for i in range(self.n):
            lab[i], hei[i] = self.labels[i], self.heights[i]
            for j in range(width):
                kid[i, j] = self.kids[i * self.K + j]
        return labels, children, heights

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Hot loops of the tree kernels (Collins & Duffy 2002; Moschitti 2006) and
the packed-forest kernel (Zhang et al. 2010). No Python objects inside the
loops; every loop runs without the GIL.

Trees come packed (see ``trees.pack``): per tree, nodes in post-order with
production ids and their *node* children (word children only ever contribute a
factor 1 and, since productions include their words, are equal whenever the
productions are); plus, per tree, its nodes sorted by production and grouped
in runs of equal production.

Instead of merge-joining two sorted production lists for every pair, the row
tree's runs are written once into a dense ``production -> run`` lookup; each
column tree then scans its own nodes in post-order, so every node pair with
equal productions is visited exactly once and children are always done
before parents. Δ values live in a table that is reset only where written.

Every loop comes in two arithmetics, picked at compile time by a fused
type: ``Linear``, the fast one, and ``Log``, where each value is held as its
logarithm (sums by log-add-exp), which cannot overflow. Δ grows like a
product over children (a flat tree of 2,200 children overflows a double at
λ = 0.4), so the Python side reruns in ``Log`` what came out non-finite.
"""
from libc.math cimport INFINITY, exp, log1p
from libc.stdlib cimport calloc, malloc, free
from libc.string cimport memset

import numpy as np


cdef struct Linear:
    char unused

cdef struct Log:           # values are logarithms: 0 is -inf, products are sums
    char unused

ctypedef fused Arith:
    Linear
    Log


cdef inline double zero(Arith ar) noexcept nogil:
    if Arith is Linear:
        return 0.0
    else:
        return -INFINITY


cdef inline double one(Arith ar) noexcept nogil:
    if Arith is Linear:
        return 1.0
    else:
        return 0.0


cdef inline double mul(Arith ar, double x, double y) noexcept nogil:
    if Arith is Linear:
        return x * y
    else:
        return x + y


cdef inline double add(Arith ar, double x, double y) noexcept nogil:
    cdef double hi, lo
    if Arith is Linear:
        return x + y
    else:
        hi, lo = (x, y) if x >= y else (y, x)
        if lo == -INFINITY:
            return hi
        return hi + log1p(exp(lo - hi))


cdef inline void fill(Arith ar, double* values, size_t n) noexcept nogil:
    cdef size_t i
    if Arith is Linear:
        memset(values, 0, sizeof(double) * n)
    else:
        for i in range(n):
            values[i] = -INFINITY


cdef struct Batch:
    const int* node_off    # tree -> first global node (n_trees + 1)
    const int* prod        # global node -> production id
    const int* kid_off     # global node -> first entry in kids (n_nodes + 1)
    const int* kids        # local ids of node children
    const int* run_off     # tree -> first run (n_trees + 1)
    const int* run_prod    # run -> production id
    const int* run_start   # run -> first entry in order (n_runs + 1)
    const int* order       # local node ids sorted by production, tree by tree


cdef struct Work:
    int* lookup            # production -> run of the row tree, -1 elsewhere
    double* table          # Δ(n2 * n_a + n1)
    int* written


# Where Δ of a child pair is found: each kernel stores it its own way.
cdef struct DenseDelta:    # pair_kernel: Δ(cu, cv) at table[cv * n_a + cu], 0 where not written
    const double* table
    int n_a

cdef struct ColumnDelta:   # dag_block: column cv holds its rows cu ascending, absent rows are 0
    const long* col_off
    const int* seg_u
    const double* seg_d

cdef struct LocalDelta:    # dag_self_kernels: positions in one tree's node list; written iff equal productions
    const int* prod
    const int* local
    const double* table
    size_t m

cdef struct ForestDelta:   # forest_kernel_sum: D(t1, t2) at table[t2 * n1 + t1]; a word tail (t1 < 0) adds 0
    const double* table
    size_t n1

cdef struct IndexedDelta:  # dag_node_sums: Δ(cu, cv) at seg[base[cu] + cv], cv a sorted position, iff equal productions
    const int* prod_a
    const int* prod_b
    const long* base
    const double* seg

ctypedef fused DeltaTable:
    DenseDelta
    ColumnDelta
    LocalDelta
    ForestDelta
    IndexedDelta


cdef inline double child_delta(const DeltaTable* t, int cu, int cv, double absent) noexcept nogil:
    # ``absent``: the arithmetic's 0, for a pair whose Δ is not stored
    cdef long lo, hi, mid
    if DeltaTable is DenseDelta:
        return t.table[cv * t.n_a + cu]
    elif DeltaTable is ColumnDelta:
        lo = t.col_off[cv]
        hi = t.col_off[cv + 1]
        while lo < hi:
            mid = (lo + hi) >> 1
            if t.seg_u[mid] < cu:
                lo = mid + 1
            else:
                hi = mid
        return t.seg_d[lo] if lo < t.col_off[cv + 1] and t.seg_u[lo] == cu else absent
    elif DeltaTable is LocalDelta:
        return t.table[t.local[cu] * t.m + t.local[cv]] if t.prod[cu] == t.prod[cv] else absent
    elif DeltaTable is IndexedDelta:
        return t.seg[t.base[cu] + cv] if t.prod_a[cu] == t.prod_b[cv] else absent
    else:
        return t.table[cv * t.n1 + cu] if cu >= 0 else absent


cdef inline double delta_product(Arith ar, double d, double sigma, const int* kids_a, const int* kids_b, int nk,
                                 const DeltaTable* t) noexcept nogil:
    """The Δ recursion for two nodes with equal productions,
    ``Δ(n1, n2) = λ Π_j (σ + Δ(ch_j(n1), ch_j(n2)))`` (Collins & Duffy 2002
    with σ = 1; σ = 0 gives the subtree kernel, Moschitti 2006), ``d``
    standing for λ (times the two hyperedges' weights in the forest kernel,
    Zhang et al. 2010). The fused table type picks the Δ lookup at compile
    time: each kernel gets its own inlined loop, with no call through a
    pointer. In ``Log`` arithmetic, d and sigma are logarithms too."""
    cdef int j
    cdef double absent = zero(ar)
    for j in range(nk):
        d = mul(ar, d, add(ar, sigma, child_delta(t, kids_a[j], kids_b[j], absent)))
    return d


cdef class PackedArrays:
    """Owner of one packed batch's arrays (built by ``trees.pack``)."""
    cdef readonly object node_off, prod, kid_off, kids, run_off, run_prod, run_start, order
    cdef const int[::1] _node_off, _prod, _kid_off, _kids, _run_off, _run_prod, _run_start, _order
    cdef readonly int max_nodes, max_prod

    def __init__(self, node_off, prod, kid_off, kids, run_off, run_prod, run_start, order):
        self.node_off, self.prod, self.kid_off, self.kids = node_off, prod, kid_off, kids
        self.run_off, self.run_prod, self.run_start, self.order = run_off, run_prod, run_start, order
        self._node_off, self._prod, self._kid_off, self._kids = node_off, prod, kid_off, kids
        self._run_off, self._run_prod, self._run_start, self._order = run_off, run_prod, run_start, order
        sizes = np.diff(node_off)
        self.max_nodes = int(sizes.max()) if len(sizes) else 0
        self.max_prod = int(prod.max()) if len(prod) else -1

    @property
    def n_trees(self):
        return len(self.node_off) - 1

    cdef Batch view(self):
        cdef Batch b
        b.node_off = &self._node_off[0]
        b.prod = &self._prod[0] if self._prod.shape[0] else NULL
        b.kid_off = &self._kid_off[0]
        b.kids = &self._kids[0] if self._kids.shape[0] else NULL
        b.run_off = &self._run_off[0]
        b.run_prod = &self._run_prod[0] if self._run_prod.shape[0] else NULL
        b.run_start = &self._run_start[0]
        b.order = &self._order[0] if self._order.shape[0] else NULL
        return b


cdef inline void load_row(const Batch* A, int a, int* lookup) noexcept nogil:
    cdef int r
    for r in range(A.run_off[a], A.run_off[a + 1]):
        lookup[A.run_prod[r]] = r


cdef inline void clear_row(const Batch* A, int a, int* lookup) noexcept nogil:
    cdef int r
    for r in range(A.run_off[a], A.run_off[a + 1]):
        lookup[A.run_prod[r]] = -1


cdef double pair_kernel(Arith ar, const Batch* A, int a, const Batch* B, int b, double lam, double sigma,
                        Work* w) noexcept nogil:
    """K(A[a], B[b]); A[a]'s runs must be loaded into ``w.lookup``."""
    cdef int base_a = A.node_off[a], na = A.node_off[a + 1] - base_a
    cdef int base_b = B.node_off[b], nb = B.node_off[b + 1] - base_b
    cdef int n2, g2, r, k, n1, g1, nk, k0, idx, nw = 0
    cdef double d, total = zero(ar)
    cdef double* table = w.table
    cdef DenseDelta delta
    delta.table = table
    delta.n_a = na
    for n2 in range(nb):
        g2 = base_b + n2
        r = w.lookup[B.prod[g2]]
        if r < 0:
            continue
        k0 = B.kid_off[g2]
        nk = B.kid_off[g2 + 1] - k0
        for k in range(A.run_start[r], A.run_start[r + 1]):
            n1 = A.order[k]
            g1 = base_a + n1
            d = delta_product(ar, lam, sigma, &A.kids[A.kid_off[g1]], &B.kids[k0], nk, &delta)
            idx = n2 * na + n1
            table[idx] = d
            w.written[nw] = idx
            nw += 1
            total = add(ar, total, d)
    for k in range(nw):
        table[w.written[k]] = zero(ar)
    return total


cdef int work_init(Arith ar, Work* w, int n_prods, int max_a, int max_b) noexcept nogil:
    cdef size_t cells = <size_t>max(max_a, 1) * <size_t>max(max_b, 1)
    cdef int p
    w.lookup = <int*>malloc(sizeof(int) * max(n_prods, 1))
    w.table = <double*>malloc(sizeof(double) * cells)
    w.written = <int*>malloc(sizeof(int) * cells)
    if w.lookup == NULL or w.table == NULL or w.written == NULL:
        return -1
    for p in range(n_prods):
        w.lookup[p] = -1
    fill(ar, w.table, cells)
    return 0


cdef void work_free(Work* w) noexcept nogil:
    free(w.lookup)
    free(w.table)
    free(w.written)


def gram_rows(PackedArrays A, PackedArrays B, const int[::1] rows, double lam, double sigma,
              bint symmetric, double[:, ::1] out):
    """Fill ``out[i, :]`` for every i in ``rows`` (for a symmetric Gram matrix
    only ``j >= i``: the caller mirrors it, so threads never write each
    other's rows). Runs without the GIL: call it from several threads on
    disjoint row sets."""
    cdef Batch ba = A.view(), bb = B.view()
    cdef Work w
    cdef Linear ar
    cdef int n_prods = max(A.max_prod, B.max_prod) + 1
    cdef int i, a, b, nB = B.n_trees
    with nogil:
        if work_init(ar, &w, n_prods, A.max_nodes, B.max_nodes) != 0:
            work_free(&w)
            with gil:
                raise MemoryError("kernel workspace")
        for i in range(rows.shape[0]):
            a = rows[i]
            load_row(&ba, a, w.lookup)
            for b in range(a if symmetric else 0, nB):
                out[a, b] = pair_kernel(ar, &ba, a, &bb, b, lam, sigma, &w)
            clear_row(&ba, a, w.lookup)
        work_free(&w)


def self_kernels(PackedArrays A, double lam, double sigma):
    """K(t, t) for every tree of a batch."""
    cdef Batch ba = A.view()
    cdef Work w
    cdef Linear ar
    cdef int a, n = A.n_trees
    out = np.zeros(n)
    cdef double[::1] o = out
    with nogil:
        if work_init(ar, &w, A.max_prod + 1, A.max_nodes, A.max_nodes) != 0:
            work_free(&w)
            with gil:
                raise MemoryError("kernel workspace")
        for a in range(n):
            load_row(&ba, a, w.lookup)
            o[a] = pair_kernel(ar, &ba, a, &ba, a, lam, sigma, &w)
            clear_row(&ba, a, w.lookup)
        work_free(&w)
    return out


def log_pair_kernels(PackedArrays A, PackedArrays B, const int[::1] rows, const int[::1] cols,
                     double log_lam, double log_sigma):
    """log K(A[rows[i]], B[cols[i]]) for every i, in ``Log`` arithmetic
    (``log_sigma``: -inf for the subtree kernel)."""
    cdef Batch ba = A.view(), bb = B.view()
    cdef Work w
    cdef Log ar
    cdef int i, n = rows.shape[0]
    out = np.empty(n)
    cdef double[::1] o = out
    with nogil:
        if work_init(ar, &w, max(A.max_prod, B.max_prod) + 1, A.max_nodes, B.max_nodes) != 0:
            work_free(&w)
            with gil:
                raise MemoryError("kernel workspace")
        for i in range(n):
            load_row(&ba, rows[i], w.lookup)
            o[i] = pair_kernel(ar, &ba, rows[i], &bb, cols[i], log_lam, log_sigma, &w)
            clear_row(&ba, rows[i], w.lookup)
        work_free(&w)
    return out


def forest_kernel_sum(
        const int[::1] head1, const int[::1] tail_start1, const int[::1] tails1,
        const double[::1] q1, const double[::1] mu1, const int[::1] by_rule1,
        const int[::1] rule_first, const int[::1] rule_last,
        const int[::1] head2, const int[::1] tail_start2, const int[::1] tails2,
        const int[::1] rule2, const double[::1] q2, const double[::1] mu2,
        const int[::1] by_head2, int n1, int n2, double lam, bint log_space=False):
    """Packed-forest kernel, in the scaled form that cannot underflow:
    ``D(v1, v2) = λ Σ_{rule(e1) = rule(e2)} q(e1) q(e2) Π_j (1 + D(t_j(e1), t_j(e2)))``
    and ``K = Σ μ(v1) μ(v2) D(v1, v2)``.

    Forest 1's edges are grouped by rule (``by_rule1``; ``rule_first/last``
    give each rule's slice, -1 when absent); forest 2's edges are visited in
    order of their head (``by_head2``), so every D a tail needs is final.
    ``log_space``: q, μ and λ come as logarithms, and so does K.
    """
    cdef Linear lin
    cdef Log lg
    if log_space:
        return _forest_kernel_sum(lg, head1, tail_start1, tails1, q1, mu1, by_rule1, rule_first, rule_last,
                                  head2, tail_start2, tails2, rule2, q2, mu2, by_head2, n1, n2, lam)
    return _forest_kernel_sum(lin, head1, tail_start1, tails1, q1, mu1, by_rule1, rule_first, rule_last,
                              head2, tail_start2, tails2, rule2, q2, mu2, by_head2, n1, n2, lam)


cdef double _forest_kernel_sum(
        Arith ar, const int[::1] head1, const int[::1] tail_start1, const int[::1] tails1,
        const double[::1] q1, const double[::1] mu1, const int[::1] by_rule1,
        const int[::1] rule_first, const int[::1] rule_last,
        const int[::1] head2, const int[::1] tail_start2, const int[::1] tails2,
        const int[::1] rule2, const double[::1] q2, const double[::1] mu2,
        const int[::1] by_head2, int n1, int n2, double lam) except? -1.0:
    cdef double* D = NULL
    cdef int* stamp = NULL
    cdef int* touched = NULL
    cdef int k, idx, e1, e2 = 0, h1, h2 = -1, cur = -1, r, s1, s2, nt = 0, m, n_rules = rule_first.shape[0]
    cdef double d, total = zero(ar), absent = zero(ar)
    cdef size_t cell, cells = <size_t>max(n1, 1) * <size_t>max(n2, 1)
    cdef ForestDelta delta
    with nogil:
        D = <double*>malloc(sizeof(double) * cells)
        stamp = <int*>malloc(sizeof(int) * max(n1, 1))
        touched = <int*>malloc(sizeof(int) * max(n1, 1))
        if D == NULL or stamp == NULL or touched == NULL:
            free(D); free(stamp); free(touched)
            with gil:
                raise MemoryError(f"forest kernel table of {n1} x {n2} nodes")
        fill(ar, D, cells)
        delta.table = D
        delta.n1 = n1
        for k in range(n1):
            stamp[k] = -1
        for idx in range(by_head2.shape[0] + 1):
            if idx < by_head2.shape[0]:
                e2 = by_head2[idx]
                h2 = head2[e2]
            if idx == by_head2.shape[0] or h2 != cur:
                # every edge into `cur` is done: its row of D is final
                for k in range(nt):
                    total = add(ar, total, mul(ar, mul(ar, mu2[cur], mu1[touched[k]]),
                                               D[<size_t>cur * n1 + touched[k]]))
                nt = 0
                cur = h2
                if idx == by_head2.shape[0]:
                    break
            r = rule2[e2]
            if r >= n_rules or rule_first[r] < 0 or q2[e2] == absent:
                continue
            s2 = tail_start2[e2]
            m = tail_start2[e2 + 1] - s2
            for k in range(rule_first[r], rule_last[r]):
                e1 = by_rule1[k]
                h1 = head1[e1]
                s1 = tail_start1[e1]
                d = delta_product(ar, mul(ar, mul(ar, lam, q1[e1]), q2[e2]), one(ar),
                                  &tails1[s1], &tails2[s2], m, &delta)
                cell = <size_t>h2 * n1 + h1
                D[cell] = add(ar, D[cell], d)
                if stamp[h1] != h2:
                    stamp[h1] = h2
                    touched[nt] = h1
                    nt += 1
        free(D); free(stamp); free(touched)
    return total


def dag_block(PackedArrays dag1, PackedArrays dag2,
              const int[::1] occ1_off, const int[::1] occ1_tree, const double[::1] occ1_cnt,
              const int[::1] occ2_off, const int[::1] occ2_tree, const double[::1] occ2_cnt,
              int n_a, int n_b, double lam, double sigma, bint log_space=False):
    """Kernel block between two hash-consed tree sets.

    Each DAG is packed as a single "tree" whose nodes are the distinct
    subtrees, children first; ``occ*_off/tree/cnt`` list, per DAG node, the
    trees it occurs in and how often. Δ is computed once per distinct node
    pair with equal productions, stored column by column (column = node of
    dag2, rows ascending, so a child's Δ is found by binary search). Then,
    one dag1 node u at a time, ``r[b] = Σ_v Δ(u, v) c_b(v)`` and
    ``K[a, :] += c_a(u) r`` for every tree a holding u. Returns ``(K, n_pairs)``.
    ``log_space``: counts, λ and σ come as logarithms, and so does K.
    """
    cdef Linear lin
    cdef Log lg
    if log_space:
        return _dag_block(lg, dag1, dag2, occ1_off, occ1_tree, occ1_cnt, occ2_off, occ2_tree, occ2_cnt,
                          n_a, n_b, lam, sigma)
    return _dag_block(lin, dag1, dag2, occ1_off, occ1_tree, occ1_cnt, occ2_off, occ2_tree, occ2_cnt,
                      n_a, n_b, lam, sigma)


cdef object _dag_block(Arith ar, PackedArrays dag1, PackedArrays dag2,
                       const int[::1] occ1_off, const int[::1] occ1_tree, const double[::1] occ1_cnt,
                       const int[::1] occ2_off, const int[::1] occ2_tree, const double[::1] occ2_cnt,
                       int n_a, int n_b, double lam, double sigma):
    cdef Batch A = dag1.view(), B = dag2.view()
    cdef int U = A.node_off[1], V = B.node_off[1]
    cdef int n_prods = max(dag1.max_prod, dag2.max_prod) + 1
    cdef int* lookup = NULL
    cdef long* col_off = NULL
    cdef long* row_off = NULL
    cdef int* seg_u = NULL
    cdef double* seg_d = NULL
    cdef int* row_v = NULL
    cdef double* row_d = NULL
    cdef double* r_buf = NULL
    cdef double* out_row
    cdef long nnz = 0, pos, k, q
    cdef int v, u, r, nk, k0, b
    cdef double d, c
    cdef ColumnDelta delta
    K = np.full((n_a, n_b), zero(ar))
    cdef double[:, ::1] Kv = K
    with nogil:
        lookup = <int*>malloc(sizeof(int) * max(n_prods, 1))
        col_off = <long*>malloc(sizeof(long) * (V + 1))
        row_off = <long*>calloc(U + 1, sizeof(long))
        r_buf = <double*>malloc(sizeof(double) * max(n_b, 1))
        if lookup == NULL or col_off == NULL or row_off == NULL or r_buf == NULL:
            free(lookup); free(col_off); free(row_off); free(r_buf)
            with gil:
                raise MemoryError("DAG kernel workspace")
        for k in range(n_prods):
            lookup[k] = -1
        if U:
            load_row(&A, 0, lookup)
        # the number of distinct pairs with equal productions is known up front
        col_off[0] = 0
        for v in range(V):
            r = lookup[B.prod[v]]
            nnz += (A.run_start[r + 1] - A.run_start[r]) if r >= 0 else 0
            col_off[v + 1] = nnz
        seg_u = <int*>malloc(sizeof(int) * max(nnz, 1))
        seg_d = <double*>malloc(sizeof(double) * max(nnz, 1))
        row_v = <int*>malloc(sizeof(int) * max(nnz, 1))
        row_d = <double*>malloc(sizeof(double) * max(nnz, 1))
        if seg_u == NULL or seg_d == NULL or row_v == NULL or row_d == NULL:
            free(lookup); free(col_off); free(row_off); free(r_buf)
            free(seg_u); free(seg_d); free(row_v); free(row_d)
            with gil:
                raise MemoryError(f"DAG kernel: {nnz} node pairs")
        delta.col_off = col_off
        delta.seg_u = seg_u
        delta.seg_d = seg_d
        for v in range(V):
            r = lookup[B.prod[v]]
            if r < 0:
                continue
            pos = col_off[v]
            k0 = B.kid_off[v]
            nk = B.kid_off[v + 1] - k0
            for k in range(A.run_start[r], A.run_start[r + 1]):
                u = A.order[k]
                seg_u[pos] = u
                seg_d[pos] = delta_product(ar, lam, sigma, &A.kids[A.kid_off[u]], &B.kids[k0], nk, &delta)
                pos += 1
                row_off[u + 1] += 1
        # the same pairs row by row (counting sort on u)
        for u in range(U):
            row_off[u + 1] += row_off[u]
        for v in range(V):
            for pos in range(col_off[v], col_off[v + 1]):
                u = seg_u[pos]
                q = row_off[u]
                row_v[q] = v
                row_d[q] = seg_d[pos]
                row_off[u] = q + 1
        for u in range(U - 1, 0, -1):
            row_off[u] = row_off[u - 1]
        row_off[0] = 0
        for u in range(U):
            if row_off[u] == row_off[u + 1] or occ1_off[u] == occ1_off[u + 1]:
                continue
            fill(ar, r_buf, n_b)
            for pos in range(row_off[u], row_off[u + 1]):
                v = row_v[pos]
                d = row_d[pos]
                for k in range(occ2_off[v], occ2_off[v + 1]):
                    r_buf[occ2_tree[k]] = add(ar, r_buf[occ2_tree[k]], mul(ar, occ2_cnt[k], d))
            for k in range(occ1_off[u], occ1_off[u + 1]):
                c = occ1_cnt[k]
                out_row = &Kv[occ1_tree[k], 0]
                for b in range(n_b):
                    out_row[b] = add(ar, out_row[b], mul(ar, c, r_buf[b]))
        free(lookup); free(col_off); free(row_off); free(r_buf)
        free(seg_u); free(seg_d); free(row_v); free(row_d)
    return K, nnz


def dag_node_sums(const int[::1] run_of_prod, const int[::1] run_start, const int[::1] sorted_prod,
                  const int[::1] sorted_kid_off, const int[::1] sorted_kids, const double[::1] sorted_weight,
                  const int[::1] prod, const int[::1] kid_off, const int[::1] kids,
                  double lam, double sigma, bint log_space=False):
    """``S(u) = Σ_v weight(v) Δ(u, v)`` for every node u of a DAG (``prod``,
    ``kid_off``, ``kids``; children first) over the nodes v of an indexed
    DAG (a learner's support, its weights folded into its nodes): that DAG
    with its nodes renumbered in production order (``sorted_*``; node ids
    ascending within a production, children given by their new numbers),
    ``run_start`` the first number of each production's run and
    ``run_of_prod`` the run of each production (-1 where absent).

    A support scored against many candidate sets keeps its index, so each
    node u reads only the run of its own production, in memory order, and
    a child pair's Δ is found by direct indexing: no scan of the support, no
    search. The sums run over v in ascending order, as :func:`dag_block`
    sums them, so ``Σ_u c_t(u) S(u)`` (u ascending) is exactly its weighted
    column (Collins & Duffy 2002's Δ; the DAG view of Aiolli et al. 2006).
    ``log_space``: weights, λ and σ come as logarithms, and so do the sums."""
    cdef Linear lin
    cdef Log lg
    if sorted_kid_off.shape[0] != sorted_prod.shape[0] + 1 or sorted_weight.shape[0] != sorted_prod.shape[0]:
        raise ValueError(f"{sorted_prod.shape[0]} indexed nodes, {sorted_kid_off.shape[0]} child offsets and "
                         f"{sorted_weight.shape[0]} weights: one offset more than nodes, one weight each")
    if log_space:
        return _dag_node_sums(lg, run_of_prod, run_start, sorted_prod, sorted_kid_off, sorted_kids, sorted_weight,
                              prod, kid_off, kids, lam, sigma)
    return _dag_node_sums(lin, run_of_prod, run_start, sorted_prod, sorted_kid_off, sorted_kids, sorted_weight,
                          prod, kid_off, kids, lam, sigma)


cdef object _dag_node_sums(Arith ar, const int[::1] run_of_prod, const int[::1] run_start,
                           const int[::1] sorted_prod, const int[::1] sorted_kid_off, const int[::1] sorted_kids,
                           const double[::1] sorted_weight, const int[::1] prod, const int[::1] kid_off,
                           const int[::1] kids, double lam, double sigma):
    cdef int n = prod.shape[0], n_indexed = run_of_prod.shape[0], u, r, p, k, k0, nk
    cdef int* run = NULL
    cdef long* base = NULL
    cdef double* seg = NULL
    cdef long nnz = 0
    cdef double d, total
    cdef IndexedDelta delta
    out = np.full(n, zero(ar))
    cdef double[::1] o = out
    if not n:
        return out
    with nogil:
        run = <int*>malloc(sizeof(int) * n)
        base = <long*>malloc(sizeof(long) * n)
        if run == NULL or base == NULL:
            free(run); free(base)
            with gil:
                raise MemoryError("DAG node sums workspace")
        for u in range(n):
            p = prod[u]
            r = run_of_prod[p] if 0 <= p < n_indexed else -1
            run[u] = r
            if r >= 0:
                base[u] = nnz - run_start[r]
                nnz += run_start[r + 1] - run_start[r]
        seg = <double*>malloc(sizeof(double) * max(nnz, 1))
        if seg == NULL:
            free(run); free(base)
            with gil:
                raise MemoryError(f"DAG node sums: {nnz} node pairs")
        delta.prod_a = &prod[0]
        delta.prod_b = &sorted_prod[0]
        delta.base = base
        delta.seg = seg
        for u in range(n):
            r = run[u]
            if r < 0:
                continue
            k0 = kid_off[u]
            nk = kid_off[u + 1] - k0
            total = zero(ar)
            for k in range(run_start[r], run_start[r + 1]):
                d = delta_product(ar, lam, sigma, &kids[k0], &sorted_kids[sorted_kid_off[k]], nk, &delta)
                seg[base[u] + k] = d
                total = add(ar, total, mul(ar, sorted_weight[k], d))
            o[u] = total
        free(run); free(base); free(seg)
    return out


def dag_self_kernels(const int[::1] prod, const int[::1] kid_off, const int[::1] kids,
                     const int[::1] tree_off, const int[::1] nodes, const double[::1] cnt,
                     double lam, double sigma, bint log_space=False):
    """K(a, a) for trees stored in one DAG (node children before parents):
    tree a's distinct DAG nodes are ``nodes[tree_off[a]:tree_off[a + 1]]``,
    ascending, each occurring ``cnt`` times in the tree. Per tree, Δ over
    pairs of its distinct nodes with equal productions, children first;
    ``K(a, a) = Σ_{u, v} cnt(u) cnt(v) Δ(u, v)``. ``log_space``: counts, λ
    and σ come as logarithms, and so do the results."""
    cdef Linear lin
    cdef Log lg
    if log_space:
        return _dag_self_kernels(lg, prod, kid_off, kids, tree_off, nodes, cnt, lam, sigma)
    return _dag_self_kernels(lin, prod, kid_off, kids, tree_off, nodes, cnt, lam, sigma)


cdef object _dag_self_kernels(Arith ar, const int[::1] prod, const int[::1] kid_off, const int[::1] kids,
                              const int[::1] tree_off, const int[::1] nodes, const double[::1] cnt,
                              double lam, double sigma):
    cdef int n_trees = tree_off.shape[0] - 1, n = prod.shape[0]
    cdef int n_prods = 1, max_m = 0, a, i, m, s, u, v, vi, p, nk, k0u
    cdef int* local = NULL   # DAG node -> position in the current tree's node list
    cdef int* head = NULL    # production -> first position with it (-1: none)
    cdef int* nxt = NULL     # position -> next position with the same production
    cdef double* table = NULL
    cdef double d, row, total
    cdef LocalDelta delta
    out = np.zeros(n_trees)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            if prod[i] >= n_prods:
                n_prods = prod[i] + 1
        for a in range(n_trees):
            if tree_off[a + 1] - tree_off[a] > max_m:
                max_m = tree_off[a + 1] - tree_off[a]
        local = <int*>malloc(sizeof(int) * max(n, 1))
        head = <int*>malloc(sizeof(int) * n_prods)
        nxt = <int*>malloc(sizeof(int) * max(max_m, 1))
        table = <double*>malloc(sizeof(double) * <size_t>max(max_m, 1) * <size_t>max(max_m, 1))
        if local == NULL or head == NULL or nxt == NULL or table == NULL:
            free(local); free(head); free(nxt); free(table)
            with gil:
                raise MemoryError(f"DAG self-kernels: trees of {max_m} distinct nodes")
        delta.prod = &prod[0] if n else NULL
        delta.local = local
        delta.table = table
        for p in range(n_prods):
            head[p] = -1
        for a in range(n_trees):
            s = tree_off[a]
            m = tree_off[a + 1] - s
            for i in range(m - 1, -1, -1):  # lists ascending: children's rows come first
                u = nodes[s + i]
                local[u] = i
                p = prod[u]
                nxt[i] = head[p]
                head[p] = i
            delta.m = m
            total = zero(ar)
            for i in range(m):
                u = nodes[s + i]
                k0u = kid_off[u]
                nk = kid_off[u + 1] - k0u
                row = zero(ar)
                vi = head[prod[u]]
                while vi >= 0:
                    v = nodes[s + vi]
                    # a cell is read for equal productions only, and children's rows come before row i: it was written
                    d = delta_product(ar, lam, sigma, &kids[k0u], &kids[kid_off[v]], nk, &delta)
                    table[<size_t>i * m + vi] = d
                    row = add(ar, row, mul(ar, cnt[s + vi], d))
                    vi = nxt[vi]
                total = add(ar, total, mul(ar, cnt[s + i], row))
            o[a] = total
            for i in range(m):
                head[prod[nodes[s + i]]] = -1
        free(local); free(head); free(nxt); free(table)
    return out

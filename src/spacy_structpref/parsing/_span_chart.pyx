# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Inside, outside, CKY and lazy k-best over labelled binary span trees (a tree CRF).

A tree over ``n`` words is a full binary bracketing with a label on each of
its ``2n - 1`` spans; it scores ``S(T) = sum of s(i, j, l)`` over its
labelled spans (Stern, Andreas & Klein 2017; Zhang, Zhou & Li 2020).
Everything is in log space over ``(n, n + 1)`` charts indexed by
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
from libc.stdlib cimport calloc, free, realloc
from libc.string cimport memcpy


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


# ------------------------------------------------------------------ k-best
# Lazy k-best derivations (Huang & Chiang 2005, algorithm 3) over the span
# hypergraph: a node is a span [i, j); a derivation of a longer span is a
# label rank ``a`` (the span's labels sorted best first), a split ``k`` and
# ranks ``b``, ``c`` of derivations of [i, k) and [k, j), scoring
# ``s(i, j, a-th label) + D(i, k)[b] + D(k, j)[c]``. A one-word span's r-th
# derivation is its r-th best label. Each split spans a grid of (a, b, c),
# monotone in each coordinate; a popped candidate x adds ``x + e_q`` only for
# coordinates q up to its first non-zero one, so every grid point has one
# parent (the point less one in its first non-zero coordinate) and is pushed
# once, without the hash set of duplicates that algorithm 3 keeps. A point
# that scores -inf (or lies past a list's end) has only such descendants, so
# it is dropped with them. Labels are ranked lazily, by selection, as far as
# a span's derivations reach: most spans only ever need their best label.

cdef struct Deriv:
    double score
    int a
    int k
    int b
    int c


cdef struct Cell:
    Deriv* found
    int n_found
    int cap_found
    Deriv* heap
    int n_heap
    int cap_heap
    int started
    int n_ranked  # labels ranked so far: perm[i, j, :n_ranked], best first


cdef struct KBest:
    const double* scores  # (n, n + 1, L)
    int* perm  # (n, n + 1, L): per span, label ids with the ranked ones first
    Py_ssize_t n
    Py_ssize_t L
    Cell* cells
    int err


cdef inline Py_ssize_t cell_at(KBest* s, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    return i * (s.n + 1) + j


cdef int ranked_label(KBest* s, Py_ssize_t i, Py_ssize_t j, Py_ssize_t a) noexcept nogil:
    """The id of span [i, j)'s a-th best label (a < L; ties: lower id first),
    ranking the span's labels by selection as far as a."""
    cdef Py_ssize_t c = cell_at(s, i, j), base = c * s.L, q, pick
    cdef Cell* cell = &s.cells[c]
    cdef int* perm = s.perm + base
    cdef const double* row = s.scores + base
    cdef int tmp
    if cell.n_ranked == 0:
        for q in range(s.L):
            perm[q] = <int>q
    while cell.n_ranked <= a:
        pick = cell.n_ranked
        for q in range(cell.n_ranked + 1, s.L):
            if row[perm[q]] > row[perm[pick]] or (row[perm[q]] == row[perm[pick]] and perm[q] < perm[pick]):
                pick = q
        tmp = perm[pick]
        perm[pick] = perm[cell.n_ranked]
        perm[cell.n_ranked] = tmp
        cell.n_ranked += 1
    return perm[a]


cdef inline double label_score(KBest* s, Py_ssize_t i, Py_ssize_t j, Py_ssize_t a) noexcept nogil:
    if a >= s.L:
        return -INFINITY
    return s.scores[cell_at(s, i, j) * s.L + ranked_label(s, i, j, a)]


cdef int grow(Deriv** items, int* cap, int need) noexcept nogil:
    # Room for ``need`` items; 0 when memory runs out.
    cdef int new_cap
    cdef Deriv* p
    if need <= cap[0]:
        return 1
    new_cap = cap[0] * 2 if cap[0] > 0 else 8
    if new_cap < need:
        new_cap = need
    p = <Deriv*>realloc(items[0], new_cap * sizeof(Deriv))
    if p == NULL:
        return 0
    items[0] = p
    cap[0] = new_cap
    return 1


cdef void heap_push(Cell* cell, Deriv d) noexcept nogil:
    cdef int q = cell.n_heap, parent
    cell.n_heap += 1
    while q > 0:
        parent = (q - 1) // 2
        if cell.heap[parent].score >= d.score:
            break
        cell.heap[q] = cell.heap[parent]
        q = parent
    cell.heap[q] = d


cdef Deriv heap_pop(Cell* cell) noexcept nogil:
    cdef Deriv top = cell.heap[0], last
    cdef int q = 0, kid, size
    cell.n_heap -= 1
    size = cell.n_heap
    if size > 0:
        last = cell.heap[size]
        while True:
            kid = 2 * q + 1
            if kid >= size:
                break
            if kid + 1 < size and cell.heap[kid + 1].score > cell.heap[kid].score:
                kid += 1
            if cell.heap[kid].score <= last.score:
                break
            cell.heap[q] = cell.heap[kid]
            q = kid
        cell.heap[q] = last
    return top


cdef double kth_score(KBest* s, Py_ssize_t i, Py_ssize_t j, int r) noexcept nogil:
    """Score of the r-th best derivation of [i, j), or -inf when it has fewer."""
    if j - i == 1:
        return label_score(s, i, j, r)
    if not find(s, i, j, r):
        return -INFINITY
    return s.cells[cell_at(s, i, j)].found[r].score


cdef void push_candidate(KBest* s, Py_ssize_t i, Py_ssize_t j, int a, int k, int b, int c) noexcept nogil:
    cdef double v = label_score(s, i, j, a)
    cdef Deriv d
    cdef Cell* cell
    if v == -INFINITY:
        return
    v += kth_score(s, i, k, b)
    if v == -INFINITY:
        return
    v += kth_score(s, k, j, c)
    if v == -INFINITY or s.err:
        return
    cell = &s.cells[cell_at(s, i, j)]
    if not grow(&cell.heap, &cell.cap_heap, cell.n_heap + 1):
        s.err = 1
        return
    d.score = v
    d.a = a
    d.k = k
    d.b = b
    d.c = c
    heap_push(cell, d)


cdef int find(KBest* s, Py_ssize_t i, Py_ssize_t j, int r) noexcept nogil:
    """Finds derivations of the span [i, j) (two words or more) until the
    r-th; 1 if it exists."""
    cdef Cell* cell = &s.cells[cell_at(s, i, j)]
    cdef Py_ssize_t k
    cdef Deriv last
    if r < cell.n_found:
        return 1
    if not cell.started:
        cell.started = 1
        for k in range(i + 1, j):
            push_candidate(s, i, j, 0, <int>k, 0, 0)
    while cell.n_found <= r and not s.err:
        if cell.n_found > 0:
            # Successors of the last derivation found (the lazy step of
            # algorithm 3), by the one-parent rule above.
            last = cell.found[cell.n_found - 1]
            push_candidate(s, i, j, last.a + 1, last.k, last.b, last.c)
            if last.a == 0:
                push_candidate(s, i, j, 0, last.k, last.b + 1, last.c)
                if last.b == 0:
                    push_candidate(s, i, j, 0, last.k, 0, last.c + 1)
        if cell.n_heap == 0:
            return 0
        if not grow(&cell.found, &cell.cap_found, cell.n_found + 1):
            s.err = 1
            return 0
        cell.found[cell.n_found] = heap_pop(cell)
        cell.n_found += 1
    return not s.err


cdef void write_tree(KBest* s, int r, int* out, int* stack) noexcept nogil:
    # The spans (i, j, label) of the root's r-th derivation into ``out`` (3
    # ints each) in preorder: by start, then longest first. ``stack`` holds
    # the (i, j, rank) still to write, at most 3 n ints.
    cdef Py_ssize_t written = 0, top = 1, i, j, cell
    cdef int rank
    cdef Deriv d
    stack[0] = 0
    stack[1] = <int>s.n
    stack[2] = r
    while top > 0:
        top -= 1
        i = stack[3 * top]
        j = stack[3 * top + 1]
        rank = stack[3 * top + 2]
        cell = cell_at(s, i, j)
        out[3 * written] = <int>i
        out[3 * written + 1] = <int>j
        if j - i == 1:
            out[3 * written + 2] = s.perm[cell * s.L + rank]
        else:
            d = s.cells[cell].found[rank]
            out[3 * written + 2] = s.perm[cell * s.L + d.a]
            # Right child below left, so the left subtree is written first.
            stack[3 * top] = d.k
            stack[3 * top + 1] = <int>j
            stack[3 * top + 2] = d.c
            stack[3 * top + 3] = <int>i
            stack[3 * top + 4] = d.k
            stack[3 * top + 5] = d.b
            top += 2
        written += 1


def kbest(const double[:, :, ::1] scores, Py_ssize_t k):
    """``(tree_scores, spans)`` of the ``k`` best trees (fewer when fewer
    have finite scores), best first: ``spans[t]`` is the ``(2n - 1, 3)``
    array of the t-th tree's ``(i, j, label)`` in preorder. Raises
    MemoryError when the derivation lists do not fit."""
    cdef Py_ssize_t n = scores.shape[0], L = scores.shape[2], c, count = 0, cap = 0, size = 3 * (2 * n - 1)
    cdef KBest s
    cdef double* found_scores = NULL
    cdef int* found_spans = NULL
    cdef void* p
    stack_a = np.zeros(3 * (n + 1), dtype=np.intc)
    perm_a = np.empty((n, n + 1, L), dtype=np.intc)
    cdef int[::1] stack = stack_a
    cdef int[:, :, ::1] perm = perm_a
    s.scores = &scores[0, 0, 0]
    s.perm = &perm[0, 0, 0]
    s.n = n
    s.L = L
    s.err = 0
    s.cells = <Cell*>calloc(n * (n + 1), sizeof(Cell))
    if s.cells == NULL:
        raise MemoryError("no memory for the k-best chart")
    with nogil:
        while count < k:
            if count == cap:
                cap = 2 * cap if cap else 16
                p = realloc(found_scores, cap * sizeof(double))
                if p == NULL:
                    s.err = 1
                    break
                found_scores = <double*>p
                p = realloc(found_spans, cap * size * sizeof(int))
                if p == NULL:
                    s.err = 1
                    break
                found_spans = <int*>p
            found_scores[count] = kth_score(&s, 0, n, <int>count)
            if s.err or found_scores[count] == -INFINITY:
                break
            write_tree(&s, <int>count, found_spans + count * size, &stack[0])
            count += 1
        for c in range(n * (n + 1)):
            free(s.cells[c].found)
            free(s.cells[c].heap)
        free(s.cells)
    tree_scores_a = np.empty(count)
    spans_a = np.empty((count, 2 * n - 1, 3), dtype=np.intc)
    cdef double[::1] tree_scores = tree_scores_a
    cdef int[:, :, ::1] spans = spans_a
    if count:
        memcpy(&tree_scores[0], found_scores, count * sizeof(double))
        memcpy(&spans[0, 0, 0], found_spans, count * size * sizeof(int))
    free(found_scores)
    free(found_spans)
    if s.err:
        raise MemoryError("no memory for the k-best derivation lists")
    return tree_scores_a, spans_a

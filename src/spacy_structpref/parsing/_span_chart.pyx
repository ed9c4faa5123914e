# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Inside, outside, CKY and lazy k-best over canonical labelled binary span trees (a tree CRF).

A tree over ``n`` words is a full binary bracketing with a label on each of
its ``2n - 1`` spans; it scores ``S(T) = sum of s(i, j, l)`` over its
labelled spans (Stern, Andreas & Klein 2017; Zhang, Zhou & Li 2020). Label 0
is the empty label, which marks a span that is not a constituent; the
binarisations are *canonical* (left-factored): a span of two or more words
that is the right child of its parent must carry a non-empty label. Each
treebank tree is then exactly one such binary tree (the n-ary node
``A -> c1 ... cm`` is ``((c1 c2) ... c(m-1)) cm`` with empty inner spans), so
the CRF is a distribution over treebank trees, not over their binarisations.

Everything is in log space over ``(n, n + 1)`` charts indexed by
``[i, j]``, ``0 <= i < j <= n``. A span is scored in two *positions*: as the
sentence or a left child (any label) and as a right child (non-empty labels
only when it has two or more words):

- ``lab[i, j] = log sum_l exp s(i, j, l)``; ``lab_right[i, j]`` the same
  over ``l >= 1`` (over every label for a one-word span);
- ``split[i, j] = log sum_{i<k<j} exp(beta[i, k] + beta_right[k, j])``
  (0 for one word); inside ``beta = lab + split``, ``beta_right =
  lab_right + split``; ``beta[0, n] = log Z``;
- outside ``alpha`` (as the sentence or a left child) and ``alpha_right``
  (as a right child), through the parent weight
  ``up[h, m] = log(exp(alpha[h, m] + lab[h, m]) + exp(alpha_right[h, m] + lab_right[h, m]))``:
  ``alpha[0, n] = 0``, ``alpha[i, j] = log sum_{m>j} exp(up[i, m] + beta_right[j, m])``,
  ``alpha_right[i, j] = log sum_{h<i} exp(up[h, j] + beta[h, i])``.

Every log-sum is taken as ``max + log sum exp(x - max)`` (two passes), so
long sentences neither overflow nor underflow, and a sum of nothing or of
``-inf`` terms is ``-inf`` (a score of ``-inf`` forbids a labelled span).
The callers check shapes and values; nothing here raises.
"""
import numpy as np
from libc.math cimport exp, log, INFINITY
from libc.stdlib cimport calloc, free, realloc
from libc.string cimport memcpy


cdef inline double lse_labels(const double[:, :, ::1] s, Py_ssize_t i, Py_ssize_t j, Py_ssize_t first,
                              Py_ssize_t L) noexcept nogil:
    # log sum over labels first .. L - 1 of span [i, j)
    cdef double m = -INFINITY, acc = 0.0
    cdef Py_ssize_t l
    for l in range(first, L):
        if s[i, j, l] > m:
            m = s[i, j, l]
    if m == -INFINITY:
        return m
    for l in range(first, L):
        acc += exp(s[i, j, l] - m)
    return m + log(acc)


cdef inline double log_add(double a, double b) noexcept nogil:
    if a < b:
        a, b = b, a
    if b == -INFINITY:
        return a
    return a + log(1.0 + exp(b - a))


cdef inline double lse_splits(const double[:, ::1] beta, const double[:, ::1] beta_right,
                              Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    cdef double m = -INFINITY, acc = 0.0, v
    cdef Py_ssize_t k
    for k in range(i + 1, j):
        v = beta[i, k] + beta_right[k, j]
        if v > m:
            m = v
    if m == -INFINITY:
        return m
    for k in range(i + 1, j):
        acc += exp(beta[i, k] + beta_right[k, j] - m)
    return m + log(acc)


cdef void inside_kernel(const double[:, :, ::1] s, double[:, ::1] lab, double[:, ::1] lab_right,
                        double[:, ::1] beta, double[:, ::1] beta_right) noexcept nogil:
    cdef Py_ssize_t n = s.shape[0], L = s.shape[2], span, i, j
    cdef double split
    for span in range(1, n + 1):
        for i in range(n - span + 1):
            j = i + span
            lab[i, j] = lse_labels(s, i, j, 0, L)
            if span == 1:
                lab_right[i, j] = lab[i, j]
                beta[i, j] = lab[i, j]
                beta_right[i, j] = lab[i, j]
            else:
                lab_right[i, j] = lse_labels(s, i, j, 1, L)
                split = lse_splits(beta, beta_right, i, j)
                beta[i, j] = lab[i, j] + split
                beta_right[i, j] = lab_right[i, j] + split


cdef inline double lse_parents(const double[:, ::1] up, const double[:, ::1] beta,
                               const double[:, ::1] beta_right, Py_ssize_t i, Py_ssize_t j,
                               int right) noexcept nogil:
    # Outside of [i, j) as a left child (right = 0: parents [i, m), sibling
    # [j, m) a right child) or as a right child (parents [h, j), sibling [h, i)).
    cdef Py_ssize_t n = up.shape[0], q
    cdef double mx = -INFINITY, acc = 0.0, v
    if right:
        for q in range(i):
            v = up[q, j] + beta[q, i]
            if v > mx:
                mx = v
    else:
        for q in range(j + 1, n + 1):
            v = up[i, q] + beta_right[j, q]
            if v > mx:
                mx = v
    if mx == -INFINITY:
        return mx
    if right:
        for q in range(i):
            acc += exp(up[q, j] + beta[q, i] - mx)
    else:
        for q in range(j + 1, n + 1):
            acc += exp(up[i, q] + beta_right[j, q] - mx)
    return mx + log(acc)


cdef void outside_kernel(const double[:, ::1] lab, const double[:, ::1] lab_right, const double[:, ::1] beta,
                         const double[:, ::1] beta_right, double[:, ::1] alpha, double[:, ::1] alpha_right,
                         double[:, ::1] up) noexcept nogil:
    cdef Py_ssize_t n = lab.shape[0], span, i, j
    alpha[0, n] = 0.0
    up[0, n] = lab[0, n]
    for span in range(n - 1, 0, -1):
        for i in range(n - span + 1):
            j = i + span
            alpha[i, j] = lse_parents(up, beta, beta_right, i, j, 0)
            alpha_right[i, j] = lse_parents(up, beta, beta_right, i, j, 1)
            up[i, j] = log_add(alpha[i, j] + lab[i, j], alpha_right[i, j] + lab_right[i, j])


def inside(const double[:, :, ::1] scores):
    """``(lab, lab_right, beta, beta_right)``: per span the log-sum of its
    label scores (all, and those a right child may take) and its log inside
    score in either position; ``beta[0, n]`` is ``log Z``."""
    cdef Py_ssize_t n = scores.shape[0]
    charts = [np.full((n, n + 1), -np.inf) for _ in range(4)]
    cdef double[:, ::1] lab = charts[0]
    cdef double[:, ::1] lab_right = charts[1]
    cdef double[:, ::1] beta = charts[2]
    cdef double[:, ::1] beta_right = charts[3]
    with nogil:
        inside_kernel(scores, lab, lab_right, beta, beta_right)
    return tuple(charts)


def outside(const double[:, ::1] lab, const double[:, ::1] lab_right, const double[:, ::1] beta,
            const double[:, ::1] beta_right):
    """``(alpha, alpha_right, up)`` from :func:`inside`'s charts: the log
    outside scores of every span as the sentence or a left child and as a
    right child, and ``up``, their sum weighted by the span's label mass in
    each position (the weight a span passes to its children)."""
    cdef Py_ssize_t n = lab.shape[0]
    charts = [np.full((n, n + 1), -np.inf) for _ in range(3)]
    cdef double[:, ::1] alpha = charts[0]
    cdef double[:, ::1] alpha_right = charts[1]
    cdef double[:, ::1] up = charts[2]
    with nogil:
        outside_kernel(lab, lab_right, beta, beta_right, alpha, alpha_right, up)
    return tuple(charts)


def label_marginals(const double[:, :, ::1] scores, const double[:, ::1] beta, const double[:, ::1] lab,
                    const double[:, ::1] alpha, const double[:, ::1] alpha_right, double log_z):
    """``mu[i, j, l]``, the posterior probability that the tree holds span
    ``[i, j)`` labelled ``l``: ``exp(s(i, j, l) + split(i, j) - log Z)``
    times the outside weight of the positions label ``l`` may take there."""
    cdef Py_ssize_t n = scores.shape[0], L = scores.shape[2], i, j, l
    cdef double split, both
    mu_a = np.zeros((n, n + 1, L))
    cdef double[:, :, ::1] mu = mu_a
    with nogil:
        for i in range(n):
            for j in range(i + 1, n + 1):
                if lab[i, j] == -INFINITY or beta[i, j] == -INFINITY:
                    continue
                split = beta[i, j] - lab[i, j] - log_z
                both = log_add(alpha[i, j], alpha_right[i, j])
                if both == -INFINITY:
                    continue
                for l in range(L):
                    if l == 0 and j - i > 1:
                        if alpha[i, j] > -INFINITY:
                            mu[i, j, l] = exp(alpha[i, j] + split + scores[i, j, l])
                    else:
                        mu[i, j, l] = exp(both + split + scores[i, j, l])
    return mu_a


cdef void viterbi_kernel(const double[:, :, ::1] s, double[:, ::1] best, double[:, ::1] best_right,
                         int[:, ::1] label, int[:, ::1] label_right, int[:, ::1] split) noexcept nogil:
    cdef Py_ssize_t n = s.shape[0], L = s.shape[2], span, i, j, k, l
    cdef double bl, bl_right, bk, v
    for span in range(1, n + 1):
        for i in range(n - span + 1):
            j = i + span
            bl = -INFINITY
            bl_right = -INFINITY
            label[i, j] = 0
            label_right[i, j] = 0
            for l in range(L):
                if s[i, j, l] > bl:
                    bl = s[i, j, l]
                    label[i, j] = <int>l
                if (l > 0 or span == 1) and s[i, j, l] > bl_right:
                    bl_right = s[i, j, l]
                    label_right[i, j] = <int>l
            if span == 1:
                best[i, j] = bl
                best_right[i, j] = bl
                continue
            bk = -INFINITY
            split[i, j] = <int>(i + 1)
            for k in range(i + 1, j):
                v = best[i, k] + best_right[k, j]
                if v > bk:
                    bk = v
                    split[i, j] = <int>k
            best[i, j] = bl + bk
            best_right[i, j] = bl_right + bk


def viterbi(const double[:, :, ::1] scores):
    """CKY with max: ``(best, label, label_right, split)``, the best tree
    score of every span as the sentence or a left child, its best label in
    that position and as a right child, and its best split point (the same in
    both positions; first of equals)."""
    cdef Py_ssize_t n = scores.shape[0]
    best_a = np.full((n, n + 1), -np.inf)
    best_right_a = np.full((n, n + 1), -np.inf)
    label_a = np.zeros((n, n + 1), dtype=np.intc)
    label_right_a = np.zeros((n, n + 1), dtype=np.intc)
    split_a = np.zeros((n, n + 1), dtype=np.intc)
    cdef double[:, ::1] best = best_a
    cdef double[:, ::1] best_right = best_right_a
    cdef int[:, ::1] label = label_a
    cdef int[:, ::1] label_right = label_right_a
    cdef int[:, ::1] split = split_a
    with nogil:
        viterbi_kernel(scores, best, best_right, label, label_right, split)
    return best_a, label_a, label_right_a, split_a


# ------------------------------------------------------------------ k-best
# Lazy k-best derivations (Huang & Chiang 2005, algorithm 3) over the span
# hypergraph: a node is a span [i, j) in a position (0: the sentence or a
# left child, 1: a right child); a derivation of a longer span is a label
# rank ``a`` (the labels the position allows, best first), a split ``k`` and
# ranks ``b``, ``c`` of derivations of [i, k) as a left and [k, j) as a right
# child, scoring ``s(i, j, a-th label) + D(i, k)[b] + D(k, j)[c]``. A
# one-word span's r-th derivation is its r-th best label in either position.
# Each split spans a grid of (a, b, c), monotone in each coordinate; a
# popped candidate x adds ``x + e_q`` only for coordinates q up to its first
# non-zero one, so every grid point has one parent (the point less one in
# its first non-zero coordinate) and is pushed once, without the hash set of
# duplicates that algorithm 3 keeps. A point that scores -inf (or lies past a
# list's end) has only such descendants, so it is dropped with them. Labels
# are ranked lazily, by selection, as far as a span's derivations reach:
# most spans only ever need their best label.

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


cdef struct Ranking:
    int n_ranked  # labels ranked so far: perm[i, j, :n_ranked], best first
    int empty_at  # where the empty label stands among them, -1 until ranked


cdef struct KBest:
    const double* scores  # (n, n + 1, L)
    int* perm  # (n, n + 1, L): per span, label ids with the ranked ones first
    Py_ssize_t n
    Py_ssize_t L
    Ranking* ranks  # per span
    Cell* cells  # per span and position
    int err


cdef inline Py_ssize_t cell_at(KBest* s, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    return i * (s.n + 1) + j


cdef int ranked_label(KBest* s, Py_ssize_t i, Py_ssize_t j, Py_ssize_t a) noexcept nogil:
    """The id of span [i, j)'s a-th best label (a < L; ties: lower id first),
    ranking the span's labels by selection as far as a."""
    cdef Py_ssize_t c = cell_at(s, i, j), base = c * s.L, q, pick
    cdef Ranking* rank = &s.ranks[c]
    cdef int* perm = s.perm + base
    cdef const double* row = s.scores + base
    cdef int tmp
    if rank.n_ranked == 0:
        rank.empty_at = -1
        for q in range(s.L):
            perm[q] = <int>q
    while rank.n_ranked <= a:
        pick = rank.n_ranked
        for q in range(rank.n_ranked + 1, s.L):
            if row[perm[q]] > row[perm[pick]] or (row[perm[q]] == row[perm[pick]] and perm[q] < perm[pick]):
                pick = q
        tmp = perm[pick]
        perm[pick] = perm[rank.n_ranked]
        perm[rank.n_ranked] = tmp
        if tmp == 0:
            rank.empty_at = rank.n_ranked
        rank.n_ranked += 1
    return perm[a]


cdef int label_id(KBest* s, Py_ssize_t i, Py_ssize_t j, Py_ssize_t a, int pos) noexcept nogil:
    """The id of the a-th best label span [i, j) may take in position
    ``pos``, or -1 past the end: a right child of two or more words skips
    the empty label."""
    cdef int lab, empty_at
    if pos == 0 or j - i == 1:
        return ranked_label(s, i, j, a) if a < s.L else -1
    if a + 1 >= s.L:
        return -1
    lab = ranked_label(s, i, j, a)
    empty_at = s.ranks[cell_at(s, i, j)].empty_at
    if 0 <= empty_at <= a:
        lab = ranked_label(s, i, j, a + 1)
    return lab


cdef inline double label_score(KBest* s, Py_ssize_t i, Py_ssize_t j, Py_ssize_t a, int pos) noexcept nogil:
    cdef int lab = label_id(s, i, j, a, pos)
    if lab < 0:
        return -INFINITY
    return s.scores[cell_at(s, i, j) * s.L + lab]


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


cdef double kth_score(KBest* s, Py_ssize_t i, Py_ssize_t j, int pos, int r) noexcept nogil:
    """Score of the r-th best derivation of [i, j) in position ``pos``, or
    -inf when it has fewer."""
    if j - i == 1:
        return label_score(s, i, j, r, 0)
    if not find(s, i, j, pos, r):
        return -INFINITY
    return s.cells[2 * cell_at(s, i, j) + pos].found[r].score


cdef void push_candidate(KBest* s, Py_ssize_t i, Py_ssize_t j, int pos, int a, int k, int b,
                         int c) noexcept nogil:
    cdef double v = label_score(s, i, j, a, pos)
    cdef Deriv d
    cdef Cell* cell
    if v == -INFINITY:
        return
    v += kth_score(s, i, k, 0, b)
    if v == -INFINITY:
        return
    v += kth_score(s, k, j, 1, c)
    if v == -INFINITY or s.err:
        return
    cell = &s.cells[2 * cell_at(s, i, j) + pos]
    if not grow(&cell.heap, &cell.cap_heap, cell.n_heap + 1):
        s.err = 1
        return
    d.score = v
    d.a = a
    d.k = k
    d.b = b
    d.c = c
    heap_push(cell, d)


cdef int find(KBest* s, Py_ssize_t i, Py_ssize_t j, int pos, int r) noexcept nogil:
    """Finds derivations of the span [i, j) (two words or more) in position
    ``pos`` until the r-th; 1 if it exists."""
    cdef Cell* cell = &s.cells[2 * cell_at(s, i, j) + pos]
    cdef Py_ssize_t k
    cdef Deriv last
    if r < cell.n_found:
        return 1
    if not cell.started:
        cell.started = 1
        for k in range(i + 1, j):
            push_candidate(s, i, j, pos, 0, <int>k, 0, 0)
    while cell.n_found <= r and not s.err:
        if cell.n_found > 0:
            # Successors of the last derivation found (the lazy step of
            # algorithm 3), by the one-parent rule above.
            last = cell.found[cell.n_found - 1]
            push_candidate(s, i, j, pos, last.a + 1, last.k, last.b, last.c)
            if last.a == 0:
                push_candidate(s, i, j, pos, 0, last.k, last.b + 1, last.c)
                if last.b == 0:
                    push_candidate(s, i, j, pos, 0, last.k, 0, last.c + 1)
        if cell.n_heap == 0:
            return 0
        if not grow(&cell.found, &cell.cap_found, cell.n_found + 1):
            s.err = 1
            return 0
        cell.found[cell.n_found] = heap_pop(cell)
        cell.n_found += 1
    return not s.err


cdef void write_tree(KBest* s, int r, int* out, int* stack) noexcept nogil:
    # The spans (i, j, label) of the sentence's r-th derivation into ``out``
    # (3 ints each) in preorder: by start, then longest first. ``stack``
    # holds the (i, j, rank, position) still to write, at most 4 (n + 1) ints.
    cdef Py_ssize_t written = 0, top = 1, i, j
    cdef int rank, pos
    cdef Deriv d
    stack[0] = 0
    stack[1] = <int>s.n
    stack[2] = r
    stack[3] = 0
    while top > 0:
        top -= 1
        i = stack[4 * top]
        j = stack[4 * top + 1]
        rank = stack[4 * top + 2]
        pos = stack[4 * top + 3]
        out[3 * written] = <int>i
        out[3 * written + 1] = <int>j
        if j - i == 1:
            out[3 * written + 2] = label_id(s, i, j, rank, 0)
        else:
            d = s.cells[2 * cell_at(s, i, j) + pos].found[rank]
            out[3 * written + 2] = label_id(s, i, j, d.a, pos)
            # Right child below left, so the left subtree is written first.
            stack[4 * top] = d.k
            stack[4 * top + 1] = <int>j
            stack[4 * top + 2] = d.c
            stack[4 * top + 3] = 1
            stack[4 * top + 4] = <int>i
            stack[4 * top + 5] = d.k
            stack[4 * top + 6] = d.b
            stack[4 * top + 7] = 0
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
    stack_a = np.zeros(4 * (n + 1), dtype=np.intc)
    perm_a = np.empty((n, n + 1, L), dtype=np.intc)
    cdef int[::1] stack = stack_a
    cdef int[:, :, ::1] perm = perm_a
    s.scores = &scores[0, 0, 0]
    s.perm = &perm[0, 0, 0]
    s.n = n
    s.L = L
    s.err = 0
    s.ranks = <Ranking*>calloc(n * (n + 1), sizeof(Ranking))
    s.cells = <Cell*>calloc(2 * n * (n + 1), sizeof(Cell))
    if s.cells == NULL or s.ranks == NULL:
        free(s.cells)
        free(s.ranks)
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
            found_scores[count] = kth_score(&s, 0, n, 0, <int>count)
            if s.err or found_scores[count] == -INFINITY:
                break
            write_tree(&s, <int>count, found_spans + count * size, &stack[0])
            count += 1
        for c in range(2 * n * (n + 1)):
            free(s.cells[c].found)
            free(s.cells[c].heap)
        free(s.cells)
        free(s.ranks)
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

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Lazy k-best derivations of a hypergraph (Huang & Chiang 2005, algorithm 3).

A derivation of node ``v`` is a hyperedge ``e`` into ``v`` and, for each of
``e``'s node tails in order, the rank of that tail's derivation; it scores
``logp[e]`` plus its tails' scores, added in tail order. Derivations are
ordered best first, ties by edge id, then by the ranks compared
lexicographically: one total order, so the lists do not depend on the order
in which candidates were found. ``kth(v, r)`` finds v's derivations on demand,
up to the r-th, each popped derivation pushing its successors only then.

A popped derivation with ranks x adds ``x + e_q`` only for tails q up to its
first non-zero rank, so every rank vector has one parent (the vector less
one in its first non-zero coordinate) and is pushed once, without the hash
set of duplicates that algorithm 3 keeps; the parent comes first in the order
above, so the lists are exactly the sorted derivations. A candidate past a
tail list's end or scoring -inf (or NaN) has only such descendants and is
dropped with them. The Python side checks the arrays; nothing here raises
but MemoryError.
"""
import numpy as np
from libc.math cimport INFINITY
from libc.stdlib cimport calloc, free, realloc


cdef struct Deriv:
    double score
    int edge
    Py_ssize_t ranks  # offset of its tails' ranks in the pool


cdef struct Node:
    Deriv* found
    int n_found
    Py_ssize_t cap_found
    Deriv* heap
    int n_heap
    Py_ssize_t cap_heap
    int started


cdef class ForestKBest:
    """The k-best state of one hypergraph. ``in_start``/``in_edges``: the
    edges into each node (CSR); ``tail_start``/``tails``: each edge's node
    tails in order (CSR, words left out); ``logp``: each edge's log-weight;
    ``label``/``start``/``end``: each node's label id and span, for
    :meth:`key`."""

    cdef const int[::1] in_start
    cdef const int[::1] in_edges
    cdef const int[::1] tail_start
    cdef const int[::1] tails
    cdef const double[::1] logp
    cdef const int[::1] label
    cdef const int[::1] start
    cdef const int[::1] end
    cdef Node* nodes
    cdef Py_ssize_t n_nodes
    cdef int* pool
    cdef Py_ssize_t n_pool
    cdef Py_ssize_t cap_pool
    cdef int err

    def __cinit__(self, const int[::1] in_start, const int[::1] in_edges, const int[::1] tail_start,
                  const int[::1] tails, const double[::1] logp, const int[::1] label, const int[::1] start,
                  const int[::1] end):
        self.in_start, self.in_edges = in_start, in_edges
        self.tail_start, self.tails, self.logp = tail_start, tails, logp
        self.label, self.start, self.end = label, start, end
        self.n_nodes = label.shape[0]
        self.nodes = <Node*>calloc(self.n_nodes if self.n_nodes else 1, sizeof(Node))
        if self.nodes == NULL:
            raise MemoryError("no memory for the k-best lists")

    def __dealloc__(self):
        cdef Py_ssize_t v
        if self.nodes != NULL:
            for v in range(self.n_nodes):
                free(self.nodes[v].found)
                free(self.nodes[v].heap)
            free(self.nodes)
        free(self.pool)

    cdef inline int arity(self, int e) noexcept nogil:
        return self.tail_start[e + 1] - self.tail_start[e]

    cdef Py_ssize_t new_ranks(self, int d) noexcept nogil:
        """Offset of ``d`` fresh ints at the pool's end, or -1 (memory)."""
        if not reserve(<void**>&self.pool, self.n_pool + d, &self.cap_pool, sizeof(int)):
            self.err = 1
            return -1
        self.n_pool += d
        return self.n_pool - d

    cdef inline bint better(self, Deriv a, Deriv b) noexcept nogil:
        cdef int q, d
        if a.score != b.score:
            return a.score > b.score
        if a.edge != b.edge:
            return a.edge < b.edge
        d = self.arity(a.edge)
        for q in range(d):
            if self.pool[a.ranks + q] != self.pool[b.ranks + q]:
                return self.pool[a.ranks + q] < self.pool[b.ranks + q]
        return False

    cdef void heap_push(self, Node* node, Deriv d) noexcept nogil:
        cdef int q = node.n_heap, parent
        node.n_heap += 1
        while q > 0:
            parent = (q - 1) // 2
            if not self.better(d, node.heap[parent]):
                break
            node.heap[q] = node.heap[parent]
            q = parent
        node.heap[q] = d

    cdef Deriv heap_pop(self, Node* node) noexcept nogil:
        cdef Deriv top = node.heap[0], last
        cdef int q = 0, kid, size
        node.n_heap -= 1
        size = node.n_heap
        if size > 0:
            last = node.heap[size]
            while True:
                kid = 2 * q + 1
                if kid >= size:
                    break
                if kid + 1 < size and self.better(node.heap[kid + 1], node.heap[kid]):
                    kid += 1
                if not self.better(node.heap[kid], last):
                    break
                node.heap[q] = node.heap[kid]
                q = kid
            node.heap[q] = last
        return top

    cdef void push(self, int v, int e, Py_ssize_t base, int bump) noexcept nogil:
        """Push v's candidate over edge ``e`` whose ranks are those at pool
        offset ``base`` (zeros when ``base`` is -1) with tail ``bump`` one
        higher (none when -1), if every tail has that derivation and the
        score is finite."""
        cdef int q, d = self.arity(e), t, r
        cdef Py_ssize_t off
        cdef double score = self.logp[e]
        cdef Deriv cand
        cdef Node* node
        for q in range(d):
            t = self.tails[self.tail_start[e] + q]
            r = (self.pool[base + q] if base >= 0 else 0) + (1 if q == bump else 0)
            if not self.find(t, r):
                return
            score += self.nodes[t].found[r].score
        if not (score > -INFINITY):
            return
        off = self.new_ranks(d)
        if off < 0:
            return
        for q in range(d):
            self.pool[off + q] = (self.pool[base + q] if base >= 0 else 0) + (1 if q == bump else 0)
        node = &self.nodes[v]
        if not reserve(<void**>&node.heap, node.n_heap + 1, &node.cap_heap, sizeof(Deriv)):
            self.err = 1
            return
        cand.score, cand.edge, cand.ranks = score, e, off
        self.heap_push(node, cand)

    cdef int find(self, int v, int r) noexcept nogil:
        """Finds v's derivations up to the r-th; 1 if it exists."""
        cdef Node* node = &self.nodes[v]
        cdef Deriv last
        cdef int q, d, i
        if r < node.n_found:
            return 1
        if not node.started:
            node.started = 1
            for i in range(self.in_start[v], self.in_start[v + 1]):
                self.push(v, self.in_edges[i], -1, -1)
                node = &self.nodes[v]
        while node.n_found <= r and not self.err:
            if node.n_found > 0:
                last = node.found[node.n_found - 1]
                d = self.arity(last.edge)
                for q in range(d):
                    self.push(v, last.edge, last.ranks, q)
                    if self.pool[last.ranks + q] != 0:
                        break
            if node.n_heap == 0:
                return 0
            if not reserve(<void**>&node.found, node.n_found + 1, &node.cap_found, sizeof(Deriv)):
                self.err = 1
                return 0
            node.found[node.n_found] = self.heap_pop(node)
            node.n_found += 1
        return not self.err

    cdef int check(self, Py_ssize_t v, Py_ssize_t r) except -1:
        if not 0 <= v < self.n_nodes:
            raise IndexError(f"node {v} is not in the forest ({self.n_nodes} nodes)")
        if r < 0:
            raise IndexError(f"rank {r} is negative")
        cdef int found
        with nogil:
            found = self.find(<int>v, <int>r)
        if self.err:
            raise MemoryError("no memory for the k-best lists")
        return found

    def kth(self, Py_ssize_t v, Py_ssize_t r):
        """The r-th (0-based) best derivation ``(logp, edge, ranks)`` of node
        v, ``ranks`` a tuple (one rank per node tail), or None."""
        if not self.check(v, r):
            return None
        cdef Deriv d = self.nodes[v].found[r]
        return d.score, d.edge, tuple([self.pool[d.ranks + q] for q in range(self.arity(d.edge))])

    def key(self, Py_ssize_t v, Py_ssize_t r):
        """The r-th derivation of v as the bytes of its nodes' ``(label,
        start, end)`` in preorder (equal for two derivations exactly when
        they give the same tree over the same words), or None."""
        if not self.check(v, r):
            return None
        cdef int* out = NULL
        cdef int* todo = NULL
        cdef Py_ssize_t n_out = 0, cap_out = 0, n_todo = 0, cap_todo = 0
        cdef int u, rank, q, ok = 1
        cdef Deriv d
        with nogil:
            ok = push_pair(&todo, &n_todo, &cap_todo, <int>v, <int>r)
            while ok and n_todo > 0:
                n_todo -= 2
                u, rank = todo[n_todo], todo[n_todo + 1]
                ok = push_triple(&out, &n_out, &cap_out, self.label[u], self.start[u], self.end[u])
                d = self.nodes[u].found[rank]
                q = self.arity(d.edge) - 1
                while ok and q >= 0:  # last tail pushed first, so the first is written first
                    ok = push_pair(&todo, &n_todo, &cap_todo, self.tails[self.tail_start[d.edge] + q],
                                   self.pool[d.ranks + q])
                    q -= 1
        try:
            if not ok:
                raise MemoryError("no memory for a derivation's key")
            return (<char*>out)[:n_out * sizeof(int)]
        finally:
            free(out)
            free(todo)


cdef int push_pair(int** items, Py_ssize_t* n, Py_ssize_t* cap, int a, int b) noexcept nogil:
    if not reserve(<void**>items, n[0] + 2, cap, sizeof(int)):
        return 0
    items[0][n[0]] = a
    items[0][n[0] + 1] = b
    n[0] += 2
    return 1


cdef int push_triple(int** items, Py_ssize_t* n, Py_ssize_t* cap, int a, int b, int c) noexcept nogil:
    if not reserve(<void**>items, n[0] + 3, cap, sizeof(int)):
        return 0
    items[0][n[0]] = a
    items[0][n[0] + 1] = b
    items[0][n[0] + 2] = c
    n[0] += 3
    return 1


cdef int reserve(void** items, Py_ssize_t need, Py_ssize_t* cap, size_t size) noexcept nogil:
    # Room for ``need`` items of ``size`` bytes, growing by doubling; 0 when memory runs out.
    cdef Py_ssize_t new_cap
    cdef void* p
    if need <= cap[0]:
        return 1
    new_cap = 2 * cap[0] if cap[0] > 0 else 16
    if new_cap < need:
        new_cap = need
    p = realloc(items[0], new_cap * size)
    if p == NULL:
        return 0
    items[0] = p
    cap[0] = new_cap
    return 1

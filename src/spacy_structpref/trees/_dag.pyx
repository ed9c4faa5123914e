# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Occurrence counts of the trees of a hash-consed tree set
(:class:`~.dag.TreeSetDAG`), without the GIL: a candidate set of the
incremental parser adds tens of trees per word, each a walk over its
distinct subtrees."""
import numpy as np
from libc.stdlib cimport malloc, free, qsort


cdef int _descending(const void* a, const void* b) noexcept nogil:
    cdef int x = (<const int*>a)[0], y = (<const int*>b)[0]
    return (x < y) - (x > y)


cdef int _collect(const int[::1] kid_off, const int[::1] kids, int root, int t, int* stamp, int* stack,
                  int* found) noexcept nogil:
    """The distinct nodes under ``root`` (inclusive) into ``found``; returns how many."""
    cdef int m = 0, top = 1, u, c, k
    stack[0] = root
    stamp[root] = t
    while top:
        top -= 1
        u = stack[top]
        found[m] = u
        m += 1
        for k in range(kid_off[u], kid_off[u + 1]):
            c = kids[k]
            if stamp[c] != t:
                stamp[c] = t
                stack[top] = c
                top += 1
    return m


def dag_occurrences(const int[::1] kid_off, const int[::1] kids, const int[::1] roots):
    """Per tree (the one under each root): its distinct DAG nodes, ascending,
    and how often each occurs in it, as ``(tree, node, count)`` arrays, tree
    by tree. DAG ids are topological (children before parents), so counts
    pass from parents to children in descending id order: a node's count is
    complete before it is passed on."""
    cdef int n = kid_off.shape[0] - 1, n_roots = roots.shape[0]
    cdef int t, i, u, k, m
    cdef long long total = 0, pos = 0
    cdef int* stamp = NULL
    cdef int* stack = NULL
    cdef int* found = NULL
    cdef double* count = NULL
    for t in range(n_roots):
        if not 0 <= roots[t] < n:
            raise ValueError(f"root {roots[t]} is not one of the {n} DAG nodes")
    stamp = <int*>malloc(sizeof(int) * max(n, 1))
    stack = <int*>malloc(sizeof(int) * max(n, 1))
    found = <int*>malloc(sizeof(int) * max(n, 1))
    count = <double*>malloc(sizeof(double) * max(n, 1))
    if not (stamp and stack and found and count):
        free(stamp); free(stack); free(found); free(count)
        raise MemoryError(f"occurrences of {n_roots} trees over {n} DAG nodes")
    with nogil:  # sizes first, so the outputs are allocated once
        for u in range(n):
            stamp[u] = -1
        for t in range(n_roots):
            total += _collect(kid_off, kids, roots[t], t, stamp, stack, found)
    tree_of = np.empty(total, dtype=np.int64)
    node = np.empty(total, dtype=np.int32)
    cnt = np.empty(total, dtype=np.float64)
    cdef long long[::1] tv = tree_of
    cdef int[::1] nv = node
    cdef double[::1] cv = cnt
    with nogil:
        for u in range(n):
            stamp[u] = -1
        for t in range(n_roots):
            m = _collect(kid_off, kids, roots[t], t, stamp, stack, found)
            qsort(found, m, sizeof(int), _descending)
            for i in range(m):
                count[found[i]] = 0.0
            count[roots[t]] = 1.0
            for i in range(m):
                u = found[i]
                for k in range(kid_off[u], kid_off[u + 1]):
                    count[kids[k]] += count[u]
            for i in range(m - 1, -1, -1):  # ascending
                tv[pos] = t
                nv[pos] = found[i]
                cv[pos] = count[found[i]]
                pos += 1
    free(stamp); free(stack); free(found); free(count)
    return tree_of, node, cnt

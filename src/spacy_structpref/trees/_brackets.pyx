# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Many bracketed trees read in two passes over one buffer, without the GIL
(``brackets.bracketed_to_arrays`` is the Python side).

``tokenize`` cuts tokens from the UTF-8 bytes exactly as ``str.split`` does
after brackets are spaced out, and interns each distinct spelling as it is
cut. ``build`` runs the bracket grammar of ``parse_bracketed`` over the token
ids and writes each tree's post-order node arrays (the layout of
``TreeArrays``); each node's production key, its label and its children's
symbols in token ids, is interned on the spot, so Python later maps only the
distinct labels, words and productions to SymbolTable ids.
"""
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

import numpy as np

# Token ids: the brackets, the empty label of PTB's unlabeled outer bracket,
# then interned spellings.
cdef enum:
    OPEN = 0
    CLOSE = 1
    NO_LABEL = 2
    FIRST_SPELLED = 3

# Bytes that end a token: ASCII whitespace as str.split knows it, and brackets
# (the caller respaces non-ASCII text, whose whitespace needs decoding).
cdef unsigned char BREAK[256]


cdef void init_breaks():
    cdef int c
    for c in range(128):
        BREAK[c] = chr(c).isspace() or chr(c) in "()"


init_breaks()


cdef struct Interner:
    char* data          # distinct keys end to end
    size_t* off         # key id -> start in data; off[n] is the end
    uint64_t* hashes    # key id -> hash
    int* slots          # open addressing: key id, -1 when empty
    size_t mask, data_cap
    int n, id_cap


cdef int interner_init(Interner* t) noexcept nogil:
    t.n = 0
    t.id_cap = 1024
    t.data_cap = 16384
    t.mask = 2047
    t.data = <char*>malloc(t.data_cap)
    t.off = <size_t*>malloc(sizeof(size_t) * (t.id_cap + 1))
    t.hashes = <uint64_t*>malloc(sizeof(uint64_t) * t.id_cap)
    t.slots = <int*>malloc(sizeof(int) * (t.mask + 1))
    if t.data == NULL or t.off == NULL or t.hashes == NULL or t.slots == NULL:
        return -1
    memset(t.slots, 0xff, sizeof(int) * (t.mask + 1))
    t.off[0] = 0
    return 0


cdef void interner_free(Interner* t) noexcept nogil:
    free(t.data)
    free(t.off)
    free(t.hashes)
    free(t.slots)


cdef inline uint64_t fnv1a(const char* key, size_t size) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL
    cdef size_t i
    for i in range(size):
        h = (h ^ <unsigned char>key[i]) * 1099511628211ULL
    return h


cdef int grow_slots(Interner* t) noexcept nogil:
    cdef size_t mask = t.mask * 2 + 1, i
    cdef int k
    cdef int* slots = <int*>malloc(sizeof(int) * (mask + 1))
    if slots == NULL:
        return -1
    memset(slots, 0xff, sizeof(int) * (mask + 1))
    for k in range(t.n):
        i = t.hashes[k] & mask
        while slots[i] >= 0:
            i = (i + 1) & mask
        slots[i] = k
    free(t.slots)
    t.slots = slots
    t.mask = mask
    return 0


cdef int intern(Interner* t, const char* key, size_t size) noexcept nogil:
    """The id of ``key`` (``size`` bytes), a new one if unseen; -1: out of memory."""
    cdef uint64_t h = fnv1a(key, size)
    cdef size_t i = h & t.mask, need
    cdef int k
    cdef void* p
    while True:
        k = t.slots[i]
        if k < 0:
            break
        if t.hashes[k] == h and t.off[k + 1] - t.off[k] == size and memcmp(t.data + t.off[k], key, size) == 0:
            return k
        i = (i + 1) & t.mask
    if t.n == t.id_cap:
        t.id_cap *= 2
        p = realloc(t.off, sizeof(size_t) * (t.id_cap + 1))
        if p == NULL:
            return -1
        t.off = <size_t*>p
        p = realloc(t.hashes, sizeof(uint64_t) * t.id_cap)
        if p == NULL:
            return -1
        t.hashes = <uint64_t*>p
    need = t.off[t.n] + size
    if need > t.data_cap:
        t.data_cap = max(2 * t.data_cap, need)
        p = realloc(t.data, t.data_cap)
        if p == NULL:
            return -1
        t.data = <char*>p
    k = t.n
    memcpy(t.data + t.off[k], key, size)
    t.off[k + 1] = need
    t.hashes[k] = h
    t.slots[i] = k
    t.n += 1
    if 2 * <size_t>t.n > t.mask and grow_slots(t) != 0:  # keep the table at most half full
        return -1
    return k


cdef object interned_keys(Interner* t):
    """The distinct keys as one bytes object and their offsets."""
    off = np.empty(t.n + 1, dtype=np.int64)
    cdef int64_t[::1] o = off
    cdef int k
    for k in range(t.n + 1):
        o[k] = t.off[k]
    return t.data[:t.off[t.n]], off


def tokenize(const unsigned char[::1] buf, const int64_t[::1] text_off):
    """Token ids of the texts ``buf[text_off[i]:text_off[i + 1]]``, end to end.

    Returns ``(tokens, token_off, spellings)``: text i's tokens are
    ``tokens[token_off[i]:token_off[i + 1]]`` and token id t is spelled
    ``spellings[t]`` (ids 0, 1, 2: ``(``, ``)``, the empty label).
    """
    cdef Py_ssize_t n_texts = text_off.shape[0] - 1
    tokens = np.empty(buf.shape[0], dtype=np.int32)  # at most one token per byte
    token_off = np.zeros(n_texts + 1, dtype=np.int64)
    cdef int[::1] tok = tokens
    cdef int64_t[::1] tok_off = token_off
    cdef Interner t
    cdef Py_ssize_t x, i, j, end, n = 0
    cdef unsigned char c
    cdef int k, failed = 0
    with nogil:
        failed = interner_init(&t)
        for x in range(n_texts if not failed else 0):
            i = text_off[x]
            end = text_off[x + 1]
            while i < end:
                c = buf[i]
                if c == b'(':
                    tok[n] = OPEN
                elif c == b')':
                    tok[n] = CLOSE
                elif BREAK[c]:
                    i += 1
                    continue
                else:
                    j = i + 1
                    while j < end and not BREAK[buf[j]]:
                        j += 1
                    k = intern(&t, <const char*>&buf[i], j - i)
                    if k < 0:
                        failed = 1
                        break
                    tok[n] = FIRST_SPELLED + k
                    i = j - 1
                n += 1
                i += 1
            if failed:
                break
            tok_off[x + 1] = n
    try:
        if failed:
            raise MemoryError("interning bracket tokens")
        data, off = interned_keys(&t)
    finally:
        interner_free(&t)
    spellings = ["(", ")", ""]
    spellings.extend(data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(off.tolist(), off[1:].tolist()))
    return tokens[:n].copy(), token_off, spellings


def build(const int[::1] tok, const int64_t[::1] tok_off, int n_symbols):
    """Post-order node arrays of every text's tree (``tokenize``'s output).

    Returns a dict: ``bad``, the first text that is no single well-formed
    tree (-1: none; ``parse_bracketed`` then says what is wrong), and per
    tree ``node_off``/``n_words``; per node ``label`` (a token id),
    ``prod`` (a key id), ``start``, ``end``, ``child_off`` (global) into
    ``children`` (local refs as in TreeArrays); ``labels``/``words``: token
    ids in order of first use as a label (post-order) / as a word; ``keys``,
    ``key_off``: the distinct production keys, ``label, child symbols...``
    with a node child as its label's token id and a word t as ``-(t + 1)``.
    """
    cdef Py_ssize_t n_texts = tok_off.shape[0] - 1, n_tok = tok.shape[0]
    tokens = np.asarray(tok)
    cdef Py_ssize_t n_open = np.count_nonzero(tokens == OPEN)
    cdef Py_ssize_t max_len = int(np.diff(tok_off).max()) if n_texts else 0
    arrays = {name: np.empty(n_open, dtype=np.int32) for name in ("label", "prod", "start", "end")}
    arrays["child_off"] = np.zeros(n_open + 1, dtype=np.int32)
    arrays["children"] = np.empty(n_tok, dtype=np.int32)
    arrays["node_off"] = np.zeros(n_texts + 1, dtype=np.int32)
    arrays["n_words"] = np.zeros(n_texts, dtype=np.int32)
    arrays["labels"] = np.empty(n_symbols, dtype=np.int32)
    arrays["words"] = np.empty(n_symbols, dtype=np.int32)
    cdef int[::1] label = arrays["label"], prod = arrays["prod"], start = arrays["start"], end = arrays["end"]
    cdef int[::1] child_off = arrays["child_off"], children = arrays["children"]
    cdef int[::1] node_off = arrays["node_off"], n_words = arrays["n_words"]
    cdef int[::1] labels = arrays["labels"], words = arrays["words"]
    cdef Interner keys
    cdef int* refs = NULL
    cdef int* syms = NULL
    cdef int* segs = NULL
    cdef char* seen = NULL  # as a label / as a word
    cdef Py_ssize_t x, i, bad = -1, n_labels = 0, n_words_seen = 0
    cdef int t, lab, top, depth, seg, nk, r0, r1, p, base = 0, node, n_w, kid_pos = 0, failed
    cdef bint closed
    try:
        failed = interner_init(&keys)
        # Per open node a header slot on the stacks holds its label, then its
        # children's refs and symbols: at ')' the key is the contiguous run
        # syms[seg - 1:top], and the node replaces it.
        refs = <int*>malloc(sizeof(int) * (max_len + 1))
        syms = <int*>malloc(sizeof(int) * (max_len + 1))
        segs = <int*>malloc(sizeof(int) * (max_len + 1))
        seen = <char*>calloc(2 * max(n_symbols, 1), 1)
        if failed or refs == NULL or syms == NULL or segs == NULL or seen == NULL:
            raise MemoryError("bracket parsing workspace")
        with nogil:
            for x in range(n_texts):
                i = tok_off[x]
                if i == tok_off[x + 1] or tok[i] != OPEN:
                    bad = x
                    break
                top = depth = node = n_w = 0
                closed = False
                while i < tok_off[x + 1]:
                    t = tok[i]
                    if closed:  # text after the tree
                        bad = x
                        break
                    if t == OPEN:
                        lab = NO_LABEL
                        if i + 1 < tok_off[x + 1] and tok[i + 1] >= FIRST_SPELLED:
                            i += 1
                            lab = tok[i]
                        syms[top] = lab
                        top += 1
                        segs[depth] = top
                        depth += 1
                    elif t == CLOSE:
                        depth -= 1
                        seg = segs[depth]
                        nk = top - seg
                        if nk == 0:  # a constituent without children
                            bad = x
                            break
                        lab = syms[seg - 1]
                        p = intern(&keys, <const char*>&syms[seg - 1], sizeof(int) * (nk + 1))
                        if p < 0:
                            failed = 1
                            break
                        label[base + node] = lab
                        prod[base + node] = p
                        memcpy(&children[kid_pos], &refs[seg], sizeof(int) * nk)
                        kid_pos += nk
                        child_off[base + node + 1] = kid_pos
                        r0 = refs[seg]
                        r1 = refs[top - 1]
                        start[base + node] = start[base + r0] if r0 >= 0 else -r0 - 1
                        end[base + node] = end[base + r1] if r1 >= 0 else -r1
                        if not seen[lab]:
                            seen[lab] = 1
                            labels[n_labels] = lab
                            n_labels += 1
                        top = seg - 1
                        refs[top] = node
                        top += 1
                        node += 1
                        closed = depth == 0
                    else:
                        n_w += 1
                        refs[top] = -n_w
                        syms[top] = -(t + 1)
                        top += 1
                        if not seen[n_symbols + t]:
                            seen[n_symbols + t] = 1
                            words[n_words_seen] = t
                            n_words_seen += 1
                    i += 1
                if bad >= 0 or failed:
                    break
                if not closed:  # unclosed brackets
                    bad = x
                    break
                base += node
                node_off[x + 1] = base
                n_words[x] = n_w
        if failed:
            raise MemoryError("interning productions")
        data, off = interned_keys(&keys)
    finally:
        free(refs); free(syms); free(segs); free(seen)
        interner_free(&keys)
    arrays["bad"] = bad
    arrays["children"] = arrays["children"][:kid_pos]
    arrays["labels"] = arrays["labels"][:n_labels]
    arrays["words"] = arrays["words"][:n_words_seen]
    arrays["keys"] = np.frombuffer(data, dtype=np.int32)
    arrays["key_off"] = off // 4
    return arrays

"""Word vectors from raw text, for models that read static vectors (the
span-CRF parser's ``include_static_vectors``) where no pretrained vectors
exist: the positive pointwise mutual information (PPMI) of words and their
contexts, factorised by a truncated SVD (Levy, Goldberg & Dagan 2015,
"Improving distributional similarity with lessons learned from word
embeddings", TACL 3: §3 and §5, with their context distribution smoothing
and eigenvalue weighting).

A word's contexts are the words within ``window`` positions of it in its
sentence, a context at distance k counting 1/k (the dynamic window of
word2vec and GloVe, Levy et al. 2015 §3.1); only words seen ``min_count``
times or more take part. With ``#(w, c)`` these weighted counts,

    PPMI(w, c) = max(0, log( #(w, c) · Σ_c' #(c')^α / (#(w) · #(c)^α) ))

(α = ``smoothing``, 0.75, Levy et al. 2015 Eq. 3: ``#(w)`` the row sums and
``#(c)`` the column sums of the count matrix, which is symmetric), and the
vectors are the rows of ``U_d · Σ_d^p`` for the d largest singular values of
the PPMI matrix (p = ``eigenvalue_weight``, 0.5, §3.3), scaled to unit length.
"""
import hashlib
from collections import Counter
from typing import Iterable, List, Sequence, Tuple

import numpy

from ..errors import StructPrefError, check_count, check_number


def vocabulary(sentences: Iterable[Sequence[str]], min_count: int) -> List[str]:
    """The words seen at least ``min_count`` times, most frequent first
    (ties alphabetical)."""
    check_count("min_count", min_count, 1)
    counts = Counter(word for sentence in sentences for word in sentence)
    return sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))


def cooccurrences(sentences: Iterable[Sequence[str]], words: Sequence[str], window: int):
    """The symmetric ``len(words)`` × ``len(words)`` matrix (``scipy.sparse``
    CSR, float64) of weighted co-occurrence counts: each pair of words of
    ``words`` at distance k ≤ ``window`` in a sentence adds 1/k in both
    directions; other words are left out but keep their positions."""
    from scipy import sparse

    check_count("window", window, 1)
    index = {w: i for i, w in enumerate(words)}
    rows, cols, weights = [], [], []
    for sentence in sentences:
        ids = numpy.asarray([index.get(w, -1) for w in sentence], dtype=numpy.int64)
        for k in range(1, min(window, len(ids) - 1) + 1):
            left, right = ids[:-k], ids[k:]
            both = (left >= 0) & (right >= 0)
            rows.append(left[both])
            cols.append(right[both])
            weights.append(numpy.full(int(both.sum()), 1.0 / k))
    n = len(words)
    if not rows:
        return sparse.csr_matrix((n, n))
    r, c, v = (numpy.concatenate(x) for x in (rows, cols, weights))
    return sparse.coo_matrix((numpy.concatenate([v, v]), (numpy.concatenate([r, c]), numpy.concatenate([c, r]))),
                             shape=(n, n)).tocsr()


def ppmi(counts, smoothing: float = 0.75):
    """Positive PMI of a square co-occurrence count matrix (``scipy.sparse``),
    contexts' counts raised to ``smoothing`` (see the module docstring); CSR,
    only the positive entries stored."""
    from scipy import sparse

    check_number("smoothing", smoothing, 0, 1, above=True)
    counts = sparse.coo_matrix(counts)
    if not counts.nnz:
        return sparse.csr_matrix(counts.shape)
    word_counts = numpy.asarray(counts.sum(axis=1)).ravel()
    context_share = numpy.asarray(counts.sum(axis=0)).ravel() ** smoothing
    context_share /= context_share.sum()
    pmi = numpy.log(counts.data / (word_counts[counts.row] * context_share[counts.col]))
    keep = pmi > 0
    return sparse.csr_matrix((pmi[keep], (counts.row[keep], counts.col[keep])), shape=counts.shape)


def svd_vectors(matrix, dim: int, eigenvalue_weight: float = 0.5, seed: int = 0) -> numpy.ndarray:
    """Unit rows of ``U_d Σ_d^p`` for the ``dim`` largest singular values of
    ``matrix`` (randomized SVD, Halko, Martinsson & Tropp 2011, seeded);
    float32. A row of zeros stays zero."""
    from sklearn.utils.extmath import randomized_svd

    check_count("dim", dim, 1)
    if dim > min(matrix.shape):
        raise StructPrefError(f"dim {dim} is above the {min(matrix.shape)} words that take part: lower dim "
                              "or min_count, or give more text")
    U, s, _ = randomized_svd(matrix, dim, n_iter=5, random_state=seed)
    vectors = U * s ** eigenvalue_weight
    norms = numpy.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / numpy.where(norms > 0, norms, 1.0)).astype("float32")


def train_word_vectors(sentences: Sequence[Sequence[str]], dim: int = 300, window: int = 2, min_count: int = 2,
                       smoothing: float = 0.75, eigenvalue_weight: float = 0.5,
                       seed: int = 0) -> Tuple[List[str], numpy.ndarray]:
    """``(words, vectors)``: the PPMI–SVD vectors (module docstring) of the
    words of ``sentences`` (lists of strings, already normalised, e.g.
    lowercased) seen ``min_count`` times or more; ``vectors[i]`` is ``words[i]``'s."""
    words = vocabulary(sentences, min_count)
    if not words:
        raise StructPrefError(f"no word occurs {min_count} times or more in the {len(sentences)} sentences given")
    return words, svd_vectors(ppmi(cooccurrences(sentences, words, window), smoothing), dim, eigenvalue_weight, seed)


def vectors_digest(vectors) -> str:
    """SHA-256 of a spaCy vectors table: its rows and which key reads which
    row (what a model trained on the table depends on)."""
    digest = hashlib.sha256(numpy.ascontiguousarray(vectors.data, dtype="float32").tobytes())
    digest.update(repr(sorted((int(key), int(row)) for key, row in vectors.key2row.items())).encode())
    return digest.hexdigest()

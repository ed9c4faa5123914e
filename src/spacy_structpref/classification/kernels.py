"""Kernels between parsed Docs, for the kernel SVM of ``kernel_textcat``.

A *Doc kernel* reads one item per Doc (:meth:`items`: the 1-best tree, the
pruned packed forest, the words), ``prepare``\\ s a list of items once, and
gives the kernel matrix between two prepared lists (:meth:`gram`; ``b=None``:
the symmetric Gram matrix, each pair computed once). ``encode``/``decode``
turn items into msgpack-ready data (a saved model keeps its support
items), and ``settings`` is what a saved model is checked against. What a
kernel learns from the training Docs themselves (``fit``: the word clusters
of ``word_clusters``) is saved by ``state`` and restored by ``load_state``.

- :class:`TreeDocKernel`: the subset-tree kernel (Collins & Duffy 2002) over
  the 1-best trees, cosine-normalised, on hash-consed tree sets (DAG
  sharing, Aiolli et al. 2006) through the learners' ``TreeKernel``.
  With ``word_clusters = k`` (it and the forest kernel), each word gets a
  node of its cluster among k k-means clusters of the pipeline's static
  vectors (:mod:`.word_clusters`, :mod:`..trees.word_classes`; Plank &
  Moschitti 2013), so fragments also match over words of one cluster.
- :class:`ForestDocKernel`: the forest kernel (Zhang et al. 2010, eq. 5–7:
  the expected subset-tree kernel over the trees of two packed forests),
  cosine-normalised, over the forests ``forest_parser`` stores (pruned by
  its ``merit_threshold``, as the reranker's are; ``merit_ratio`` prunes
  them harder, as Huang 2008), hyperedge probabilities tempered by ``alpha``
  (α = 1: the parser's distribution) as the reranker's forest kernel does.
- :class:`BowDocKernel`: cosine of word n-gram counts (uni- and bigrams).
- :class:`SumDocKernel`: ``Σ_k w_k K_k``, e.g. a composite of a structure
  kernel and the bag of words (Zhang et al. 2006's composite kernel).
"""
from typing import List, Optional, Sequence

import numpy as np

from ..errors import SavedModelError, StructPrefError, check_count, check_number
from ..kernels.inputs import check_lambda, check_threads
from ..trees.arrays import INT, SymbolTable
from ..trees.word_classes import forest_with_word_classes, tree_with_word_classes

KERNEL_NAMES = ("tree", "forest", "bow", "tree+bow", "forest+bow")
# The BOW kernel's longest n-grams: a text's features grow with max_n × its length (and up to
# max_n = its length, with the cube of the length), and n-grams this long are almost never shared.
MAX_NGRAM = 10


class _DocKernel:
    """A Doc kernel that learns nothing from the training Docs but its items."""

    def fit(self, docs) -> None:
        """Learn from the training Docs what the items need (nothing here)."""

    def state(self):
        """What :meth:`fit` learnt, msgpack-ready (None: nothing)."""
        return None

    def load_state(self, state) -> None:
        if state is not None:
            raise SavedModelError(f"the saved {self.settings()['kind']} kernel holds learnt data this kernel "
                                  "does not use")


class _WordClassKernel(_DocKernel):
    """A structure kernel whose trees may carry word-class nodes:
    ``word_clusters`` k-means clusters of the static vectors (0: none),
    learnt by :meth:`fit` from the training Docs' vocab."""

    def __init__(self, word_clusters: int):
        self.word_clusters = check_count("word_clusters (0: none)", word_clusters, 0)
        self.clusters = None

    def fit(self, docs) -> None:
        from .word_clusters import WordClusters

        if self.word_clusters:
            docs = list(docs)
            if not docs:
                raise StructPrefError("word clusters are learnt from the training Docs' vectors: no Docs given")
            self.clusters = WordClusters.fit(docs[0].vocab.vectors, self.word_clusters)

    def _classes(self, doc) -> list:
        if self.clusters is None:
            raise StructPrefError(f"the kernel's {self.word_clusters} word clusters are not learnt yet: train "
                                  "the classifier (nlp.initialize) or load a trained pipeline")
        return self.clusters.classes(doc)

    def _settings(self, settings: dict) -> dict:
        # no key without clusters: saves from before the setting existed keep loading
        return {**settings, "word_clusters": self.word_clusters} if self.word_clusters else settings

    def state(self):
        return None if self.clusters is None else self.clusters.to_dict()

    def load_state(self, state) -> None:
        from .word_clusters import WordClusters

        if (state is None) != (not self.word_clusters):
            raise SavedModelError(f"the save {'lacks' if state is None else 'holds'} word clusters, and the kernel "
                                  f"has word_clusters = {self.word_clusters}")
        clusters = None if state is None else WordClusters.from_dict(state)
        if clusters is not None and clusters.n_clusters != self.word_clusters:
            raise SavedModelError(f"the save holds {clusters.n_clusters} word clusters, the kernel "
                                  f"word_clusters = {self.word_clusters}")
        self.clusters = clusters


class TreeDocKernel(_WordClassKernel):
    """Subset-tree kernel with decay ``lam`` over each Doc's 1-best tree
    (the span group ``spans_key``), with word-class nodes of
    ``word_clusters`` clusters (0: none)."""

    needs_forest = False

    def __init__(self, lam: float = 0.4, spans_key: str = "constituents", word_clusters: int = 0):
        from ..learners.kernels import TreeKernel

        super().__init__(word_clusters)
        self.kernel = TreeKernel(check_lambda(lam), 1, normalize=True)
        self.spans_key = spans_key

    @property
    def symbols(self) -> SymbolTable:
        return self.kernel.symbols

    def items(self, docs) -> list:
        from ..trees.doc import doc_to_tree

        out = []
        for doc in docs:
            tree = doc_to_tree(doc, self.spans_key) if len(doc) else None
            if tree is None:
                raise StructPrefError(f"the Doc {doc.text[:40]!r} has no parse tree in doc.spans[{self.spans_key!r}]: "
                                      "put a forest_parser before kernel_textcat")
            out.append(tree_with_word_classes(tree, self._classes(doc)) if self.word_clusters else tree)
        return out

    def prepare(self, items):
        return self.kernel.prepare(list(items))

    def gram(self, a, b=None, progress=None) -> np.ndarray:
        # one block over the hash-consed sets: Δ once per pair of distinct subtrees
        return self.kernel.block(a, a if b is None else b)

    def settings(self) -> dict:
        return self._settings({"kind": "tree", "lam": self.kernel.lam})

    def encode(self, items) -> list:
        return self.kernel.encode(items)

    def decode(self, data: list) -> list:
        return self.kernel.decode(data)


class ForestDocKernel(_WordClassKernel):
    """Forest kernel with decay ``lam`` over each Doc's packed forest
    (``doc._.forest``), hyperedge probabilities raised to ``alpha``,
    optionally pruned to the hyperedges whose best tree is at least
    ``merit_ratio`` times the Viterbi tree (None: as stored), with
    word-class nodes of ``word_clusters`` clusters (0: none). Kernel rows
    are shared among ``n_threads`` threads (the compiled loop releases the
    GIL)."""

    needs_forest = True

    def __init__(self, lam: float = 0.4, alpha: float = 1.0, merit_ratio: Optional[float] = None,
                 n_threads: int = 2, word_clusters: int = 0):
        from ..learners.kernels import ForestKernel

        super().__init__(word_clusters)
        if merit_ratio is not None:
            merit_ratio = check_number("merit_ratio (null: as stored)", merit_ratio, 0.0, 1.0, above=True)
        self.kernel = ForestKernel(lam, alpha, normalize=True)
        self.merit_ratio = merit_ratio
        self.n_threads = check_threads(n_threads)

    @property
    def symbols(self) -> SymbolTable:
        return self.kernel.symbols

    def forest(self, data: dict):
        """A stored forest (``Forest.to_dict``) read into the kernel's table,
        pruned and tempered."""
        from ..parsing.parser import prune_by_merit
        from ..reranking.forest_kernel import compatible_subforest
        from ..trees.forest import Forest

        forest = Forest.from_dict(data, self.symbols).compute_inside_outside()
        if self.merit_ratio is not None:
            forest = prune_by_merit(forest, self.merit_ratio)
        if self.kernel.alpha != 1.0:  # no brackets: the whole forest, P(e) ** α, inside–outside again
            forest = compatible_subforest(forest, [], self.kernel.alpha)
        return forest

    def items(self, docs) -> list:
        out = []
        for doc in docs:
            data = doc._.forest if doc.has_extension("forest") and len(doc) else None
            if data is None:
                raise StructPrefError(f"the Doc {doc.text[:40]!r} has no packed forest (doc._.forest): put a "
                                      "forest_parser that stores its forests (store_forest = true) before "
                                      "kernel_textcat")
            forest = self.forest(data)
            out.append(forest_with_word_classes(forest, self._classes(doc)) if self.word_clusters else forest)
        return out

    def prepare(self, items) -> list:
        return self.kernel.prepare(list(items))

    def gram(self, a, b=None, progress=None) -> np.ndarray:
        """Forest-kernel matrix, cosine-normalised (values that overflow are
        recomputed with logarithms, as :func:`~..kernels.forests.forest_gram`)."""
        from ..kernels.forests import forest_block, normalise_forest_gram

        lam = self.kernel.lam
        K = forest_block(a, b, lam, self.n_threads, progress, len(self.symbols.productions))
        return normalise_forest_gram(K, a, a if b is None else b, lam)

    def settings(self) -> dict:
        return self._settings({"kind": "forest", "lam": self.kernel.lam, "alpha": self.kernel.alpha,
                               "merit_ratio": self.merit_ratio})

    def encode(self, items) -> list:
        return self.kernel.encode(items)

    def decode(self, data: list) -> list:
        return self.kernel.decode(data)


def ngram_features(word_lists, max_n: int = 2, lowercase: bool = True) -> List[List[str]]:
    """Each text's word n-grams, n = 1 .. ``max_n`` (the bag of words of the
    BOW kernel and of the linear-SVM baseline)."""
    out = []
    for words in word_lists:
        words = [w.lower() for w in words] if lowercase else list(words)
        out.append([" ".join(words[i:i + n]) for n in range(1, max_n + 1) for i in range(len(words) - n + 1)])
    return out


def count_vectors(feature_lists, vocabulary: Optional[dict] = None):
    """Sparse count matrix (CSR) of feature lists; ``vocabulary`` (feature
    -> column) is extended with unseen features when given, made otherwise."""
    from scipy.sparse import csr_matrix

    vocabulary = {} if vocabulary is None else vocabulary
    rows, cols = [], []
    for i, feats in enumerate(feature_lists):
        for f in feats:
            cols.append(vocabulary.setdefault(f, len(vocabulary)))
            rows.append(i)
    m = csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(feature_lists), max(len(vocabulary), 1)))
    m.sum_duplicates()
    return m


class BowDocKernel(_DocKernel):
    """Cosine of the word n-gram count vectors (n = 1 .. ``max_n``, at
    most :data:`MAX_NGRAM`)."""

    needs_forest = False

    def __init__(self, max_n: int = 2, lowercase: bool = True):
        self.max_n, self.lowercase = check_count("max_n", max_n, 1, MAX_NGRAM), bool(lowercase)

    def items(self, docs) -> list:
        out = []
        for doc in docs:
            if not len(doc):
                raise StructPrefError("kernel_textcat cannot classify an empty Doc")
            out.append(tuple(t.text for t in doc))
        return out

    def prepare(self, items) -> list:
        return ngram_features(items, self.max_n, self.lowercase)

    def gram(self, a, b=None, progress=None) -> np.ndarray:
        from sklearn.preprocessing import normalize

        vocabulary = {}
        A = normalize(count_vectors(a, vocabulary))
        B = A if b is None else normalize(count_vectors(b, vocabulary))
        A.resize((A.shape[0], len(vocabulary)))
        B.resize((B.shape[0], len(vocabulary)))
        return np.asarray((A @ B.T).todense())

    def settings(self) -> dict:
        return {"kind": "bow", "max_n": self.max_n, "lowercase": self.lowercase}

    def encode(self, items) -> list:
        return [list(words) for words in items]

    def decode(self, data: list) -> list:
        if not all(isinstance(words, (list, tuple)) and all(isinstance(w, str) for w in words) for words in data):
            raise SavedModelError("saved bag-of-words items must be lists of words")
        return [tuple(words) for words in data]


class SumDocKernel(_DocKernel):
    """``K(x, y) = Σ_k w_k K_k(x, y)`` over Doc kernels ``kernels`` with
    ``weights`` (a composite kernel: a sum of kernels is a kernel)."""

    def __init__(self, kernels: Sequence, weights: Sequence[float]):
        kernels, weights = list(kernels), list(weights)
        if not kernels or len(kernels) != len(weights):
            raise StructPrefError(f"a sum of kernels needs one weight per kernel: {len(kernels)} kernel(s), "
                                  f"{len(weights)} weight(s)")
        weights = [check_number("a kernel weight", w, 0.0) for w in weights]
        if not all(np.isfinite(weights)) or not sum(weights) > 0:
            raise StructPrefError(f"kernel weights must be non-negative and not all 0, got {weights}")
        self.kernels, self.weights = kernels, weights

    @property
    def needs_forest(self) -> bool:
        return any(k.needs_forest for k in self.kernels)

    def items(self, docs) -> list:
        docs = list(docs)
        return list(zip(*[k.items(docs) for k in self.kernels]))

    def prepare(self, items) -> list:
        items = list(items)
        return [k.prepare([it[i] for it in items]) for i, k in enumerate(self.kernels)]

    def gram(self, a, b=None, progress=None) -> np.ndarray:
        return self.combine([k.gram(pa, None if b is None else b[i], progress)
                             for i, (k, pa) in enumerate(zip(self.kernels, a))])

    def combine(self, grams: Sequence[np.ndarray]) -> np.ndarray:
        """``Σ_k w_k K_k`` from the parts' matrices."""
        return sum(w * K for w, K in zip(self.weights, grams))

    def settings(self) -> dict:
        return {"kind": "sum", "weights": self.weights, "kernels": [k.settings() for k in self.kernels]}

    def fit(self, docs) -> None:
        docs = list(docs)
        for k in self.kernels:
            k.fit(docs)

    def state(self):
        states = [k.state() for k in self.kernels]
        return None if all(x is None for x in states) else states

    def load_state(self, state) -> None:
        states = [None] * len(self.kernels) if state is None else state
        if not isinstance(states, list) or len(states) != len(self.kernels):
            raise SavedModelError(f"the saved state of a sum of {len(self.kernels)} kernels must have one part per "
                                  "kernel")
        for k, part in zip(self.kernels, states):
            k.load_state(part)

    def encode(self, items) -> list:
        items = list(items)
        parts = [k.encode([it[i] for it in items]) for i, k in enumerate(self.kernels)]
        return [list(x) for x in zip(*parts)]

    def decode(self, data: list) -> list:
        if not all(isinstance(x, (list, tuple)) and len(x) == len(self.kernels) for x in data):
            raise SavedModelError(f"saved items of a sum of {len(self.kernels)} kernels must have one part per kernel")
        parts = [k.decode([x[i] for x in data]) for i, k in enumerate(self.kernels)]
        return list(zip(*parts))


def named_kernel(name: str, lam: float = 0.4, alpha: float = 1.0, bow_weight: float = 0.5,
                 merit_ratio: Optional[float] = None, n_threads: int = 2, word_clusters: int = 0):
    """The Doc kernel called ``name`` (:data:`KERNEL_NAMES`): ``tree``,
    ``forest``, ``bow``, or ``tree+bow``/``forest+bow``, the structure
    kernel (with ``word_clusters`` word-class nodes) weighted
    ``1 - bow_weight`` plus the BOW kernel weighted ``bow_weight``."""
    if name not in KERNEL_NAMES:
        raise StructPrefError(f"unknown kernel {name!r}; expected one of {', '.join(KERNEL_NAMES)}")
    structure, _, bow = name.partition("+")
    if structure == "bow" and word_clusters:
        raise StructPrefError("word_clusters add word-class nodes to trees: the bow kernel has none")
    parts = {"tree": lambda: TreeDocKernel(lam, word_clusters=word_clusters),
             "forest": lambda: ForestDocKernel(lam, alpha, merit_ratio, n_threads, word_clusters),
             "bow": lambda: BowDocKernel()}
    if not bow:
        return parts[structure]()
    bow_weight = check_number("bow_weight", bow_weight, 0.0, 1.0)
    return SumDocKernel([parts[structure](), BowDocKernel()], [1 - bow_weight, bow_weight])


def subset(items: list, index) -> list:
    return [items[i] for i in np.asarray(index, dtype=INT)]

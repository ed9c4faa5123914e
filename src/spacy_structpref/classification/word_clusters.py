"""Word clusters from a pipeline's static vectors, the classes of the
word-class nodes (:mod:`spacy_structpref.trees.word_classes`) that let the
tree and forest kernels match fragments over words of similar meaning
(Plank & Moschitti 2013 bring word clusters into tree kernels this way).

The clusters are k-means clusters (scikit-learn's ``KMeans``: k-means++
seeding, Lloyd iterations) of the vectors' rows, each scaled to unit
length, so that two words share a class when their vectors point the same
way, as cosine similarity has it. A token's class is that of its
lower-case form's vector, else of its own spelling's; a token with neither,
or whose vector is zero, has none.
"""
from typing import List, Optional

import numpy as np

from ..errors import SavedModelError, StructPrefError, check_count


class WordClusters:
    """``classes[k]``: the cluster of the vector key ``keys[k]`` (spaCy's
    hash of a word's string), ``n_clusters`` clusters in all."""

    def __init__(self, keys: np.ndarray, classes: np.ndarray, n_clusters: int):
        keys, classes = np.asarray(keys, dtype=np.uint64), np.asarray(classes, dtype=np.int64)
        if keys.shape != classes.shape or keys.ndim != 1:
            raise StructPrefError(f"word clusters: {keys.shape} keys and {classes.shape} classes")
        n_clusters = check_count("word clusters: n_clusters", n_clusters, 1)
        if len(classes) and (classes.min() < 0 or classes.max() >= n_clusters):
            raise StructPrefError(f"word clusters: classes must lie in [0, {n_clusters})")
        self.n_clusters = n_clusters
        self._class_of = dict(zip(keys.tolist(), classes.tolist()))

    def __len__(self) -> int:
        return len(self._class_of)

    @classmethod
    def fit(cls, vectors, n_clusters: int, seed: int = 0) -> "WordClusters":
        """``n_clusters`` k-means clusters of the non-zero rows of a spaCy
        ``Vectors`` table, scaled to unit length; every key of a row gets
        its row's cluster."""
        from sklearn.cluster import KMeans

        n_clusters = check_count("word_clusters", n_clusters, 1)
        data = np.asarray(vectors.data, dtype=np.float64)
        norms = np.linalg.norm(data, axis=1) if data.size else np.zeros(0)
        rows = np.flatnonzero(norms > 0)
        if len(rows) < n_clusters:
            raise StructPrefError(f"{n_clusters} word clusters need at least as many non-zero vectors; the "
                                  f"pipeline's table has {len(rows)}: set [initialize] vectors to a pipeline "
                                  "with static vectors (python -m spacy_structpref train-vectors makes one)")
        km = KMeans(n_clusters=n_clusters, n_init=1, random_state=seed).fit(data[rows] / norms[rows, None])
        cluster_of_row = np.full(len(data), -1, dtype=np.int64)
        cluster_of_row[rows] = km.labels_
        pairs = [(int(key), int(cluster_of_row[row])) for key, row in vectors.key2row.items()
                 if cluster_of_row[row] >= 0]
        keys = np.array([k for k, _ in pairs], dtype=np.uint64)
        return cls(keys, np.array([c for _, c in pairs], dtype=np.int64), n_clusters)

    def classes(self, doc) -> List[Optional[int]]:
        """Each token's cluster (None: no vector)."""
        class_of = self._class_of
        return [class_of.get(token.lower, class_of.get(token.orth)) for token in doc]

    def to_dict(self) -> dict:
        keys = list(self._class_of)
        return {"n_clusters": self.n_clusters, "keys": keys, "classes": [self._class_of[k] for k in keys]}

    @classmethod
    def from_dict(cls, data) -> "WordClusters":
        try:
            return cls(np.array(data["keys"], dtype=np.uint64), np.array(data["classes"], dtype=np.int64),
                       data["n_clusters"])
        except (KeyError, TypeError, ValueError, OverflowError, StructPrefError) as err:
            raise SavedModelError(f"saved word clusters are damaged: {err}") from None

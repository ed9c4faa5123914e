"""A tag dictionary: each word's candidate labels, read off the training data.

A word seen at least ``min_count`` times in training may only take the labels
it was seen with; every other word (rare or unknown) keeps all labels. This
is the classical restriction of the tagging search space (Ratnaparkhi 1996,
§4; Collins 2002, §3), which with Brown's ~470 tags turns the M² work per
token of first-order Viterbi into the product of two small candidate counts.
Decoding with it is :func:`.viterbi.viterbi_restricted`.
"""
from collections import Counter, defaultdict
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.strings import hash_string

from ..errors import TaggerError
from ..trees.arrays import offsets


class TagDictionary:
    """Candidate labels per word (ids into a label list of ``n_labels``)."""

    def __init__(self, n_labels: int, entries: Dict[str, Sequence[int]]):
        if n_labels < 1:
            raise TaggerError(f"a tag dictionary needs at least one label, got {n_labels}")
        self.n_labels = n_labels
        self.entries = {word: sorted({int(i) for i in ids}) for word, ids in entries.items()}
        sets: Dict[Tuple[int, ...], int] = {}
        set_of_word = []
        for word, ids in self.entries.items():
            if not ids or ids[0] < 0 or ids[-1] >= n_labels:
                raise TaggerError(f"tag dictionary entry {word!r}: label ids must be a non-empty "
                                  f"subset of [0, {n_labels}), got {ids}")
            set_of_word.append(sets.setdefault(tuple(ids), len(sets)))
        # words are looked up by their 64-bit string hash (a spaCy token's ORTH)
        keys = numpy.array([hash_string(w) for w in self.entries], dtype=numpy.uint64)
        order = numpy.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._set_of_key = numpy.asarray(set_of_word, dtype=numpy.int64)[order]
        # one boolean row per distinct candidate set, then the all-labels row
        self._rows = numpy.zeros((len(sets) + 1, n_labels), dtype=bool)
        for ids, row in sets.items():
            self._rows[row, list(ids)] = True
        self._rows[-1] = True

    @classmethod
    def from_pairs(cls, pairs: Iterable[Tuple[str, int]], n_labels: int,
                   min_count: int) -> "TagDictionary":
        """From (word, label id) pairs of the training data: words seen at
        least ``min_count`` times keep the labels they were seen with."""
        if min_count < 1:
            raise TaggerError(f"tag dictionary min_count must be >= 1, got {min_count}")
        counts: Counter = Counter()
        seen: Dict[str, set] = defaultdict(set)
        for word, label in pairs:
            if label < 0:
                continue
            counts[word] += 1
            seen[word].add(label)
        return cls(n_labels, {w: sorted(seen[w]) for w, c in counts.items() if c >= min_count})

    def __len__(self) -> int:
        return len(self.entries)

    def candidates(self, word: str) -> List[int]:
        """The label ids ``word`` may take."""
        return self.entries.get(word, list(range(self.n_labels)))

    def mask(self, words: Sequence[str]) -> numpy.ndarray:
        """(len(words), n_labels) bool: which labels each word may take."""
        return self.mask_of_hashes(numpy.array([hash_string(w) for w in words], dtype=numpy.uint64))

    def mask_of_hashes(self, orths: numpy.ndarray) -> numpy.ndarray:
        """:meth:`mask` for words given as 64-bit string hashes (e.g.
        ``doc.to_array("ORTH")``)."""
        orths = numpy.asarray(orths, dtype=numpy.uint64)
        rows = numpy.full(len(orths), len(self._rows) - 1, dtype=numpy.int64)
        if len(self._keys):
            at = numpy.minimum(numpy.searchsorted(self._keys, orths), len(self._keys) - 1)
            found = self._keys[at] == orths
            rows[found] = self._set_of_key[at[found]]
        return self._rows[rows]

    def to_json(self) -> Dict[str, List[int]]:
        return dict(self.entries)


def candidate_lists(mask: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """A boolean (N, M) candidate mask as ``(offsets, labels)`` (int32, CSR:
    token t's candidates are ``labels[offsets[t]:offsets[t + 1]]``)."""
    mask = numpy.asarray(mask, dtype=bool)
    return offsets(mask.sum(axis=1), numpy.int32), numpy.nonzero(mask)[1].astype(numpy.int32)


def restrict_to(mask: Optional[numpy.ndarray], labels: numpy.ndarray, n_labels: int,
                only: bool) -> numpy.ndarray:
    """A candidate mask with each token's label ``labels[t]`` (where >= 0)
    added (``only = False``) or made its only candidate (``only = True``);
    ``mask = None`` stands for every label."""
    labels = numpy.asarray(labels)
    out = (numpy.ones((len(labels), n_labels), dtype=bool) if mask is None
           else numpy.array(mask, dtype=bool, copy=True))
    rows = numpy.nonzero(labels >= 0)[0]
    if only:
        out[rows] = False
    out[rows, labels[rows]] = True
    return out

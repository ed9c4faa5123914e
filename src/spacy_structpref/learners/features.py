"""A linear reranker over hashed tree features (Charniak & Johnson 2005):
``U(x) = w·f(x) + a·log p(x) + c·n(x)``, with ``f`` the features of
:func:`~spacy_structpref.trees.features.tree_features` hashed into
``2^hash_bits`` weights, ``log p`` the parser's log probability and ``n``
the number of constituents (the precision/recall balance).

Training maximises the conditional log-likelihood of each set's best
candidate among the set (Charniak & Johnson's objective, with one best
candidate per set as :func:`~spacy_structpref.reranking.scorers.training_sets`
builds them) with an L2 penalty, by AdaGrad (Duchi, Hazan & Singer 2011)
one set at a time, and predicts with the average of the weights over the
steps (Collins 2002's averaging), kept as ``w_T − Σ_t (t − 1)·Δw_t / T`` so
that a step touches only the features of its set.

Sets are :class:`~.kernels.ScoredTrees` of bracketed trees (or NLTK trees)
with their log probabilities; :meth:`FeatureRanker.prepare` hashes each
set's features once for all epochs.
"""
import zlib
from dataclasses import dataclass
from typing import Dict, Hashable, List, Optional, Sequence

import numpy as np
from nltk.tree import Tree

from ..errors import SavedModelError, StructPrefError, check_count, check_number
from ..kernels.inputs import check_log_probabilities
from ..trees.brackets import parse_bracketed
from ..trees.features import tree_features
from .base import Parts, PreferenceLearner, TrainingLog, check_no_keys, teaching_sets


# AdaGrad's guard: a feature every candidate of a set shares has a zero gradient and no sum yet
_EPS = 1e-8


@dataclass
class FeatureSet:
    """One set as the ranker reads it: each candidate's hashed feature ids,
    its log probability and its number of constituents."""

    features: List[np.ndarray]
    log_p: np.ndarray
    sizes: np.ndarray

    def __len__(self) -> int:
        return len(self.features)


def hashed(features: Sequence[str], hash_bits: int) -> np.ndarray:
    """Feature strings as ids below ``2^hash_bits`` (CRC-32: the same ids in
    every process and release, unlike Python's salted ``hash``)."""
    mask = (1 << hash_bits) - 1
    return np.fromiter((zlib.crc32(f.encode("utf8")) & mask for f in features), dtype=np.int32,
                       count=len(features))


class FeatureRanker(PreferenceLearner):
    """The linear feature reranker (see the module). ``hash_bits`` (8 to
    24): the weight vector's size is ``2^hash_bits`` (training keeps three
    float64 arrays of that size); ``learn_rate``: AdaGrad's step;
    ``l2``: the penalty on w (applied to the features a step touches);
    ``log_p_weight``: a's starting value (learned with the rest)."""

    steps_by_itself = True  # AdaGrad inside: fit gives it no optimizer
    log_p_input = True  # its sets carry the parser's log probabilities
    reads_brackets = True  # its sets hold the candidate trees themselves

    def __init__(self, hash_bits: int = 20, learn_rate: float = 0.1, l2: float = 1e-4, log_p_weight: float = 1.0,
                 seed: int = 0):
        self.hash_bits = check_count("hash_bits", hash_bits, 8, 24)
        self.learn_rate = check_number("learn_rate", learn_rate, 0.0, above=True)
        self.l2 = check_number("l2", l2, 0.0)
        self.log_p_weight = check_number("log_p_weight", log_p_weight)
        self.seed = check_count("seed", seed, 0)
        self._reset()
        self.log = TrainingLog()

    def _reset(self) -> None:
        size = 1 << self.hash_bits
        self.w, self.ac = np.zeros(size), np.array([self.log_p_weight, 0.0])
        self._g, self._g_ac = np.zeros(size), np.zeros(2)  # AdaGrad's sums of squared gradients
        self._w_steps, self._ac_steps = np.zeros(size), np.zeros(2)  # Σ t·Δ (the averages' correction)
        self.n_steps = 0
        self._averaged = None
        self._by_id: Dict[Hashable, FeatureSet] = {}  # update's sets by their ids: hashed once for all epochs

    def clone(self, seed: Optional[int] = None) -> "FeatureRanker":
        return FeatureRanker(self.hash_bits, self.learn_rate, self.l2, self.log_p_weight,
                             self.seed if seed is None else seed)

    def settings(self) -> dict:
        return {"hash_bits": self.hash_bits, "learn_rate": self.learn_rate, "l2": self.l2,
                "log_p_weight": self.log_p_weight}

    # -- sets -----------------------------------------------------------------
    def feature_set(self, candidates) -> FeatureSet:
        """A set of ``(tree, log p)`` candidates (a :class:`~.kernels.ScoredTrees`
        or pairs; trees bracketed or NLTK) as :class:`FeatureSet`."""
        if isinstance(candidates, FeatureSet):
            return candidates
        trees = getattr(candidates, "trees", None)
        if trees is None:
            pairs = list(candidates)
            if not all(isinstance(pair, tuple) and len(pair) == 2 for pair in pairs):
                raise StructPrefError("a feature ranker's candidates are (tree, log p) pairs or ScoredTrees (the "
                                      "trees with the parser's log probabilities)")
            trees, log_p = [t for t, _ in pairs], [lp for _, lp in pairs]
        else:
            log_p = candidates.log_p
        log_p = check_log_probabilities(log_p, len(trees))
        ids, sizes = [], []
        for tree in trees:
            if isinstance(tree, str):
                tree = parse_bracketed(tree)
            elif not isinstance(tree, Tree):
                raise StructPrefError(f"a feature ranker's candidates are trees (bracketed or nltk), got a "
                                      f"{type(tree).__name__}")
            features, n = tree_features(tree)
            ids.append(hashed(features, self.hash_bits))
            sizes.append(n)
        return FeatureSet(ids, log_p, np.asarray(sizes, dtype=float))

    def prepare(self, sets: Sequence) -> List[FeatureSet]:
        return [self.feature_set(s) for s in sets]

    # -- training -------------------------------------------------------------
    def initialize(self, sets=None, gold=None, keys=None) -> "FeatureRanker":
        """Start afresh: zero weights, a = ``log_p_weight`` (the sets, with gold, are only checked)."""
        self._restart(sets, gold, keys)
        return self

    def update(self, sets, gold, keys=None, *, ids=None, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One AdaGrad step per set that can teach, in the order given;
        ``losses["features"]`` adds their negative log-likelihoods. ``ids``:
        each set's identity across calls (a pipeline's sentence): a set that
        comes again under its id is not read again (its hashed features are
        kept while the ranker lives, not saved; sets already prepared, as
        :func:`~.training.fit` gives them, are read as they are and not
        kept). ``sgd`` is taken so that every learner updates alike."""
        check_no_keys(self, keys)
        sets, gold, order = teaching_sets(sets, gold)
        if ids is not None and len(ids) != len(sets):
            raise StructPrefError(f"{len(sets)} preference sets but {len(ids)} set ids")
        total = 0.0
        for i in order:
            if ids is None or isinstance(sets[i], FeatureSet):
                fs = self.feature_set(sets[i])
            else:
                fs = self._by_id.get(ids[i])
                if fs is None:
                    fs = self._by_id[ids[i]] = self.feature_set(sets[i])
            total += self._step(fs, gold[i])
        losses = {} if losses is None else losses
        losses["features"] = losses.get("features", 0.0) + total
        return losses

    def _step(self, fs: FeatureSet, g: int) -> float:
        scores = self._scores(fs, self.w, self.ac)
        scores -= scores.max()
        p = np.exp(scores)
        p /= p.sum()
        loss = -float(np.log(p[g]))
        d = p.copy()
        d[g] -= 1.0  # d loss / d score of each candidate
        ids = np.concatenate(fs.features)
        unique, where = np.unique(ids, return_inverse=True)
        grad = np.bincount(where, weights=np.repeat(d, [len(f) for f in fs.features])) + self.l2 * self.w[unique]
        grad_ac = np.array([d @ fs.log_p, d @ fs.sizes])
        # step t + 1 (t = n_steps) counts in the average of the T steps as (T − t)/T
        t = self.n_steps
        self._g[unique] += grad ** 2
        delta = self.learn_rate * grad / (np.sqrt(self._g[unique]) + _EPS)
        self.w[unique] -= delta
        self._w_steps[unique] -= t * delta
        self._g_ac += grad_ac ** 2
        delta_ac = self.learn_rate * grad_ac / (np.sqrt(self._g_ac) + _EPS)
        self.ac -= delta_ac
        self._ac_steps -= t * delta_ac
        self.n_steps = t + 1
        self._averaged = None
        return loss

    def averaged(self):
        """``(w, (a, c))`` averaged over the steps taken (the start's values when none)."""
        if self._averaged is None:
            n = max(self.n_steps, 1)
            self._averaged = (self.w - self._w_steps / n, self.ac - self._ac_steps / n)
        return self._averaged

    # -- prediction -----------------------------------------------------------
    @staticmethod
    def _scores(fs: FeatureSet, w: np.ndarray, ac: np.ndarray) -> np.ndarray:
        return np.array([w[f].sum() for f in fs.features]) + ac[0] * fs.log_p + ac[1] * fs.sizes

    def utilities(self, candidates) -> np.ndarray:
        """U(x) of every candidate of one set, with the averaged weights."""
        fs = self.feature_set(candidates)
        if not len(fs):
            return np.zeros(0)
        return self._scores(fs, *self.averaged())

    # -- saving ---------------------------------------------------------------
    def _parts(self) -> Parts:
        """``cfg``: the settings a save must have been trained with;
        ``weights``: the averaged weights (non-zero ones, by id), a, c and the
        step count. A loaded ranker predicts as the saved one; trained on,
        it starts from those weights with fresh AdaGrad sums."""
        return {"cfg": (self.settings, self._check_cfg), "weights": (self._weights, self._set_weights)}

    def _check_cfg(self, cfg: dict) -> None:
        if cfg != self.settings():
            raise StructPrefError(f"the saved feature ranker has the settings {cfg}, this one "
                                  f"{self.settings()}: load it into a ranker built from the config that trained it")

    def _weights(self) -> dict:
        w, ac = self.averaged()
        ids = np.flatnonzero(w)
        return {"ids": ids.tolist(), "values": w[ids].tolist(), "a": float(ac[0]), "c": float(ac[1]),
                "n_steps": self.n_steps}

    def _set_weights(self, data: dict) -> None:
        ids, values = np.asarray(data["ids"], dtype=np.int64), np.asarray(data["values"], dtype=float)
        size = 1 << self.hash_bits
        if ids.shape != values.shape or ids.ndim != 1 or (ids.size and (ids.min() < 0 or ids.max() >= size)):
            raise SavedModelError(f"the saved feature ranker's weights need one value per id, ids below {size}")
        ac = np.array([data["a"], data["c"]], dtype=float)
        if not (np.isfinite(values).all() and np.isfinite(ac).all()):
            raise SavedModelError("the saved feature ranker's weights must be finite")
        n_steps = data["n_steps"]
        if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 0:
            raise SavedModelError(f"the saved feature ranker's step count must be an integer >= 0, got {n_steps!r}")
        self._reset()
        self.w[ids] = values
        self.ac = ac
        self.n_steps = n_steps
        self._w_steps[:] = 0.0
        self._ac_steps[:] = 0.0
        self._averaged = (self.w.copy(), self.ac.copy())

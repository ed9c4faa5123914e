"""Specialisation (SPEC §8): one learner per class of preference sets, e.g.
one first-pass attachment predictor per foot class of the incoming word
(``incremental.foot_class``). Each set goes to its class's learner, for
training and for prediction."""
from collections import defaultdict
from typing import Callable, Dict, Hashable, List, Optional, Sequence

import numpy as np
import srsly

from ..errors import StructPrefError
from ..saving import atomic_directory, check_saved
from ..trees.arrays import SymbolTable
from .base import PreferenceLearner, Subsequence, candidate_list, teaching_sets
from .perceptron import KernelPerceptron
from .recursive import RecursiveNetLearner


class SpecialisedLearner:
    """A learner per key, each made by ``make_learner()`` on the first
    training set of its key. A key never seen with a set that can teach has
    no learner: its sets get equal utilities (no preference), which ``L_r``
    counts as errors."""

    def __init__(self, make_learner: Optional[Callable[[], PreferenceLearner]] = None):
        self.make_learner = make_learner
        self.learners: Dict[Hashable, PreferenceLearner] = {}

    def fit(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
            keys: Sequence[Hashable]) -> "SpecialisedLearner":
        """Train each key's learner on the sets of that key (``keys[i]`` is the
        key of ``sets[i]``); can be called again to go on."""
        if len(keys) != len(sets):
            raise StructPrefError(f"{len(sets)} sets, {len(gold)} gold indices and "
                                  f"{len(keys)} keys: one of each per set")
        sets, gold, order = teaching_sets(sets, gold)
        teaching_keys = {keys[i] for i in order}
        groups: Dict[Hashable, List[int]] = defaultdict(list)
        for i, key in enumerate(keys):
            groups[key].append(i)
        for key in sorted(teaching_keys, key=str):  # keys with nothing to learn from get no learner
            members = groups[key]
            learner = self.learners.get(key)
            if learner is None:
                if self.make_learner is None:
                    raise StructPrefError(f"no learner for key {key!r} and no make_learner to "
                                          "make one")
                learner = self.learners[key] = self.make_learner()
            learner.fit(Subsequence(sets, members), [gold[i] for i in members])
        return self

    def utilities(self, candidates: Sequence, key: Hashable) -> np.ndarray:
        """U(x) of every candidate of one set of class ``key``."""
        learner = self.learners.get(key)
        if learner is None:
            return np.zeros(len(candidate_list(candidates)))
        return learner.utilities(candidates)

    def predict(self, sets: Sequence[Sequence], keys: Sequence[Hashable]) -> List[Optional[int]]:
        """Index of the highest-utility candidate of each set (None: empty set)."""
        return [int(np.argmax(u)) if len(u) else None
                for u in (self.utilities(c, k) for c, k in zip(sets, keys))]

    # -- saving ---------------------------------------------------------------
    def to_disk(self, path) -> None:
        """Save every key's learner (keys must be strings), atomically."""
        if not all(isinstance(key, str) for key in self.learners):
            raise StructPrefError("only string keys can be saved, got "
                                  f"{sorted(map(repr, self.learners))}")
        index = []
        with atomic_directory(path, type(self).__name__) as tmp:
            for i, key in enumerate(sorted(self.learners)):
                learner = self.learners[key]
                if type(learner).__name__ not in _LOADERS:
                    raise StructPrefError(f"cannot save a {type(learner).__name__} learner")
                learner.to_disk(tmp / f"learner{i}")
                index.append([key, f"learner{i}", type(learner).__name__])
            srsly.write_json(tmp / "learners.json", index)

    @classmethod
    def from_disk(cls, path, make_learner: Optional[Callable[[], PreferenceLearner]] = None,
                  symbols=None) -> "SpecialisedLearner":
        """Load the saved learners (kernel perceptrons intern into one shared
        ``symbols`` table, default a new one); ``make_learner`` is needed only
        to train keys that have no learner yet."""
        path = check_saved(path, cls.__name__)
        symbols = symbols if symbols is not None else SymbolTable()
        learner = cls(make_learner)
        for key, name, kind in srsly.read_json(path / "learners.json"):
            learner.learners[key] = _LOADERS[kind](path / name, symbols)
        return learner


_LOADERS = {
    "KernelPerceptron": lambda path, symbols: KernelPerceptron.from_disk(path, symbols),
    "RecursiveNetLearner": lambda path, symbols: RecursiveNetLearner.from_disk(path),
}

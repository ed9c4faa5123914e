"""Specialisation (Menchetti et al. 2005, §6.1.1): one learner per class of preference sets, e.g.
one first-pass attachment predictor per foot class of the incoming word
(``incremental.foot_class``). Each set goes to its class's learner, for
training and for prediction; every class's learner is a ``clone()`` of one
prototype learner (in a config, ``[learner.prototype]``)."""
from collections import defaultdict
from contextlib import ExitStack
from typing import Dict, Hashable, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np
import srsly
from spacy import util

from ..errors import SavedModelError, StructPrefError
from ..saving import atomic_directory, check_saved, inside, load_errors
from .base import Learner, PreferenceLearner, Subsequence, candidate_list, params_of_all, teaching_sets


class SpecialisedLearner(Learner):
    """A learner per key, each a clone of ``prototype`` made for the first
    training set of its key. A key never seen with a set that can teach has
    no learner: its sets get equal utilities (no preference), which ``L_r``
    counts as errors."""

    def __init__(self, prototype: PreferenceLearner):
        if not isinstance(prototype, PreferenceLearner):
            raise StructPrefError(f"the prototype must be a preference learner, got a "
                                  f"{type(prototype).__name__}")
        self.prototype = prototype
        self.learners: Dict[Hashable, PreferenceLearner] = {}
        self._unapplied: Set[Hashable] = set()  # keys whose learner holds gradients for finish_update

    @property
    def seed(self) -> int:
        return self.prototype.seed

    @property
    def steps_by_itself(self) -> bool:
        return self.prototype.steps_by_itself

    def _groups(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]], keys: Optional[Sequence[Hashable]],
                ids: Optional[Sequence[Hashable]] = None
                ) -> Iterator[Tuple[Hashable, Sequence[Sequence], List, Optional[List]]]:
        """``(key, its sets, their gold, their ids)`` for each key with a set that can teach."""
        if keys is None:
            raise StructPrefError("a SpecialisedLearner routes each set by its key: give keys, one per set")
        if len(keys) != len(sets):
            raise StructPrefError(f"{len(sets)} sets, {len(gold)} gold indices and "
                                  f"{len(keys)} keys: one of each per set")
        sets, gold, order = teaching_sets(sets, gold)
        groups: Dict[Hashable, List[int]] = defaultdict(list)
        for i, key in enumerate(keys):
            groups[key].append(i)
        if ids is not None and len(ids) != len(sets):
            raise StructPrefError(f"{len(sets)} preference sets but {len(ids)} set ids")
        for key in sorted({keys[i] for i in order}, key=str):  # keys with nothing to learn from get no learner
            members = groups[key]
            yield (key, Subsequence(sets, members), [gold[i] for i in members],
                   None if ids is None else [ids[i] for i in members])

    # -- learning -------------------------------------------------------------
    def initialize(self, sets: Sequence[Sequence], gold: Optional[Sequence[Optional[int]]] = None,
                   keys: Optional[Sequence[Hashable]] = None) -> "SpecialisedLearner":
        """A fresh learner for each key with a set that can teach, initialized on its sets."""
        if gold is None:
            raise StructPrefError("a SpecialisedLearner is initialized on sets with their gold and keys")
        self.learners = {key: self.prototype.clone().initialize(key_sets, key_gold)
                         for key, key_sets, key_gold, _ in self._groups(sets, gold, keys)}
        self._unapplied = set()
        return self

    def update(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
               keys: Optional[Sequence[Hashable]] = None, *, ids: Optional[Sequence[Hashable]] = None,
               sgd=None, losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Each key's learner's ``update`` on the sets of that key; a key first
        seen here gets a learner initialized on these sets. ``sgd=None``
        leaves the gradients to ``finish_update(sgd)``."""
        losses = {} if losses is None else losses
        for key, key_sets, key_gold, key_ids in self._groups(sets, gold, keys, ids):
            learner = self.learners.get(key)
            if learner is None:
                learner = self.learners[key] = self.prototype.clone().initialize(key_sets, key_gold)
            learner.update(key_sets, key_gold, ids=key_ids, sgd=sgd, losses=losses)
            if sgd is None:
                self._unapplied.add(key)
        return losses

    def finish_update(self, sgd) -> None:
        """Apply the gradients of the keys updated since the last call, and
        only theirs: an Adam step with a zero gradient still moves the
        weights of a class absent from the batch by their momentum."""
        for key, learner in self.learners.items():
            if key in self._unapplied:
                learner.finish_update(sgd)
        self._unapplied = set()

    def finish_training(self) -> "SpecialisedLearner":
        for learner in self.learners.values():
            learner.finish_training()
        return self

    def split(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
              keys: Optional[Sequence[Hashable]] = None) -> Dict[Hashable, Tuple]:
        """Each key's sets, for its learner (keys without a set that can teach have none)."""
        return {key: (key_sets, key_gold, None) for key, key_sets, key_gold, _ in self._groups(sets, gold, keys)}

    def part(self, key: Hashable) -> PreferenceLearner:
        """The learner of ``key``: a clone of the prototype made the first time."""
        learner = self.learners.get(key)
        if learner is None:
            learner = self.learners[key] = self.prototype.clone()
        return learner

    # -- prediction -----------------------------------------------------------
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

    def use_params(self, params: Dict) -> ExitStack:
        """Every key's learner's ``use_params(params)``."""
        return params_of_all(self.learners.values(), params)

    # -- saving ---------------------------------------------------------------
    def _saved_learners(self) -> List[Tuple[str, PreferenceLearner]]:
        if not all(isinstance(key, str) for key in self.learners):
            raise StructPrefError("only string keys can be saved, got "
                                  f"{sorted(map(repr, self.learners))}")
        return sorted(self.learners.items())

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        """Every key's learner's bytes (``exclude`` is passed on to them)."""
        return util.to_bytes({"learners": lambda: {key: learner.to_bytes(exclude=exclude)
                                                   for key, learner in self._saved_learners()}},
                             exclude)

    def from_bytes(self, bytes_data: bytes, *,
                   exclude: Iterable[str] = tuple()) -> "SpecialisedLearner":
        """Load what ``to_bytes`` saved, each key's learner into a clone of the prototype."""
        def load(saved: Dict[str, bytes]) -> None:
            self.learners = {key: self.prototype.clone().from_bytes(data, exclude=exclude)
                             for key, data in saved.items()}
            self._unapplied = set()

        with load_errors(type(self).__name__):
            util.from_bytes(bytes_data, {"learners": load}, exclude)
        return self

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        """Save every key's learner (keys must be strings) in its own
        directory, atomically."""
        learners = self._saved_learners()
        with atomic_directory(path, type(self).__name__) as tmp:
            for i, (key, learner) in enumerate(learners):
                learner.to_disk(tmp / f"learner{i}", exclude=exclude)
            srsly.write_json(tmp / "learners.json", [[key, f"learner{i}"]
                                                      for i, (key, _) in enumerate(learners)])

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "SpecialisedLearner":
        """Load what ``to_disk`` saved, each key's learner into a clone of the
        prototype (so clones of a perceptron share its kernel's SymbolTable)."""
        path = check_saved(path, type(self).__name__)
        with load_errors(f"{type(self).__name__} from {path}"):
            index = srsly.read_json(path / "learners.json")
            if not (isinstance(index, list) and all(
                    isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)
                    for entry in index)) or len({key for key, _ in index}) != len(index):
                raise SavedModelError(f"{path / 'learners.json'} must list distinct [key, directory] pairs")
            self.learners = {key: self.prototype.clone().from_disk(inside(path, name), exclude=exclude)
                             for key, name in index}
            self._unapplied = set()
        return self

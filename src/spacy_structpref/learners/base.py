"""What every preference learner shares: checking settings and training sets,
the sets that can teach, prediction from per-set utilities, and saving
(``to_bytes``/``from_bytes``/``to_disk``/``from_disk`` with ``exclude``, as
spaCy components save)."""
import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence as SequenceABC
from contextlib import ExitStack, contextmanager
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple,
                    runtime_checkable)

import numpy as np

from ..errors import StructPrefError
from ..saving import Part, SavedParts

LOSSES = ("setwise", "pairwise")


def check_training_settings(loss: str, epochs: int) -> None:
    if loss not in LOSSES:
        raise StructPrefError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
    if epochs < 1:
        raise StructPrefError(f"epochs must be >= 1, got {epochs}")


def candidate_list(candidates) -> Sequence:
    """A set's candidates as a sequence; one already (a list, a TreeSetDAG)
    is kept, so a prepared set is not taken apart."""
    return candidates if isinstance(candidates, SequenceABC) else list(candidates)


def set_sizes(sets: Sequence[Sequence]) -> List[int]:
    """Each set's number of candidates; a sequence of sets built on access
    may tell them without building the sets, through a ``sizes()`` method."""
    sizes = getattr(sets, "sizes", None)
    return list(sizes()) if callable(sizes) else [len(c) for c in sets]


class Subsequence(SequenceABC):
    """``items[indices[i]]`` for each i, looked up on access (a lazy sequence
    stays lazy, and keeps telling its sizes)."""

    def __init__(self, items: Sequence, indices: Sequence[int]):
        self.items, self.indices = items, list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Subsequence(self.items, self.indices[i])
        return self.items[self.indices[i]]

    def sizes(self) -> List[int]:
        sizes = set_sizes(self.items)
        return [sizes[i] for i in self.indices]


def teaching_sets(sets: Sequence[Sequence], gold: Sequence[Optional[int]]
                  ) -> Tuple[Sequence[Sequence], List[Optional[int]], List[int]]:
    """``(sets, gold, order)`` after checking them; order holds the sets that
    can teach (a gold candidate and at least one rival). A sequence of sets is
    kept as it is and checked through :func:`set_sizes`, so sets built on
    access (``incremental.CandidateSets``) are not built here."""
    sets, gold = (sets if isinstance(sets, SequenceABC) else list(sets)), list(gold)
    if len(sets) != len(gold):
        raise StructPrefError(f"{len(sets)} preference sets but {len(gold)} gold indices")
    order = []
    for i, (g, n) in enumerate(zip(gold, set_sizes(sets))):
        if g is None:
            continue
        if not 0 <= g < n:
            raise StructPrefError(f"gold index {g} is outside a set of {n} candidates")
        if n > 1:
            order.append(i)
    return sets, gold, order


@runtime_checkable
class LearnerKernel(Protocol):
    """A kernel as the learners use it (see :mod:`.kernels`)."""

    def prepare(self, items): ...

    def join(self, parts): ...

    def block(self, a, b) -> np.ndarray: ...

    def weighted_sum(self, a, weights, b) -> np.ndarray: ...

    def settings(self) -> dict: ...

    def encode(self, items) -> list: ...

    def decode(self, data: list) -> list: ...


# name -> (get, set) of one msgpack-ready part of a learner's state
Parts = Dict[str, Tuple[Callable[[], Any], Callable[[Any], None]]]


class PreferenceLearner(SavedParts, ABC):
    """A learner of utilities over preference sets, trained like a spaCy
    component: ``initialize``, then ``update`` on batches of sets (with the
    caller's optimizer where the learner has gradients), ``finish_training``
    when training ends; ``fit`` does all of it for a whole training set."""

    # whether ``fit`` takes ``validation=(sets, gold)`` and stops early on them
    takes_validation = False
    # what the learner's random choices start from (``clone(seed)`` sets it); a
    # learner without any keeps 0
    seed: int = 0

    @abstractmethod
    def initialize(self, sets: Sequence[Sequence],
                   gold: Optional[Sequence[Optional[int]]] = None) -> "PreferenceLearner":
        """Start afresh, fixing what the training sets fix (a vocabulary, a model)."""

    @abstractmethod
    def update(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]], *, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Train on the sets, in the order given; add this call's loss to ``losses``."""

    def finish_update(self, sgd) -> None:
        """Apply the gradients that ``update(..., sgd=None)`` accumulated (a
        learner without gradients has nothing to apply)."""

    def finish_training(self) -> "PreferenceLearner":
        """Tidy up once training is over (saving does it too)."""
        return self

    @abstractmethod
    def fit(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]]) -> "PreferenceLearner":
        """Train on sets of candidates with each set's best index (None: no correct one)."""

    @abstractmethod
    def clone(self, seed: Optional[int] = None) -> "PreferenceLearner":
        """A fresh, untrained learner with the same settings (and kernel),
        seeded ``seed`` (None: this learner's seed)."""

    @abstractmethod
    def utilities(self, candidates: Sequence) -> np.ndarray:
        """U(x) of every candidate of one set."""

    def predict(self, sets: Sequence[Sequence]) -> List[Optional[int]]:
        """Index of the highest-utility candidate of each set (None: empty set)."""
        return [int(np.argmax(u)) if len(u) else None for u in map(self.utilities, sets)]

    @contextmanager
    def use_params(self, params: Dict) -> Iterator[None]:
        """Predict (and save) with ``params`` in place of the current
        parameters, e.g. an optimizer's averages; a learner that averages by
        itself (the voted perceptron) ignores them."""
        yield

    # -- saving (spaCy's idiom, see saving.SavedParts) ---------------------------
    @property
    def saved_as(self) -> str:
        return type(self).__name__

    @abstractmethod
    def _parts(self) -> Parts:
        """The parts of the learner's state, in loading order, each saved as
        ``NAME.msgpack``. A part's setter checks what it reads and replaces
        attributes, never changes their objects in place: loading runs the
        setters on a shallow copy of the learner (see :meth:`_load`)."""

    def _before_saving(self) -> None:
        self.finish_training()

    def _load(self, load: Callable[[Dict[str, Part]], None]) -> None:
        """``load(parts)`` into a shallow copy of the learner, adopted once
        every part has loaded: a refused save (a later part, say) leaves the
        learner as it was."""
        staged = copy.copy(self)
        load({name: Part(*part) for name, part in staged._parts().items()})
        vars(self).update(vars(staged))


def check_takes_validation(learner: "PreferenceLearner") -> None:
    """Refuse validation sets for a learner whose ``fit`` does not stop early on them."""
    if not learner.takes_validation:
        raise StructPrefError(f"a {type(learner).__name__} does not stop early on validation sets (only "
                              "recursive networks do, and ensembles of them): train it without validation")


def params_of_all(learners: Iterable["PreferenceLearner"], params: Dict) -> ExitStack:
    """Every learner's ``use_params(params)``, entered together."""
    stack = ExitStack()
    for learner in learners:
        stack.enter_context(learner.use_params(params))
    return stack

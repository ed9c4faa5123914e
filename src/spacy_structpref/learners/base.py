"""What every preference learner shares: checking settings and training sets,
the sets that can teach, prediction from per-set utilities, and saving
(``to_bytes``/``from_bytes``/``to_disk``/``from_disk`` with ``exclude``, as
spaCy components save)."""
import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence as SequenceABC
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, Hashable, Iterable, Iterator, List, Optional, Protocol, Sequence,
                    Tuple, runtime_checkable)

import numpy as np

from ..errors import StructPrefError
from ..saving import Part, SavedParts

LOSSES = ("setwise", "pairwise")


def check_loss(loss: str) -> None:
    if loss not in LOSSES:
        raise StructPrefError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")


def candidate_list(candidates) -> Sequence:
    """A set's candidates as a sequence; one already (a list, a TreeSetDAG)
    is kept, so a prepared set is not taken apart."""
    return candidates if isinstance(candidates, SequenceABC) else list(candidates)


def set_sizes(sets: Sequence[Sequence]) -> List[int]:
    """Each set's number of candidates; a sequence of sets built on access
    may tell them without building the sets, through a ``sizes()`` method
    (the list may be the sequence's own: read it, do not change it)."""
    sizes = getattr(sets, "sizes", None)
    if not callable(sizes):
        return [len(c) for c in sets]
    sizes = sizes()  # the sequence's own list, read in place: no copy of a treebank's per minibatch
    return sizes if isinstance(sizes, list) else list(sizes)


class Subsequence(SequenceABC):
    """``items[indices[i]]`` for each i, looked up on access (a lazy sequence
    stays lazy, and keeps telling its sizes)."""

    def __init__(self, items: Sequence, indices: Sequence[int]):
        if isinstance(items, Subsequence):  # one level however deep: a minibatch of a training subset
            items, indices = items.items, [items.indices[i] for i in indices]
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

    def weighted_sums(self, parts, b) -> np.ndarray: ...

    def settings(self) -> dict: ...

    def encode(self, items) -> list: ...

    def decode(self, data: list) -> list: ...


@dataclass
class TrainingLog:
    """What :func:`.training.fit` recorded for one learner, an entry per
    epoch: the mean loss per training set, the validation error, the
    training seconds so far (the sets' preparation included, validation
    excluded); ``best_epoch`` (1-based),
    when it chose on validation sets."""

    losses: List[float] = field(default_factory=list)
    validation: List[float] = field(default_factory=list)
    seconds: List[float] = field(default_factory=list)
    best_epoch: Optional[int] = None


# name -> (get, set) of one msgpack-ready part of a learner's state
Parts = Dict[str, Tuple[Callable[[], Any], Callable[[Any], None]]]


class Learner(ABC):
    """The training contract every learner keeps, whoever trains it:
    spaCy's loop through a component (``initialize``, then ``update`` per
    batch with the caller's optimizer, ``finish_update``), or
    :func:`.training.fit` (epochs of batches, early stopping), which also
    uses ``split``/``part`` (a learner made of others trains part by part),
    ``prepare``, ``set_utilities``, ``snapshot``/``restore`` and ``log``."""

    # what the learner's random choices (and fit's shuffles) start from
    seed: int = 0
    # whether the learner steps by itself (the perceptron) rather than by an optimizer
    steps_by_itself = False
    # whether fit's first pass takes the sets in the order given (later passes are shuffled)
    first_pass_in_order = False

    @abstractmethod
    def initialize(self, sets: Sequence[Sequence], gold: Optional[Sequence[Optional[int]]] = None,
                   keys: Optional[Sequence[Hashable]] = None) -> "Learner":
        """Start afresh, fixing what the training sets fix (a vocabulary, a model)."""

    @abstractmethod
    def update(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
               keys: Optional[Sequence[Hashable]] = None, *, ids: Optional[Sequence[Hashable]] = None,
               sgd=None, losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Train on the sets, in the order given, with each set's key for a
        learner specialised by class (else None); add this call's loss to
        ``losses``. ``ids``: an identity per set, the same whenever the set
        comes again (None: every set is new); ``sgd=None`` leaves gradients
        to ``finish_update(sgd)``."""

    def finish_update(self, sgd) -> None:
        """Apply the gradients that ``update(..., sgd=None)`` accumulated (a
        learner without gradients has nothing to apply)."""

    def finish_training(self) -> "Learner":
        """Tidy up once training is over (saving does it too)."""
        return self

    @contextmanager
    def use_params(self, params: Dict) -> Iterator[None]:
        """Predict (and save) with ``params`` in place of the current
        parameters, e.g. an optimizer's averages; a learner that averages by
        itself (the voted perceptron) ignores them."""
        yield

    # -- what fit asks of a learner ---------------------------------------------
    @property
    def initialized(self) -> bool:
        """Whether the learner can train on (else ``fit`` initializes it first)."""
        return True

    def split(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
              keys: Optional[Sequence[Hashable]] = None) -> Optional[Dict[Hashable, Tuple]]:
        """``{part: (sets, gold, keys)}`` for a learner whose parts train on
        their own sets (see :meth:`part`); None for one that trains as one
        (which takes no keys)."""
        check_no_keys(self, keys)
        return None

    def part(self, name: Hashable) -> "Learner":
        """The part ``name`` of :meth:`split` (made when it has none yet)."""
        raise StructPrefError(f"a {type(self).__name__} has no parts")

    def prepare(self, sets: Sequence[Sequence]) -> Sequence:
        """The sets in a form ``update`` and ``set_utilities`` take, made once
        for the epochs that use them (by default, the sets as they are).
        ``fit`` prepares the sets before ``initialize``, which takes them
        prepared."""
        return sets

    def set_utilities(self, sets: Sequence[Sequence]) -> List[np.ndarray]:
        """U(x) of every candidate of each set (of :meth:`prepare`'s sets too)."""
        return [self.utilities(candidates) for candidates in sets]

    def snapshot(self) -> Any:
        """What the learner predicts with now, for :meth:`restore`."""
        return self.to_bytes()

    def restore(self, snapshot: Any) -> None:
        """Predict with what :meth:`snapshot` took."""
        self.from_bytes(snapshot)


class PreferenceLearner(SavedParts, Learner):
    """A learner of utilities over preference sets, which saves itself part
    by part; its training log is ``log`` (see :func:`.training.fit`)."""

    @abstractmethod
    def clone(self, seed: Optional[int] = None) -> "PreferenceLearner":
        """A fresh, untrained learner with the same settings (and kernel),
        seeded ``seed`` (None: this learner's seed)."""

    @abstractmethod
    def utilities(self, candidates: Sequence) -> np.ndarray:
        """U(x) of every candidate of one set."""

    def _reset(self) -> None:
        """Forget what training learned (for :meth:`_restart`)."""
        raise NotImplementedError(f"a {type(self).__name__} does not start afresh by resetting")

    def _restart(self, sets: Optional[Sequence[Sequence]], gold: Optional[Sequence[Optional[int]]],
                 keys: Optional[Sequence[Hashable]]) -> None:
        """``initialize`` of a learner that fixes nothing before training:
        the sets, with gold, are only checked, then it resets."""
        check_no_keys(self, keys)
        if sets is not None and gold is not None:
            teaching_sets(sets, gold)
        self._reset()
        self.log = TrainingLog()

    def predict(self, sets: Sequence[Sequence]) -> List[Optional[int]]:
        """Index of the highest-utility candidate of each set (None: empty set)."""
        return [int(np.argmax(u)) if len(u) else None for u in map(self.utilities, sets)]

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


def check_no_keys(learner: Learner, keys) -> None:
    """Refuse keys for a learner that is not specialised by class."""
    if keys is not None:
        raise StructPrefError(f"a {type(learner).__name__} is one learner for every set: it takes no keys "
                              "(keys route sets to a SpecialisedLearner's learners)")


def params_of_all(learners: Iterable[Learner], params: Dict) -> ExitStack:
    """Every learner's ``use_params(params)``, entered together."""
    stack = ExitStack()
    for learner in learners:
        stack.enter_context(learner.use_params(params))
    return stack

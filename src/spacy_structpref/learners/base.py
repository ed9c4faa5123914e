"""What every preference learner shares: checking settings and training sets,
the sets that can teach, and prediction from per-set utilities."""
from abc import ABC, abstractmethod
from collections.abc import Sequence as SequenceABC
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..errors import StructPrefError

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


class PreferenceLearner(ABC):
    """A learner of utilities over preference sets."""

    @abstractmethod
    def fit(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]]) -> "PreferenceLearner":
        """Train on sets of candidates with each set's best index (None: no correct one)."""

    @abstractmethod
    def utilities(self, candidates: Sequence) -> np.ndarray:
        """U(x) of every candidate of one set."""

    def predict(self, sets: Sequence[Sequence]) -> List[Optional[int]]:
        """Index of the highest-utility candidate of each set (None: empty set)."""
        return [int(np.argmax(u)) if len(u) else None for u in map(self.utilities, sets)]

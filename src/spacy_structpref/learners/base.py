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


def teaching_sets(sets: Sequence[Sequence], gold: Sequence[Optional[int]]
                  ) -> Tuple[List[Sequence], List[Optional[int]], List[int]]:
    """``(sets, gold, order)``: the sets as sequences, after checking them; order
    holds the sets that can teach (a gold candidate and at least one rival)."""
    sets, gold = [candidate_list(c) for c in sets], list(gold)
    if len(sets) != len(gold):
        raise StructPrefError(f"{len(sets)} preference sets but {len(gold)} gold indices")
    for cands, g in zip(sets, gold):
        if g is not None and not 0 <= g < len(cands):
            raise StructPrefError(f"gold index {g} is outside a set of {len(cands)} candidates")
    return sets, gold, [i for i, g in enumerate(gold) if g is not None and len(sets[i]) > 1]


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

"""An ensemble of preference learners: ``U(x)`` is the mean of the members'
utilities. Recursive networks trained from different random initialisations
settle in different minima, and averaging their outputs lowers the variance
of a single network (Hansen & Salamon 1990); Menchetti et al. (2005) train
one network per foot class, whose first-pass attachment error moves by about
a point from one initialisation to the next on the PTB sample. The members
are clones of one prototype, seeded ``seed``, ``seed + seed_step``, …"""
from contextlib import ExitStack
from typing import Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import SavedModelError, StructPrefError
from .base import Parts, PreferenceLearner, candidate_list, check_no_keys, params_of_all


class EnsembleLearner(PreferenceLearner):
    """``members`` trained learners' mean utility. Training trains every
    member on the same sets (``fit`` trains one member after another, each
    stopping early on the validation sets)."""

    def __init__(self, members: Sequence[PreferenceLearner]):
        members = list(members)
        if not members or not all(isinstance(m, PreferenceLearner) for m in members):
            raise StructPrefError("an ensemble needs at least one preference learner, got "
                                  f"{[type(m).__name__ for m in members]}")
        self.members: List[PreferenceLearner] = members

    @classmethod
    def of_clones(cls, prototype: PreferenceLearner, n_members: int, seed_step: int = 1000) -> "EnsembleLearner":
        """``n_members`` clones of ``prototype``, the i-th seeded ``prototype.seed + i · seed_step``."""
        if not isinstance(n_members, int) or n_members < 1:
            raise StructPrefError(f"n_members must be an integer of at least 1, got {n_members!r}")
        if not isinstance(prototype, PreferenceLearner):
            raise StructPrefError(f"the prototype must be a preference learner, got a {type(prototype).__name__}")
        return cls([prototype.clone(prototype.seed + i * seed_step) for i in range(n_members)])

    @property
    def seed(self) -> int:
        return self.members[0].seed

    @property
    def loss(self) -> str:
        return self.members[0].loss

    @property
    def kernel(self):
        """The members' kernel, when they share one (clones of a perceptron
        do: candidate DAGs are built with its SymbolTable); else None."""
        kernels = [getattr(m, "kernel", None) for m in self.members]
        return kernels[0] if all(k is kernels[0] for k in kernels) else None

    @property
    def log_p_input(self) -> bool:
        """Whether the members read each candidate's log probability (every one must)."""
        return all(getattr(m, "log_p_input", False) for m in self.members)

    @property
    def reads_brackets(self) -> bool:
        """Whether the members read the candidate trees themselves (every one must)."""
        return all(getattr(m, "reads_brackets", False) for m in self.members)

    @property
    def steps_by_itself(self) -> bool:
        return all(m.steps_by_itself for m in self.members)

    # -- learning -------------------------------------------------------------
    def initialize(self, sets: Sequence[Sequence], gold: Optional[Sequence[Optional[int]]] = None,
                   keys: Optional[Sequence[Hashable]] = None) -> "EnsembleLearner":
        check_no_keys(self, keys)
        for member in self.members:
            member.initialize(sets, gold)
        return self

    def update(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
               keys: Optional[Sequence[Hashable]] = None, *, ids: Optional[Sequence[Hashable]] = None,
               sgd=None, losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Every member's ``update`` on the sets (their losses summed)."""
        check_no_keys(self, keys)
        losses = {} if losses is None else losses
        for member in self.members:
            member.update(sets, gold, ids=ids, sgd=sgd, losses=losses)
        return losses

    def finish_update(self, sgd) -> None:
        for member in self.members:
            member.finish_update(sgd)

    def finish_training(self) -> "EnsembleLearner":
        for member in self.members:
            member.finish_training()
        return self

    def split(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
              keys: Optional[Sequence[Hashable]] = None) -> Dict[int, Tuple]:
        """The same sets for every member."""
        check_no_keys(self, keys)
        return {i: (sets, gold, None) for i in range(len(self.members))}

    def part(self, i: int) -> PreferenceLearner:
        return self.members[i]

    def clone(self, seed: Optional[int] = None) -> "EnsembleLearner":
        """Untrained clones of the members; with ``seed``, the members' seeds
        shifted so that the first is ``seed`` (their spacing kept)."""
        shift = 0 if seed is None else seed - self.seed
        return type(self)([m.clone(m.seed + shift) for m in self.members])

    # -- prediction -----------------------------------------------------------
    def utilities(self, candidates: Sequence) -> np.ndarray:
        """The mean of the members' utilities of the candidates of one set."""
        candidates = candidate_list(candidates)
        return np.mean([np.asarray(m.utilities(candidates), dtype=np.float64) for m in self.members], axis=0)

    def use_params(self, params: Dict) -> ExitStack:
        return params_of_all(self.members, params)

    # -- saving ---------------------------------------------------------------
    def _parts(self) -> Parts:
        """``members``: each member's bytes, loaded into a clone of the member
        in its place; a save of another number of members is refused."""
        return {"members": (self._member_bytes, self._set_members)}

    def _member_bytes(self) -> List[bytes]:
        return [member.to_bytes() for member in self.members]

    def _set_members(self, saved: list) -> None:
        if not isinstance(saved, list) or len(saved) != len(self.members):
            count = len(saved) if isinstance(saved, list) else type(saved).__name__
            raise SavedModelError(f"the saved ensemble has {count} members, this one {len(self.members)}: "
                                  "load it into an ensemble built from the config that trained it")
        self.members = [member.clone().from_bytes(data) for member, data in zip(self.members, saved)]

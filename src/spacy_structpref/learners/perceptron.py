"""The kernel voted perceptron for preference sets (Freund & Schapire 1999;
Menchetti et al. 2005, §3.1 and §5.3), in dual form; its setwise form is an
extension of this package.

Each update adds a support pair ``(x_best, x_wrong)``; the utility is
``U(x) = Σ_s c_s [K(x_best_s, x) − K(x_wrong_s, x)]``, its raw value (no sign),
so ties are rare. *Pairwise*: every wrong candidate of a set is a training
pair against the best, taken in turn (scores are updated after each
mistake). *Setwise*: one update per set, against the highest-scoring wrong
candidate (the first of several tied). A tie counts as a mistake, so the
first set always teaches; ties are judged up to ``metrics.TIE_TOLERANCE``, so
that training does not depend on the order a kernel sums in.

Prediction uses the averaged perceptron, the deterministic form of the vote:
every intermediate hypothesis weighted by the number of examples it survived,
i.e. support ``s`` added at example ``t_s`` weighs ``T − t_s + 1`` after ``T``
examples (``average = False``: the last hypothesis).

Support items are pooled per distinct candidate (the best of a set recurs in
many pairs) with one live and one time-weighted coefficient each, and packed
in chunks that merge as they grow (like a binary counter), so adding support
costs O(log n) repacking per item rather than repacking the whole pool; after
training (``finish_training``, or saving) the pool is packed as one chunk, so
prediction takes one kernel block.
"""
from typing import Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import SavedModelError, StructPrefError
from .base import (LearnerKernel, Parts, PreferenceLearner, TrainingLog, candidate_list, check_loss, check_no_keys,
                   teaching_sets)
from .metrics import at_least


class _Chunk:
    def __init__(self, items: list, prepared, keys: list, alpha, tau):
        self.items, self.prepared, self.keys = items, prepared, keys
        self.alpha = np.asarray(alpha, dtype=float)  # Σ c over the supports using the item
        self.tau = np.asarray(tau, dtype=float)      # Σ c · t_s


class KernelPerceptron(PreferenceLearner):
    """Dual perceptron over preference sets with any learner kernel (see
    :mod:`.kernels`). A saved perceptron loads only into one whose kernel has
    the saved kernel's settings (else an error: build the learner from the
    config that trained it); its support is prepared by that kernel, so tree
    items intern into the loading learner's ``kernel.symbols``."""

    steps_by_itself = True  # a mistake adds support; there is no gradient
    first_pass_in_order = True  # an online learner: one pass in the given order is Menchetti et al.'s VP

    def __init__(self, kernel: LearnerKernel, loss: str = "setwise", average: bool = True, seed: int = 0):
        check_loss(loss)
        if not isinstance(kernel, LearnerKernel):
            raise StructPrefError(f"a {type(kernel).__name__} is not a learner kernel (see "
                                  "spacy_structpref.learners.kernels)")
        self.kernel, self.loss, self.average, self.seed = kernel, loss, average, seed
        self._reset()
        self.log = TrainingLog()

    def _reset(self) -> None:
        self.chunks: List[_Chunk] = []
        self._where: Dict[tuple, Tuple[int, int]] = {}  # key -> (chunk, index)
        self._pending: Dict[tuple, list] = {}  # key -> [item, alpha, tau]
        self.n_examples = 0  # T: examples seen (pairs or sets)
        self.n_updates = 0

    def clone(self, seed: Optional[int] = None) -> "KernelPerceptron":
        """An untrained perceptron with the same settings and the same kernel
        (so the same SymbolTable), seeded ``seed`` (None: this one's seed)."""
        return type(self)(self.kernel, loss=self.loss, average=self.average,
                          seed=self.seed if seed is None else seed)

    # -- the pool -------------------------------------------------------------
    @property
    def n_support(self) -> int:
        """Distinct support items."""
        return len(self._where) + len(self._pending)

    def _add(self, key, item, c: float) -> None:
        where = self._where.get(key)
        if where is not None:
            chunk = self.chunks[where[0]]
            chunk.alpha[where[1]] += c
            chunk.tau[where[1]] += c * self.n_examples
        else:
            entry = self._pending.setdefault(key, [item, 0.0, 0.0])
            entry[1] += c
            entry[2] += c * self.n_examples

    def _flush(self) -> None:
        if not self._pending:
            return
        keys = list(self._pending)
        items, alpha, tau = zip(*(self._pending[k] for k in keys))
        self._pending = {}
        self.chunks.append(_Chunk(list(items), self.kernel.prepare(list(items)), keys, alpha, tau))
        while len(self.chunks) > 1 and len(self.chunks[-2].items) <= len(self.chunks[-1].items):
            self._merge(2)
        self._index_last()

    def _merge(self, n: int) -> None:
        """Replace the last ``n`` chunks by one (its keys still to be indexed)."""
        parts, self.chunks = self.chunks[-n:], self.chunks[:-n]
        self.chunks.append(_Chunk([x for c in parts for x in c.items],
                                  self.kernel.join([c.prepared for c in parts]),
                                  [k for c in parts for k in c.keys],
                                  np.concatenate([c.alpha for c in parts]),
                                  np.concatenate([c.tau for c in parts])))

    def _index_last(self) -> None:
        last = len(self.chunks) - 1
        self._where.update((key, (last, i)) for i, key in enumerate(self.chunks[last].keys))

    def _compact(self) -> None:
        """One chunk for the whole pool: prediction then takes one kernel block."""
        self._flush()
        if len(self.chunks) > 1:
            self._merge(len(self.chunks))
            self._index_last()

    def _coefficients(self, chunk: _Chunk, averaged: bool) -> np.ndarray:
        if not averaged:
            return chunk.alpha
        # Σ_{t=1..T} w_t: a support added at example t_s counts T - t_s + 1 times
        return (chunk.alpha * (self.n_examples + 1) - chunk.tau) / max(self.n_examples, 1)

    def _utilities(self, prepared, n: int, averaged: bool) -> np.ndarray:
        self._flush()
        if not self.chunks:
            return np.zeros(n)
        return self.kernel.weighted_sums([(chunk.prepared, self._coefficients(chunk, averaged))
                                          for chunk in self.chunks], prepared)

    # -- learning -------------------------------------------------------------
    def initialize(self, sets: Optional[Sequence[Sequence]] = None,
                   gold: Optional[Sequence[Optional[int]]] = None,
                   keys: Optional[Sequence[Hashable]] = None) -> "KernelPerceptron":
        """Start afresh (no support). A perceptron fixes nothing before
        training: the sets, with gold, are only checked."""
        self._restart(sets, gold, keys)
        return self

    def update(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
               keys: Optional[Sequence[Hashable]] = None, *, ids: Optional[Sequence[Hashable]] = None,
               sgd=None, losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One pass over the sets in the order given. Sets without a correct
        candidate (None) or with a single candidate teach nothing. A set
        whose id comes again (the next epoch) pools its support items with
        those it added before. ``losses["perceptron"]`` counts the mistakes.
        ``sgd`` is not used (the perceptron steps by itself): it is taken so
        that every learner updates alike. The support is left in chunks:
        ``finish_training`` packs it."""
        check_no_keys(self, keys)
        sets, gold, order = teaching_sets(sets, gold)
        if ids is None:
            ids = [object() for _ in range(len(sets))]
        elif len(ids) != len(sets):
            raise StructPrefError(f"{len(sets)} preference sets but {len(ids)} set ids")
        before = self.n_updates
        for i in order:
            self._train_set(ids[i], candidate_list(sets[i]), gold[i])
        losses = {} if losses is None else losses
        losses["perceptron"] = losses.get("perceptron", 0.0) + self.n_updates - before
        return losses

    def finish_training(self) -> "KernelPerceptron":
        """Pack the support as one chunk: prediction then takes one kernel block."""
        self._compact()
        return self

    def _train_set(self, set_id: Hashable, cands: Sequence, g: int) -> None:
        prepared = self.kernel.prepare(cands)
        u = self._utilities(prepared, len(cands), averaged=False)
        wrong = [j for j in range(len(cands)) if j != g]
        if self.loss == "setwise":
            self.n_examples += 1
            top = max(u[k] for k in wrong)
            j = next(k for k in wrong if at_least(u[k], top))  # the first of tied best
            if at_least(u[j], u[g]):
                self._update(set_id, cands, g, j)
            return
        K = None  # the set's own block, needed only once a mistake changes its scores
        for j in wrong:
            self.n_examples += 1
            if at_least(u[j], u[g]):
                self._update(set_id, cands, g, j)
                if K is None:
                    K = self.kernel.block(prepared, prepared)
                u += K[g] - K[j]

    def _update(self, set_id: Hashable, cands: Sequence, g: int, j: int) -> None:
        self._add((set_id, g), cands[g], 1.0)
        self._add((set_id, j), cands[j], -1.0)
        self.n_updates += 1

    # -- prediction -----------------------------------------------------------
    def utilities(self, candidates: Sequence) -> np.ndarray:
        """U(x) of every candidate of one set (averaged unless ``average=False``)."""
        candidates = candidate_list(candidates)
        if not len(candidates):
            return np.zeros(0)
        return self._utilities(self.kernel.prepare(candidates), len(candidates), self.average)

    # -- saving ---------------------------------------------------------------
    def _parts(self) -> Parts:
        """``cfg``: the kernel's settings, which a loaded support must have
        been trained with; ``support``: the support items and coefficients."""
        return {"cfg": (lambda: {"kernel": self.kernel.settings()}, self._check_cfg),
                "support": (self._support, self._set_support)}

    def _check_cfg(self, cfg: dict) -> None:
        if not isinstance(cfg.get("kernel"), dict):
            raise SavedModelError("the saved perceptron's cfg names no kernel (its settings): save it again")
        if cfg["kernel"] != self.kernel.settings():
            raise StructPrefError(f"the saved perceptron was trained with the kernel "
                                  f"{cfg['kernel']}, this one has {self.kernel.settings()}: load it "
                                  "into a learner built from the config that trained it")

    def _support(self) -> dict:
        chunk = self.chunks[0] if self.chunks else None  # one chunk: saving finishes training
        return {"n_examples": self.n_examples, "n_updates": self.n_updates,
                "items": self.kernel.encode(chunk.items) if chunk else [],
                "alpha": chunk.alpha.tolist() if chunk else [],
                "tau": chunk.tau.tolist() if chunk else []}

    def _set_support(self, data: dict) -> None:
        """Items are prepared by this learner's kernel: tree items intern into
        its SymbolTable, the one to build candidate DAGs with."""
        counts = data["n_examples"], data["n_updates"]
        n = len(data["items"])
        alpha, tau = np.asarray(data["alpha"], dtype=float), np.asarray(data["tau"], dtype=float)
        if not all(isinstance(c, int) and c >= 0 for c in counts):
            raise SavedModelError(f"the saved perceptron's example and update counts must be non-negative "
                                  f"integers, got {counts}")
        if alpha.shape != (n,) or tau.shape != (n,):
            raise SavedModelError(f"the saved perceptron support has {n} items but alpha of shape "
                                  f"{alpha.shape} and tau of shape {tau.shape}: one coefficient each per item")
        if not (np.isfinite(alpha).all() and np.isfinite(tau).all()):
            raise SavedModelError("the saved perceptron's coefficients alpha and tau must be finite")
        items = self.kernel.decode(data["items"])
        # prepared before the reset: a support that cannot be read leaves the learner as it was
        chunk = _Chunk(items, self.kernel.prepare(items), [object() for _ in items], alpha, tau) if n else None
        self._reset()
        self.n_examples, self.n_updates = counts
        if chunk is not None:  # its keys are fresh objects: no later update pools with a loaded item
            self.chunks = [chunk]
            self._index_last()

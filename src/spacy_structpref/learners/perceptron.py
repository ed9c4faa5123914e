"""The kernel voted perceptron for preference sets (Freund & Schapire; SPEC §5),
in dual form.

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
training the pool is packed as one chunk, so prediction takes one kernel block.
"""
import random
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import srsly

from ..saving import atomic_directory, check_saved
from .base import PreferenceLearner, candidate_list, check_training_settings, teaching_sets
from .kernels import kernel_from_dict
from .metrics import at_least

class _Chunk:
    def __init__(self, items: list, prepared, keys: list, alpha, tau):
        self.items, self.prepared, self.keys = items, prepared, keys
        self.alpha = np.asarray(alpha, dtype=float)  # Σ c over the supports using the item
        self.tau = np.asarray(tau, dtype=float)      # Σ c · t_s


class KernelPerceptron(PreferenceLearner):
    """Dual perceptron over preference sets with any learner kernel (an object
    with ``prepare``, ``join``, ``block`` and ``weighted_sum``, see :mod:`.kernels`)."""

    def __init__(self, kernel, loss: str = "setwise", epochs: int = 1, average: bool = True,
                 seed: int = 0, progress: Optional[bool] = None):
        check_training_settings(loss, epochs)
        self.kernel, self.loss, self.epochs = kernel, loss, epochs
        self.average, self.seed, self.progress = average, seed, progress
        self.chunks: List[_Chunk] = []
        self._where: Dict[tuple, Tuple[int, int]] = {}  # key -> (chunk, index)
        self._pending: Dict[tuple, list] = {}  # key -> [item, alpha, tau]
        self.n_fits = 0  # support keys are (fit call, set, candidate)
        self.n_examples = 0  # T: examples seen (pairs or sets)
        self.n_updates = 0

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
        u = np.zeros(n)
        for chunk in self.chunks:
            u += self.kernel.weighted_sum(chunk.prepared, self._coefficients(chunk, averaged),
                                          prepared)
        return u

    # -- learning -------------------------------------------------------------
    def fit(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]]) -> "KernelPerceptron":
        """Train on preference sets (lists of candidates) with the index of each
        set's best candidate; sets without one (None) or with a single
        candidate teach nothing and are skipped. Can be called again to go on."""
        sets, gold, order = teaching_sets(sets, gold)
        self.n_fits += 1
        rng = random.Random(self.seed)
        from tqdm import tqdm

        for epoch in range(self.epochs):
            if epoch:
                rng.shuffle(order)
            bar = tqdm(order, desc=f"perceptron epoch {epoch + 1}", unit="set",
                       disable=None if self.progress is None else not self.progress, leave=False)
            for i in bar:
                self._train_set(i, candidate_list(sets[i]), gold[i])
        self._compact()
        return self

    def _train_set(self, set_id: int, cands: Sequence, g: int) -> None:
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

    def _update(self, set_id: int, cands: Sequence, g: int, j: int) -> None:
        self._add((self.n_fits, set_id, g), cands[g], 1.0)
        self._add((self.n_fits, set_id, j), cands[j], -1.0)
        self.n_updates += 1

    # -- prediction -----------------------------------------------------------
    def utilities(self, candidates: Sequence) -> np.ndarray:
        """U(x) of every candidate of one set (averaged unless ``average=False``)."""
        candidates = candidate_list(candidates)
        if not len(candidates):
            return np.zeros(0)
        return self._utilities(self.kernel.prepare(candidates), len(candidates), self.average)

    # -- saving ---------------------------------------------------------------
    def to_disk(self, path) -> None:
        """Save kernel settings, support items and coefficients (atomically)."""
        self._compact()
        chunk = self.chunks[0] if self.chunks else None
        data = {"kernel": self.kernel.to_dict(), "loss": self.loss, "epochs": self.epochs,
                "average": self.average, "seed": self.seed, "n_fits": self.n_fits,
                "n_examples": self.n_examples, "n_updates": self.n_updates,
                "items": self.kernel.encode(chunk.items) if chunk else [],
                "keys": [list(k) for k in chunk.keys] if chunk else [],
                "alpha": chunk.alpha.tolist() if chunk else [],
                "tau": chunk.tau.tolist() if chunk else []}
        with atomic_directory(path, type(self).__name__) as tmp:
            srsly.write_msgpack(tmp / "perceptron.msgpack", data)

    @classmethod
    def from_disk(cls, path, symbols=None) -> "KernelPerceptron":
        """Load a saved learner; a tree kernel interns into ``symbols`` (default
        a new SymbolTable): share one table with the candidate DAGs to score."""
        data = srsly.read_msgpack(check_saved(path, cls.__name__) / "perceptron.msgpack")
        kernel = kernel_from_dict(data["kernel"], symbols)
        learner = cls(kernel, loss=data["loss"], epochs=data["epochs"], average=data["average"],
                      seed=data["seed"])
        learner.n_fits, learner.n_examples = data["n_fits"], data["n_examples"]
        learner.n_updates = data["n_updates"]
        if data["items"]:
            items = kernel.decode(data["items"])
            learner.chunks = [_Chunk(items, kernel.prepare(items), [tuple(k) for k in data["keys"]],
                                     data["alpha"], data["tau"])]
            learner._index_last()
        return learner

"""Preference learning with the recursive neural network (SPEC §5): a
:func:`~..models.recursive.RecursiveNet` scores every candidate tree; the
setwise loss is the softmax cross-entropy over each set,
``−log e^{U(x_y)} / Σ_j e^{U(x_j)}``, the pairwise loss the logistic loss of
every (best, wrong) pair, ``log(1 + e^{U(x_j) − U(x_y)})``. Each set is
hash-consed into a label DAG once, before the first epoch (shared subtrees
are computed once), and a minibatch concatenates its sets' DAGs. Sets may be
lists of nltk Trees or :class:`~..kernels.TreeSetDAG` sets (e.g.
``PreferenceSet.dag``), which skips building trees altogether.
"""
import random
from typing import List, Optional, Sequence, Tuple

import numpy as np
import srsly
from thinc.api import Adam, Optimizer

from ..errors import StructPrefError
from ..saving import atomic_directory, check_saved
from ..models.recursive import RecursiveNet, build_label_dag, concat_label_dags, label_vocab
from .base import PreferenceLearner, candidate_list, check_training_settings, teaching_sets

def set_losses(scores: np.ndarray, set_starts: np.ndarray, gold: Sequence[Optional[int]],
               loss: str) -> Tuple[float, np.ndarray]:
    """Summed loss over the sets with a gold candidate, and its gradient
    with respect to the candidate scores."""
    d_scores = np.zeros_like(scores, dtype=np.float64)
    total = 0.0
    for s, g in enumerate(gold):
        if g is None:
            continue
        lo, hi = set_starts[s], set_starts[s + 1]
        u = scores[lo:hi].astype(np.float64)
        if loss == "setwise":
            p = np.exp(u - u.max())
            p /= p.sum()
            total -= np.log(p[g])
            p[g] -= 1.0
            d_scores[lo:hi] = p
        else:
            wrong = np.arange(hi - lo) != g
            margin = u[wrong] - u[g]
            total += np.logaddexp(0.0, margin).sum()
            sig = 1.0 / (1.0 + np.exp(-margin))
            d_scores[lo:hi][wrong] = sig
            d_scores[lo + g] = -sig.sum()
    return total, d_scores


class RecursiveNetLearner(PreferenceLearner):
    """Trains a recursive network on preference sets of trees; same
    ``fit``/``utilities``/``predict`` interface as the kernel perceptron."""

    def __init__(self, width: int = 25, max_children: int = 15, loss: str = "setwise",
                 epochs: int = 12, batch_size: int = 32, optimizer: Optional[Optimizer] = None,
                 seed: int = 0, progress: Optional[bool] = None):
        check_training_settings(loss, epochs)
        if batch_size < 1:
            raise StructPrefError(f"batch_size must be >= 1, got {batch_size}")
        self.width, self.max_children, self.loss = width, max_children, loss
        self.epochs, self.batch_size, self.seed = epochs, batch_size, seed
        # Adam 0.01 for 12 epochs: best of 0.003/0.01/0.03 × 5–30 epochs on PTB dev
        # attachment sets from 100 training sentences (bench/attachment.py)
        self.optimizer = optimizer if optimizer is not None else Adam(0.01)
        self.progress = progress
        self.vocab = None
        self.model = None
        self.losses: List[float] = []  # mean loss per set, per epoch
        self._rng = random.Random(seed)  # one shuffle stream across fit calls

    def _dag(self, sets):
        return build_label_dag(sets, self.vocab, self.max_children)

    def fit(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]]) -> "RecursiveNetLearner":
        """Train on preference sets (lists of nltk Trees, or TreeSetDAGs) with
        each set's best candidate index (None: no correct candidate, skipped).
        The label vocabulary comes from the first call's sets."""
        sets, gold, order = teaching_sets(sets, gold)
        if self.model is None:
            if not order:
                raise StructPrefError("no preference set with a correct candidate and a rival")
            self.vocab = label_vocab(candidate_list(sets[i]) for i in order)
            self.model = RecursiveNet(self.width, self.max_children, len(self.vocab) + 2,
                                      seed=self.seed).initialize()
        from tqdm import tqdm

        set_dags = {i: self._dag([candidate_list(sets[i])]) for i in order}
        for epoch in range(self.epochs):
            self._rng.shuffle(order)
            total = 0.0
            batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
            for batch in tqdm(batches, desc=f"recursive net epoch {epoch + 1}", unit="batch",
                              disable=None if self.progress is None else not self.progress,
                              leave=False):
                dag = concat_label_dags([set_dags[i] for i in batch])
                scores, backprop = self.model.begin_update(dag)
                loss, d_scores = set_losses(scores, dag.set_starts, [gold[i] for i in batch],
                                            self.loss)
                backprop(d_scores / len(batch))
                self.model.finish_update(self.optimizer)
                total += loss
            self.losses.append(float(total / max(len(order), 1)))
        return self

    def utilities(self, candidates: Sequence) -> np.ndarray:
        """U(x) of every candidate of one set."""
        if self.model is None:
            raise StructPrefError("the recursive net is not trained yet: call fit first")
        candidates = candidate_list(candidates)
        if not len(candidates):
            return np.zeros(0)
        with self.model.use_params(self.optimizer.averages or {}):
            return np.asarray(self.model.predict(self._dag([candidates])), dtype=np.float64)

    # -- saving ---------------------------------------------------------------
    def to_disk(self, path) -> None:
        """Save settings, label vocabulary and the (averaged) network, atomically.
        A loaded learner predicts the same; further training starts a fresh optimizer."""
        if self.model is None:
            raise StructPrefError("the recursive net is not trained yet: nothing to save")
        settings = {"width": self.width, "max_children": self.max_children, "loss": self.loss,
                    "epochs": self.epochs, "batch_size": self.batch_size, "seed": self.seed,
                    "vocab": self.vocab, "losses": self.losses}
        with self.model.use_params(self.optimizer.averages or {}):
            weights = self.model.to_bytes()
        with atomic_directory(path, type(self).__name__) as tmp:
            srsly.write_json(tmp / "learner.json", settings)
            (tmp / "model.bin").write_bytes(weights)

    @classmethod
    def from_disk(cls, path) -> "RecursiveNetLearner":
        path = check_saved(path, cls.__name__)
        settings = srsly.read_json(path / "learner.json")
        vocab, losses = settings.pop("vocab"), settings.pop("losses")
        learner = cls(**settings)
        learner.vocab, learner.losses = vocab, losses
        learner.model = RecursiveNet(learner.width, learner.max_children, len(vocab) + 2,
                                     seed=learner.seed).initialize()
        learner.model.from_bytes((path / "model.bin").read_bytes())
        return learner

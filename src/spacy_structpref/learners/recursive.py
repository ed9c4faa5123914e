"""Preference learning with the recursive neural network (Menchetti et al.
2005, §4 and §5.2): a :func:`~..models.recursive.RecursiveNet` scores every
candidate tree; the setwise loss is the softmax cross-entropy over each set
(their eq. 10), ``−log e^{U(x_y)} / Σ_j e^{U(x_j)}``, the pairwise loss the
logistic loss of every (best, wrong) pair, ``log(1 + e^{U(x_j) − U(x_y)})``.
Each set is hash-consed into a label DAG once, before the first epoch (shared
subtrees are computed once), and a minibatch concatenates its sets' DAGs.
Sets may be lists of nltk Trees or :class:`~..trees.TreeSetDAG` sets (e.g.
``PreferenceSet.dag``), which skips building trees altogether.

``update`` takes one gradient step per call (the caller's minibatch, as in
spaCy's training loop) with the caller's optimizer; ``fit`` makes the
minibatches and trains with the learner's own optimizer, whose parameter
averages (Polyak averaging) it then predicts and saves with. Given
validation sets, ``fit`` stops early as Menchetti et al. (2005, §6.3.1) did
("early stopping based on 1000 validation sentences"): after each epoch the
averaged weights are scored by ``L_1`` on the validation sets, the best
epoch's weights are kept, and training stops after ``patience`` epochs
without a better one. A pipeline that
updates with its own optimizer predicts and saves inside
``learner.use_params(sgd.averages)``, as spaCy does.

For reranking, ``log_p_input`` gives the network the base parser's log
probability as ``a·log p + b`` (Menchetti et al. 2005, §6.3.2); sets then
come with their log probabilities, as
:class:`~.kernels.ScoredTrees` (trees or a TreeSetDAG, and ``log_p``).
"""
import random
from contextlib import nullcontext
from typing import ContextManager, Dict, List, Optional, Sequence, Tuple

import numpy as np
from thinc.api import Model, Optimizer

from ..errors import SavedModelError, StructPrefError
from ..models.recursive import (LabelDAG, RecursiveNet, build_label_dag, concat_label_dags,
                                label_vocab)
from .base import Parts, PreferenceLearner, candidate_list, check_training_settings, teaching_sets


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
    interface as the kernel perceptron. ``optimizer`` is what ``fit`` trains
    with (in a config, ``[learner.optimizer]``; ``configs/learners/rnn.cfg``
    has the tuned Adam), with fixed settings: a schedule is refused."""

    takes_validation = True  # fit stops early on validation sets

    def __init__(self, width: int = 25, max_children: int = 15, loss: str = "setwise",
                 epochs: int = 12, batch_size: int = 32, optimizer: Optional[Optimizer] = None,
                 seed: int = 0, progress: Optional[bool] = None, log_p_input: bool = False,
                 log_p_a: float = 1.0, log_p_b: float = 0.0, patience: int = 0,
                 min_word_sets: int = 0):
        check_training_settings(loss, epochs)
        if min_word_sets < 0:
            raise StructPrefError(f"min_word_sets must be >= 0 (0: no word inputs), got {min_word_sets}")
        if batch_size < 1:
            raise StructPrefError(f"batch_size must be >= 1, got {batch_size}")
        if patience < 0:
            raise StructPrefError(f"patience must be >= 0 (0: every epoch), got {patience}")
        if optimizer is not None and optimizer.schedules:
            # thinc's schedules are generators, stepped by whoever trains; fit trains the
            # learners of a specialised set one after another with one shared optimizer
            raise StructPrefError("the recursive net's optimizer takes fixed settings, not schedules "
                                  f"(fit does not step them): {', '.join(sorted(optimizer.schedules))}")
        self.width, self.max_children, self.loss = width, max_children, loss
        self.epochs, self.batch_size, self.seed = epochs, batch_size, seed
        self.optimizer, self.progress = optimizer, progress
        self.log_p_input, self.log_p_a, self.log_p_b = bool(log_p_input), float(log_p_a), float(log_p_b)
        self.patience, self.min_word_sets = patience, min_word_sets
        # the best epoch's averaged weights, (node id, name) -> array, once fit chose them on validation sets
        self._best: Optional[Dict[Tuple[int, str], np.ndarray]] = None
        self.validation_losses: List[float] = []  # L_1 on the validation sets, per epoch of fit
        self.best_epoch: Optional[int] = None  # 1-based, when fit chose on validation sets
        self.vocab: Optional[Dict[str, int]] = None
        self.model: Optional[Model] = None
        self.losses: List[float] = []  # mean loss per set, per epoch of fit
        self._rng = random.Random(seed)  # one shuffle stream across fit calls

    def clone(self, seed: Optional[int] = None) -> "RecursiveNetLearner":
        """An untrained learner with the same settings, seeded ``seed`` (None:
        this one's seed); the optimizer is shared (an optimizer keeps its
        state per model parameter)."""
        return type(self)(self.width, self.max_children, self.loss, self.epochs, self.batch_size,
                          optimizer=self.optimizer, seed=self.seed if seed is None else seed,
                          progress=self.progress,
                          log_p_input=self.log_p_input, log_p_a=self.log_p_a, log_p_b=self.log_p_b,
                          patience=self.patience, min_word_sets=self.min_word_sets)

    def _dag(self, sets) -> LabelDAG:
        trees, log_p = zip(*map(_split_scored, sets)) if len(sets) else ((), ())
        dag = build_label_dag(trees, self.vocab, self.max_children)
        if self.log_p_input:
            if any(lp is None for lp in log_p):
                raise StructPrefError("this network takes the parser's log p as an input: give "
                                      "each set as ScoredTrees(trees, log_p)")
            dag.log_p = np.concatenate([np.asarray(lp, dtype=np.float64) for lp in log_p])
        return dag

    def _new_model(self) -> None:
        self._best = None
        self.model = self._network()

    def _network(self) -> Model:
        """A freshly initialized network of this learner's shape and label vocabulary."""
        return RecursiveNet(self.width, self.max_children, len(self.vocab) + 2, seed=self.seed,
                            log_p_input=self.log_p_input, log_p_a=self.log_p_a, log_p_b=self.log_p_b).initialize()

    def _trained(self, why: str) -> Model:
        if self.model is None:
            raise StructPrefError(f"the recursive net is not trained yet: {why}")
        return self.model

    # -- learning -------------------------------------------------------------
    def initialize(self, sets: Sequence[Sequence],
                   gold: Optional[Sequence[Optional[int]]] = None) -> "RecursiveNetLearner":
        """A fresh network whose label vocabulary is that of the sets that can
        teach (every set when ``gold`` is None)."""
        if gold is None:
            order = range(len(sets))
        else:
            sets, gold, order = teaching_sets(sets, gold)
        if not order:
            raise StructPrefError("no preference set with a correct candidate and a rival")
        self.vocab = label_vocab((_split_scored(candidate_list(sets[i]))[0] for i in order),
                                 self.min_word_sets)
        self._new_model()
        self.losses, self.validation_losses, self.best_epoch = [], [], None
        return self

    def update(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]], *,
               sgd: Optional[Optimizer] = None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One gradient step on the sets as one minibatch: the loss summed over
        the sets that can teach, its gradient divided by their number.
        ``sgd=None`` leaves the gradient to ``finish_update(sgd)``.
        ``losses["recursive_net"]`` adds the summed loss."""
        sets, gold, order = teaching_sets(sets, gold)
        self._trained("call initialize first")
        loss = self._step([self._dag([candidate_list(sets[i])]) for i in order],
                          [gold[i] for i in order], sgd) if order else 0.0
        losses = {} if losses is None else losses
        losses["recursive_net"] = losses.get("recursive_net", 0.0) + loss
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        self._trained("call initialize first").finish_update(sgd)

    def _step(self, set_dags: List[LabelDAG], gold: List[int], sgd: Optional[Optimizer]) -> float:
        dag = concat_label_dags(set_dags)
        scores, backprop = self.model.begin_update(dag)
        loss, d_scores = set_losses(scores, dag.set_starts, gold, self.loss)
        backprop(d_scores / len(set_dags))
        if sgd is not None:
            self.finish_update(sgd)
        return loss

    def fit(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
            validation: Optional[Tuple[Sequence[Sequence], Sequence[Optional[int]]]] = None
            ) -> "RecursiveNetLearner":
        """Train on preference sets (lists of nltk Trees, or TreeSetDAGs) with
        each set's best candidate index (None: no correct candidate, skipped):
        ``epochs`` shuffled passes in minibatches of ``batch_size`` sets, one
        ``update`` step each with the learner's optimizer. The first call
        initializes the network (label vocabulary from its sets); later calls
        go on. ``validation``: ``(sets, gold)`` held out; after each epoch
        the averaged weights are scored on them by ``L_1`` and the best
        epoch's are kept (the first of equals), stopping after ``patience``
        epochs without a better one (0: all ``epochs``)."""
        if self.optimizer is None:
            raise StructPrefError("fit trains with the learner's optimizer and this one has none: "
                                  "give it one (optimizer=..., or [learner.optimizer] in its "
                                  "config), or train with update(..., sgd=...)")
        sets, gold, order = teaching_sets(sets, gold)
        if self.model is None:
            self.initialize(sets, gold)
        from tqdm import tqdm

        # each set hash-consed once for all epochs; a minibatch concatenates them
        set_dags = {i: self._dag([candidate_list(sets[i])]) for i in order}
        checked = self._validation_dags(validation)
        # the optimizer's averages are scored each epoch; the best are put in place at the end
        self._best, kept, best, since = None, None, np.inf, 0
        for epoch in range(self.epochs):
            self._rng.shuffle(order)
            total = 0.0
            batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
            for batch in tqdm(batches, desc=f"recursive net epoch {epoch + 1}", unit="batch",
                              disable=None if self.progress is None else not self.progress,
                              leave=False):
                total += self._step([set_dags[i] for i in batch], [gold[i] for i in batch],
                                    self.optimizer)
            self.losses.append(float(total / max(len(order), 1)))
            if checked is None:
                continue
            error = self._validation_error(*checked)
            self.validation_losses.append(error)
            if error < best:
                best, since, self.best_epoch = error, 0, len(self.validation_losses)
                kept = self._averaged_params()
            else:
                since += 1
                if self.patience and since >= self.patience:
                    break
        self._best = kept
        return self

    def _validation_dags(self, validation) -> Optional[Tuple[LabelDAG, List[Optional[int]]]]:
        """The validation sets as one label DAG, with their gold (None when
        there are none)."""
        if validation is None:
            return None
        if not (isinstance(validation, (tuple, list)) and len(validation) == 2):
            raise StructPrefError("validation is a pair (sets, gold)")
        val_sets, val_gold = validation
        val_sets, val_gold, _ = teaching_sets(val_sets, val_gold)
        keep = [i for i in range(len(val_sets)) if len(candidate_list(val_sets[i]))]
        if not keep:
            return None
        return (concat_label_dags([self._dag([candidate_list(val_sets[i])]) for i in keep]),
                [val_gold[i] for i in keep])

    def _validation_error(self, dag: LabelDAG, gold: List[Optional[int]]) -> float:
        """``L_1`` of the averaged weights on the validation DAG."""
        from .metrics import loss_at_r

        with self._averaged():
            scores = np.asarray(self.model.predict(dag), dtype=np.float64)
        starts = dag.set_starts
        return loss_at_r([scores[starts[s]:starts[s + 1]] for s in range(len(gold))], gold)[1]

    def _averaged_params(self) -> Dict[Tuple[int, str], np.ndarray]:
        """A copy of the weights that ``utilities`` predicts with now."""
        with self._averaged():
            return {(node.id, name): node.get_param(name).copy() for node in self.model.walk()
                    for name in node.param_names if node.has_param(name)}

    # -- prediction -----------------------------------------------------------
    def use_params(self, params: Dict) -> ContextManager:
        return nullcontext() if self.model is None else self.model.use_params(params)

    def _averaged(self) -> ContextManager:
        """The weights of the best validation epoch in place, when ``fit``
        chose them; else the parameter averages of the learner's own
        optimizer (none before ``fit``, or when it keeps none)."""
        if self._best is not None:
            return self.use_params(self._best)
        averages = self.optimizer.averages if self.optimizer is not None else None
        return self.use_params(averages or {})

    def utilities(self, candidates: Sequence) -> np.ndarray:
        """U(x) of every candidate of one set."""
        model = self._trained("call initialize or fit first")
        candidates = candidate_list(candidates)
        if not len(candidates):
            return np.zeros(0)
        with self._averaged():
            return np.asarray(model.predict(self._dag([candidates])), dtype=np.float64)

    def root_states(self, candidates: Sequence) -> np.ndarray:
        """The root state ``u(root(x))`` of every candidate of one set, one row
        each (``U(x) = oᵀ u(root(x))``): the network's adaptive representation
        of the trees (Menchetti et al. 2005, §6.3.3), e.g. the vectors of a
        linear-kernel perceptron (their Table 4) or of a PCA (their Fig. 2)."""
        from ..models.recursive import node_states

        model = self._trained("call initialize or fit first")
        candidates = candidate_list(candidates)
        if not len(candidates):
            return np.zeros((0, self.width))
        dag = self._dag([candidates])
        with self._averaged():
            return np.asarray(node_states(model, dag)[dag.roots], dtype=np.float64)

    # -- saving ---------------------------------------------------------------
    def _parts(self) -> Parts:
        """``cfg``: the network's shape, label vocabulary and training losses;
        ``model``: its weights, averaged as ``utilities`` uses them. A saved
        network loads into a learner of the same width, max_children and
        inputs (log p, min_word_sets)."""
        return {"cfg": (self._cfg, self._set_cfg), "model": (self._weights, self._set_weights)}

    def _cfg(self) -> dict:
        self._trained("nothing to save")
        return {"width": self.width, "max_children": self.max_children, "vocab": self.vocab,
                "losses": self.losses, **self._input_cfg()}

    def _input_cfg(self) -> dict:
        """The settings that decide the network's inputs (log p, words)."""
        return {"log_p_input": self.log_p_input, "log_p_a": self.log_p_a, "log_p_b": self.log_p_b,
                "min_word_sets": self.min_word_sets}

    def _set_cfg(self, cfg: dict) -> None:
        # saves from before the log p input (or the word inputs) have none
        cfg = {"log_p_input": False, "log_p_a": 1.0, "log_p_b": 0.0, "min_word_sets": self.min_word_sets, **cfg}
        for name in ("width", "max_children", *self._input_cfg()):
            if cfg[name] != getattr(self, name):
                raise StructPrefError(f"the saved network has {name} = {cfg[name]}, this learner "
                                      f"{getattr(self, name)}: load it into a learner built from "
                                      "the config that trained it")
        vocab = cfg["vocab"]
        if not (all(isinstance(label, str) for label in vocab)
                and sorted(vocab.values()) == list(range(2, len(vocab) + 2))):
            raise SavedModelError("the saved label vocabulary must map distinct labels to the ids 2, 3, ... "
                                  "(after the reserved UNKNOWN and WORD)")
        self.vocab, self.losses = vocab, cfg["losses"]
        self._new_model()

    def _weights(self) -> bytes:
        model = self._trained("nothing to save")
        with self._averaged():
            return model.to_bytes()

    def _set_weights(self, data: bytes) -> None:
        """The weights, which must have the shapes of the network the saved
        cfg built; loaded into a new network, adopted when they fit."""
        self._trained("load its cfg (the label vocabulary) with the weights")
        model = self._network()
        before = _param_shapes(model)
        model.from_bytes(data)
        after = _param_shapes(model)
        if after != before:
            raise SavedModelError(f"the saved weights have the shapes {after}, the network its cfg describes "
                                  f"{before}: the cfg and the weights come from different saves")
        self.model, self._best = model, None  # the loaded weights are the ones to predict with


def _param_shapes(model: Model) -> list:
    return [(node.name, name, node.get_param(name).shape) for node in model.walk()
            for name in node.param_names if node.has_param(name)]


def _split_scored(candidates) -> Tuple[Sequence, Optional[np.ndarray]]:
    """``(trees, log_p)`` of a set: a ScoredTrees set carries its log
    probabilities (``.trees``, ``.log_p``), any other set has none."""
    if hasattr(candidates, "trees") and hasattr(candidates, "log_p"):
        return candidates.trees, candidates.log_p
    return candidates, None

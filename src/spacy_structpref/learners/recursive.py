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
spaCy's training loop) with the caller's optimizer. :func:`.training.fit`
trains with its schedule's optimizer and leaves the learner predicting (and
saving) with the optimizer's parameter averages (Polyak averaging), or
those of the best validation epoch; a pipeline that updates with its own
optimizer predicts and saves inside ``learner.use_params(sgd.averages)``,
as spaCy does.

For reranking, ``log_p_input`` gives the network the base parser's log
probability as ``a·log p + b`` (Menchetti et al. 2005, §6.3.2); sets then
come with their log probabilities, as
:class:`~.kernels.ScoredTrees` (trees or a TreeSetDAG, and ``log_p``).
"""
from collections.abc import Sequence as SequenceABC
from contextlib import nullcontext
from typing import ContextManager, Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np
from thinc.api import Model, Optimizer

from ..errors import SavedModelError, StructPrefError
from ..models.recursive import (CandidateArrays, LabelDAG, LabelDAGBuilder, RecursiveNet, concat_label_dags,
                                label_vocab)
from ..models.weights import check_finite_weights, model_weights
from ..trees import TreeSetDAG
from .base import (Parts, PreferenceLearner, Subsequence, TrainingLog, candidate_list, check_loss, check_no_keys,
                   set_sizes, teaching_sets)


def set_losses(scores: np.ndarray, set_starts: np.ndarray, gold: Sequence[Optional[int]],
               loss: str) -> Tuple[float, np.ndarray]:
    """Summed loss over the sets with a gold candidate, and its gradient
    with respect to the candidate scores (every set at once: segment sums
    over the sets' ranges)."""
    u = np.asarray(scores, dtype=np.float64).reshape(-1)
    starts = np.asarray(set_starts, dtype=np.int64)
    sizes = np.diff(starts)
    has = np.array([g is not None for g in gold], dtype=bool)
    if not has.any():
        return 0.0, np.zeros_like(u)
    # per candidate: its set, whether that set teaches, its set's gold candidate
    owner = np.repeat(np.arange(len(sizes)), sizes)
    gold_at = starts[:-1] + np.array([0 if g is None else g for g in gold], dtype=np.int64)
    teaching = has[owner]
    # reduceat over the non-empty sets' starts: each segment runs to the next one's start
    nonempty = sizes > 0
    segments = starts[:-1][nonempty]
    if loss == "setwise":
        top, z = np.zeros(len(sizes)), np.ones(len(sizes))
        top[nonempty] = np.maximum.reduceat(u, segments)
        e = np.exp(u - top[owner])
        z[nonempty] = np.add.reduceat(e, segments)
        total = float(-(u[gold_at[has]] - top[has] - np.log(z[has])).sum())
        d_scores = np.where(teaching, e / z[owner], 0.0)
        d_scores[gold_at[has]] -= 1.0
        return total, d_scores
    margin = u - u[gold_at[owner]]
    wrong = teaching & (np.arange(len(u)) != gold_at[owner])
    total = float(np.logaddexp(0.0, margin[wrong]).sum())
    d_scores = np.where(wrong, 1.0 / (1.0 + np.exp(-margin)), 0.0)
    d_scores[gold_at[has]] = -np.bincount(owner, weights=d_scores, minlength=len(sizes))[has]
    return total, d_scores


class PreparedSets(SequenceABC):
    """Preference sets prepared for a recursive net (what
    :meth:`RecursiveNetLearner.prepare` makes), each read when first used
    (a TreeSetDAG kept as its CandidateArrays, a few kilobytes; trees as
    they are) and hash-consed into a label DAG over the net's vocabulary
    when first indexed, both kept for every epoch. ``initialize`` may make
    the vocabulary from them, so sets built on access are built once."""

    def __init__(self, learner: "RecursiveNetLearner", sets: Sequence[Sequence]):
        self.learner, self.sets = learner, sets
        self._sizes = set_sizes(sets)  # asked for at every minibatch
        self._read: List[Optional[Tuple[object, Optional[np.ndarray]]]] = [None] * len(sets)
        self._dags: List[Optional[LabelDAG]] = [None] * len(sets)
        self._builder = None  # the learner's builder the DAGs were made with
        self._whole: Optional[Tuple[object, LabelDAG]] = None  # (builder, every set in one DAG)

    def __len__(self) -> int:
        return len(self._sizes)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return PreparedSets(self.learner, Subsequence(self.sets, range(len(self))[i]))
        if self._builder is not self.learner._builder:  # a new vocabulary: made afresh
            self._dags, self._builder = [None] * len(self), self.learner._builder
        if self._dags[i] is None:
            self._dags[i] = self.learner._label_dag([self._item(i)])
        return self._dags[i]

    def _item(self, i: int) -> Tuple[object, Optional[np.ndarray]]:
        if self._read[i] is None:
            self._read[i] = _prepared(self.sets[i])
        return self._read[i]

    def concatenated(self) -> LabelDAG:
        """Every set in one label DAG, made once (and laid out once for the
        batched passes) however many times validation scores them."""
        if self._whole is None or self._whole[0] is not self.learner._builder:
            dags = [self[i] for i in range(len(self))]
            self._whole = (self.learner._builder, concat_label_dags(dags))
        return self._whole[1]

    def candidates(self, i: int):
        """Set i's candidates as prepared (trees, CandidateArrays or a label DAG)."""
        return self._item(i)[0]

    def sizes(self) -> List[int]:
        return self._sizes


class RecursiveNetLearner(PreferenceLearner):
    """Trains a recursive network on preference sets of trees; same
    interface as the kernel perceptron. Trained by :func:`.training.fit`,
    its schedule gives the optimizer (``configs/learners/rnn.cfg`` has the
    tuned Adam). ``batched=False`` runs the network node by node (the slow
    reference of its batched passes: same weights, same saves)."""

    def __init__(self, width: int = 25, max_children: int = 15, loss: str = "setwise", seed: int = 0,
                 log_p_input: bool = False, log_p_a: float = 1.0, log_p_b: float = 0.0, min_word_sets: int = 0,
                 batched: bool = True):
        check_loss(loss)
        if min_word_sets < 0:
            raise StructPrefError(f"min_word_sets must be >= 0 (0: no word inputs), got {min_word_sets}")
        self.width, self.max_children, self.loss, self.seed = width, max_children, loss, seed
        self.log_p_input, self.log_p_a, self.log_p_b = bool(log_p_input), float(log_p_a), float(log_p_b)
        self.min_word_sets, self.batched = min_word_sets, bool(batched)
        # the weights to predict with, (node id, name) -> array, once training chose them
        # (an optimizer's averages, the best validation epoch's); None: the model's own
        self._kept: Optional[Dict[Tuple[int, str], np.ndarray]] = None
        self.vocab: Optional[Dict[str, int]] = None
        self.model: Optional[Model] = None
        self._builder: Optional[LabelDAGBuilder] = None  # label DAGs over the vocabulary
        self.log = TrainingLog()

    def clone(self, seed: Optional[int] = None) -> "RecursiveNetLearner":
        """An untrained learner with the same settings, seeded ``seed`` (None:
        this one's seed)."""
        return type(self)(self.width, self.max_children, self.loss, seed=self.seed if seed is None else seed,
                          log_p_input=self.log_p_input, log_p_a=self.log_p_a, log_p_b=self.log_p_b,
                          min_word_sets=self.min_word_sets, batched=self.batched)

    def _set_dag(self, candidates) -> LabelDAG:
        """One set's label DAG (a prepared set is one already)."""
        return candidates if isinstance(candidates, LabelDAG) else self._dag([candidate_list(candidates)])

    def _dag(self, sets) -> LabelDAG:
        return self._label_dag([_split_scored(s) for s in sets])

    def _label_dag(self, sets: Sequence[Tuple[object, Optional[np.ndarray]]]) -> LabelDAG:
        """One label DAG of sets given as ``(candidates, log_p or None)``
        (a set that is a label DAG already is its own)."""
        self._trained("call initialize first")
        if len(sets) == 1 and isinstance(sets[0][0], LabelDAG):
            return sets[0][0]
        trees, log_p = zip(*sets) if len(sets) else ((), ())
        dag = self._builder.build(trees)
        if self.log_p_input:
            if any(lp is None for lp in log_p):
                raise StructPrefError("this network takes the parser's log p as an input: give "
                                      "each set as ScoredTrees(trees, log_p)")
            dag.log_p = np.concatenate([np.asarray(lp, dtype=np.float64) for lp in log_p])
        return dag

    def _new_model(self) -> None:
        self._kept = None
        self.model = self._network()
        self._builder = LabelDAGBuilder(self.vocab, self.max_children)

    def _network(self) -> Model:
        """A freshly initialized network of this learner's shape and label vocabulary."""
        return RecursiveNet(self.width, self.max_children, len(self.vocab) + 2, seed=self.seed,
                            log_p_input=self.log_p_input, log_p_a=self.log_p_a, log_p_b=self.log_p_b,
                            batched=self.batched).initialize()

    def _trained(self, why: str) -> Model:
        if self.model is None:
            raise StructPrefError(f"the recursive net is not trained yet: {why}")
        return self.model

    # -- learning -------------------------------------------------------------
    @property
    def initialized(self) -> bool:
        return self.model is not None

    def initialize(self, sets: Sequence[Sequence], gold: Optional[Sequence[Optional[int]]] = None,
                   keys: Optional[Sequence[Hashable]] = None) -> "RecursiveNetLearner":
        """A fresh network whose label vocabulary is that of the sets that can
        teach (every set when ``gold`` is None)."""
        check_no_keys(self, keys)
        if gold is None:
            order = range(len(sets))
        else:
            sets, gold, order = teaching_sets(sets, gold)
        if not order:
            raise StructPrefError("no preference set with a correct candidate and a rival")
        candidates = (sets.candidates if isinstance(sets, PreparedSets)
                      else lambda i: _split_scored(candidate_list(sets[i]))[0])
        if any(isinstance(candidates(i), LabelDAG) for i in order):
            raise StructPrefError("label DAGs carry no labels to make a vocabulary of: initialize with the sets")
        self.vocab = label_vocab((candidates(i) for i in order), self.min_word_sets)
        self._new_model()
        self.log = TrainingLog()
        return self

    def prepare(self, sets: Sequence[Sequence]) -> PreparedSets:
        """Each set to be read once and hash-consed into a label DAG when
        first used (a minibatch concatenates them); ``initialize`` may come
        after, with the prepared sets."""
        return PreparedSets(self, sets if isinstance(sets, SequenceABC) else list(sets))

    def update(self, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
               keys: Optional[Sequence[Hashable]] = None, *, ids: Optional[Sequence[Hashable]] = None,
               sgd: Optional[Optimizer] = None, losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One gradient step on the sets as one minibatch: the loss summed over
        the sets that can teach, its gradient divided by their number.
        ``sgd=None`` leaves the gradient to ``finish_update(sgd)``; the
        network predicts with its own weights again (not those training
        kept). ``losses["recursive_net"]`` adds the summed loss. ``ids``
        are not needed: a set comes again as the same prepared DAG."""
        check_no_keys(self, keys)
        sets, gold, order = teaching_sets(sets, gold)
        self._trained("call initialize first")
        self._kept = None
        loss = self._step([self._set_dag(sets[i]) for i in order],
                          [gold[i] for i in order], sgd) if order else 0.0
        losses = {} if losses is None else losses
        losses["recursive_net"] = losses.get("recursive_net", 0.0) + loss
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        self._trained("call initialize first").finish_update(sgd)

    def _step(self, set_dags: List[LabelDAG], gold: List[int], sgd: Optional[Optimizer]) -> float:
        dag = concat_label_dags(set_dags)
        scores, backprop = self.model.begin_update(dag)
        loss, d_scores = set_losses(self.model.ops.to_numpy(scores), dag.set_starts, gold, self.loss)
        backprop(d_scores / len(set_dags))
        if sgd is not None:
            self.finish_update(sgd)
        return loss

    def snapshot(self) -> Dict[Tuple[int, str], np.ndarray]:
        """A copy of the weights that ``utilities`` predicts with now."""
        with self._averaged():
            return {(node.id, name): node.get_param(name).copy() for node in self._trained("nothing to keep").walk()
                    for name in node.param_names if node.has_param(name)}

    def restore(self, snapshot: Dict[Tuple[int, str], np.ndarray]) -> None:
        """Predict (and save) with the weights of :meth:`snapshot` until the next update."""
        self._kept = snapshot

    # -- prediction -----------------------------------------------------------
    def use_params(self, params: Dict) -> ContextManager:
        return nullcontext() if self.model is None else self.model.use_params(params)

    def _averaged(self) -> ContextManager:
        """The weights training kept in place (none: the network's own)."""
        return self.use_params(self._kept or {})

    def utilities(self, candidates: Sequence) -> np.ndarray:
        """U(x) of every candidate of one set."""
        model = self._trained("call initialize or fit first")
        candidates = candidate_list(candidates)
        if not len(candidates):
            return np.zeros(0)
        with self._averaged():
            return np.asarray(model.ops.to_numpy(model.predict(self._dag([candidates]))), dtype=np.float64)

    def set_utilities(self, sets: Sequence[Sequence]) -> List[np.ndarray]:
        """U(x) of every candidate of each set, the sets scored as one DAG."""
        model = self._trained("call initialize or fit first")
        if not len(sets):
            return []
        dag = (sets.concatenated() if isinstance(sets, PreparedSets) and sets.learner is self
               else concat_label_dags([self._set_dag(sets[i]) for i in range(len(sets))]))
        with self._averaged():
            scores = np.asarray(model.ops.to_numpy(model.predict(dag)), dtype=np.float64)
        starts = dag.set_starts
        return [scores[starts[s]:starts[s + 1]] for s in range(len(sets))]

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
            return np.asarray(model.ops.to_numpy(node_states(model, dag))[dag.roots], dtype=np.float64)

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
                "losses": self.log.losses, **self._input_cfg()}

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
        self.vocab, self.log = vocab, TrainingLog(losses=list(cfg["losses"]))
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
        dtypes = {str(node.get_param(name).dtype) for node in model.walk() for name in node.param_names}
        if not dtypes <= {"float32", "float64"}:
            raise SavedModelError(f"the saved weights are {', '.join(sorted(dtypes))}: the network computes in "
                                  "float32 (or float64), not in those")
        check_finite_weights(type(self).__name__, model_weights(model))
        self.model, self._kept = model, None  # the loaded weights are the ones to predict with


def _param_shapes(model: Model) -> list:
    return [(node.name, name, node.get_param(name).shape) for node in model.walk()
            for name in node.param_names if node.has_param(name)]


def _prepared(candidates) -> Tuple[object, Optional[np.ndarray]]:
    """``(candidates, log_p)`` of a set as :class:`PreparedSets` keeps it: a
    TreeSetDAG as its CandidateArrays, a label DAG as it is."""
    if isinstance(candidates, LabelDAG):
        return candidates, None
    trees, log_p = _split_scored(candidate_list(candidates))
    return (CandidateArrays.of(trees) if isinstance(trees, TreeSetDAG) else trees), log_p


def _split_scored(candidates) -> Tuple[Sequence, Optional[np.ndarray]]:
    """``(trees, log_p)`` of a set: a ScoredTrees set carries its log
    probabilities (``.trees``, ``.log_p``), any other set has none."""
    if hasattr(candidates, "trees") and hasattr(candidates, "log_p"):
        return candidates.trees, candidates.log_p
    return candidates, None

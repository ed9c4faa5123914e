"""What the ``distro_tagger`` and the ``distro_textcat`` share: the DISTRO
model (Srikumar & Manning 2014) trained by the structured hinge loss, its
label set, the alternating w / A schedule and saving.

Training alternates between phases on w (the emission/transition weights
and the feature layer) and phases on the label matrix A (with the learning
rate scaled by ``a_learn_rate_scale``, each step followed by the
nuclear-norm proximal step: singular values soft-thresholded by
``step · nuclear_lambda``, step = learn_rate · a_learn_rate_scale, then unit
columns). The phases are counted in optimizer steps (``w_steps``,
``a_steps``), or in epochs (``w_epochs``, ``a_epochs``; an epoch is as many
training examples as ``initialize`` was given): ``w_epochs = a_epochs = 5``
with 55 epochs is the paper's schedule (§5: 5 epochs on w, then 5 rounds of
5 epochs on A and 5 on w). ``a_rounds`` ends the alternation after that
many A phases: from there on every step is on w (the paper stops after 5
rounds). :meth:`DistroPipe.finish_update` steps only the
current phase's sublayers of the model (see :mod:`..models.distro`). With
the model's ``onehot = true`` A stays the identity and every step is a w
step: the structured SVM baseline.

``restarts = R`` trains R models side by side, each with its own random
initial A (the model's ``seed`` + 0, 1, …), through the first w phase and the
first A phase, then keeps the one whose training objective (Srikumar &
Manning 2014, Eq. 5: the mean hinge loss over that last epoch, plus
λ1/2 ||w||² with λ1 the optimizer's ``L2``, plus λ2 ||A||_*) is lowest, as
the paper discards the initialisations whose objective ends high (§5).

Evaluation scores add ``effective_rank`` (of A, as evaluated: the
optimizer's averages during ``spacy train``) and ``rank_share`` (that rank
over the number of labels), which a config may show in the training log
with a score weight of 0.

A component over it says what its gold labels are (``_gold_labels``,
``gold_ids``), how it decodes (``predict``) and what it writes
(``set_annotations``); ``candidate_mask`` restricts the labels a part may
take (by default every label).
"""
import warnings
from itertools import islice
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy
import srsly
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from thinc.api import Model, set_dropout_rate

from ..errors import SavedModelError, TaggerError, check_count, check_number
from ..models.distro import (adopt_parameters, copy_model, draw_label_matrix, effective_rank, finish_label_update,
                             nuclear_norm, set_phase, starts_random, weight_norm)
from ..models.weights import check_finite_weights, message_weights
from ..saving import Part
from .base import StructPrefPipe

# |cosine| above which two label vectors count as related (float32 noise is ~1e-7)
STRUCTURE_TOL = 1e-4


class DistroPipe(StructPrefPipe, TrainablePipe):
    """A DISTRO component; see the module docstring."""

    def __init__(self, vocab, model: Model, name: Optional[str] = None, *, w_steps: int = 100, a_steps: int = 20,
                 w_epochs: Optional[int] = None, a_epochs: Optional[int] = None, a_rounds: Optional[int] = None,
                 restarts: int = 1, nuclear_lambda: float = 1.0, a_learn_rate_scale: float = 1.0,
                 average_A: bool = True, cost: float = 1.0, scorer: Optional[Callable] = None):
        if (w_epochs is None) != (a_epochs is None) or (w_epochs is not None and (w_epochs < 1 or a_epochs < 0)):
            raise TaggerError("w_epochs and a_epochs are set together (w_epochs >= 1, a_epochs >= 0) or both "
                              f"null (phases in steps), got {w_epochs}, {a_epochs}")
        if a_rounds is not None and a_rounds < 0:
            raise TaggerError(f"a_rounds must be >= 0 or null (A phases without end), got {a_rounds}")
        if restarts < 1 or (restarts > 1 and not a_epochs):
            raise TaggerError(f"restarts must be >= 1, and above 1 needs phases in epochs with a_epochs >= 1 "
                              f"(the restarts are compared after the first A phase), got restarts = {restarts}, "
                              f"a_epochs = {a_epochs}")
        self.vocab = vocab
        self.model = model
        self.name = name or self.factory
        self.cfg = {"labels": [], "w_steps": w_steps, "a_steps": a_steps, "w_epochs": w_epochs,
                    "a_epochs": a_epochs, "a_rounds": a_rounds, "restarts": restarts, "nuclear_lambda": nuclear_lambda,
                    "a_learn_rate_scale": a_learn_rate_scale, "average_A": average_A, "cost": cost,
                    "epoch_size": None}
        self._check_schedule(self.cfg)
        self.scorer = scorer
        self.n_steps = 0  # optimizer steps taken: drives a schedule in steps
        self.n_docs = 0  # training examples seen: drives a schedule in epochs
        self.epoch = 0  # the epoch of the current batch (schedule in epochs)
        self.last_rank: Optional[int] = None
        # restarts still in the running besides self.model, and each one's hinge loss in this epoch
        self.restart_models: List[Model] = []
        self.epoch_loss: List[float] = [0.0]
        self.epoch_docs = 0
        self.restart_objectives: Optional[List[float]] = None

    def _check_schedule(self, cfg: dict) -> None:
        """The learning settings: ``w_steps`` >= 1, ``a_steps`` >= 0,
        ``nuclear_lambda`` >= 0, ``a_learn_rate_scale`` > 0 and the Hamming
        ``cost`` > 0 (the margin the hinge loss asks between the gold
        sequence and each other, per wrong label: 0 asks none)."""
        check_count(f"{self.name}: w_steps", cfg["w_steps"], 1, error=TaggerError)
        check_count(f"{self.name}: a_steps", cfg["a_steps"], 0, error=TaggerError)
        check_number(f"{self.name}: nuclear_lambda", cfg["nuclear_lambda"], 0.0, error=TaggerError)
        check_number(f"{self.name}: a_learn_rate_scale", cfg["a_learn_rate_scale"], 0.0, above=True,
                     error=TaggerError)
        check_number(f"{self.name}: cost", cfg["cost"], 0.0, above=True, error=TaggerError)
        if not isinstance(cfg["average_A"], bool):
            raise TaggerError(f"{self.name}: average_A must be true or false, got {cfg['average_A']!r}")

    # -- labels ---------------------------------------------------------------
    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    def add_label(self, label: str) -> int:
        if not isinstance(label, str):
            raise TaggerError(f"labels must be strings, got {label!r}")
        if label in self.labels:
            return 0
        if self.model.has_dim("nO"):
            raise TaggerError(f"cannot add label {label!r}: the {self.factory} is already "
                              "initialized (its label matrix A is sized to the labels)")
        self.cfg["labels"].append(label)
        self.vocab.strings.add(label)
        return 1

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp=None,
                   labels: Optional[List[str]] = None) -> None:
        validate_get_examples(get_examples, f"{type(self).__name__}.initialize")
        explicit = labels is not None
        if not explicit:
            labels = self._gold_labels(get_examples)
        for label in labels:
            self.add_label(label)
        self._require_labels()
        if explicit:  # a gold label outside labels= is refused here, not at the first update
            self.gold_ids(get_examples())
        docs = [eg.predicted for eg in islice(get_examples(), 10)]
        if not docs:
            raise TaggerError(f"{self.name}: initialize got no examples")
        self.model.set_dim("nO", len(self.labels))
        self.model.initialize(X=docs)
        self.cfg["epoch_size"] = sum(1 for eg in get_examples() if len(eg.predicted))
        self.n_steps = self.n_docs = self.epoch = self.epoch_docs = 0
        self.restart_models = []
        labels = self.model.get_ref("labels")
        if self.cfg["restarts"] > 1:
            if not starts_random(labels):
                raise TaggerError(f"{self.name}: restarts = {self.cfg['restarts']} needs A to start random "
                                  "(model.random_init = true, or model.rank below the number of labels)")
            for r in range(1, self.cfg["restarts"]):
                restart = copy_model(self.model)
                draw_label_matrix(restart.get_ref("labels"), labels.attrs["seed"] + r)
                self.restart_models.append(restart)
        self.epoch_loss = [0.0] * self.cfg["restarts"]

    def _gold_labels(self, get_examples: Callable[[], Iterable[Example]]) -> List[str]:
        """The label set of the training data."""
        raise NotImplementedError

    def gold_ids(self, examples: Iterable[Example]) -> numpy.ndarray:
        """The gold label id of every part of the examples (-1: none)."""
        raise NotImplementedError

    def _gold_id(self, index: Dict[str, int], label: Optional[str]) -> int:
        """A gold label's id: -1 for none (a missing annotation); a label the
        component was not initialized with is an error, not silently skipped."""
        if not label:
            return -1
        if label not in index:
            raise TaggerError(f"{self.name}: the gold label {label!r} is not one of the {len(index)} labels it was "
                              "initialized with; initialize it with examples that have every label (or labels=)")
        return index[label]

    def candidate_mask(self, docs: Iterable[Doc]) -> Optional[numpy.ndarray]:
        """(parts, labels) bool: the labels each part may take; None: every label."""
        return None

    # -- training -------------------------------------------------------------
    @property
    def in_epochs(self) -> bool:
        """Whether the phases are counted in epochs (``w_epochs``, ``a_epochs``)."""
        return self.cfg["w_epochs"] is not None

    def _phase(self) -> Tuple[bool, bool]:
        """(update_w, update_A) for the current step of the schedule."""
        unit = "epochs" if self.in_epochs else "steps"
        w, a = self.cfg[f"w_{unit}"], self.cfg[f"a_{unit}"]
        if self.model.attrs["onehot"] or a == 0:
            return True, False
        done = self.epoch if self.in_epochs else self.n_steps
        rounds = self.cfg["a_rounds"]
        if rounds is not None and done >= rounds * (w + a):  # the A phases are over: w only from here
            return True, False
        in_w = done % (w + a) < w
        return in_w, not in_w

    def _start_batch(self, n_docs: int) -> None:
        """Count a batch of ``n_docs`` training examples into its epoch."""
        if self.in_epochs:
            if not self.cfg["epoch_size"]:
                raise TaggerError(f"{self.name}: phases in epochs need the epoch size, which initialize sets; "
                                  "call nlp.initialize() first")
            epoch = self.n_docs // self.cfg["epoch_size"]
            if epoch != self.epoch:
                self.epoch, self.epoch_docs = epoch, 0
                self.epoch_loss = [0.0] * len(self.epoch_loss)
        self.n_docs += n_docs
        self.epoch_docs += n_docs

    @property
    def models(self) -> List[Model]:
        """The model and the restarts trained beside it."""
        return [self.model] + self.restart_models

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = [eg for eg in examples if len(eg.predicted)]
        validate_examples(examples, f"{type(self).__name__}.update")
        if not examples:
            return losses
        self._start_batch(len(examples))
        update_w, update_A = self._phase()
        docs = [eg.predicted for eg in examples]
        for i, model in enumerate(self.models):
            set_phase(model, update_w=update_w, update_A=update_A)
            set_dropout_rate(model, drop)
            scores, backprop = model.begin_update(docs)
            loss, d_scores = self.get_loss(examples, scores)
            backprop(d_scores)
            self.epoch_loss[i] += loss * len(examples)
            if i == 0:
                losses[self.name] += loss
        if sgd not in (None, False):
            self.finish_update(sgd)
        return losses

    def finish_update(self, sgd) -> None:
        """Step the current phase's sublayers only: Thinc keeps gradients
        (zeroed) between steps, so an optimizer shown the resting part's
        parameters would keep moving them with Adam's momentum."""
        update_w = self._phase()[0]
        for i, model in enumerate(self.models):
            if update_w:
                for name in ("tok2vec", "weights"):
                    model.get_ref(name).finish_update(sgd)
            else:
                rank = finish_label_update(model.get_ref("labels"), sgd, lr_scale=self.cfg["a_learn_rate_scale"],
                                           nuclear_lambda=self.cfg["nuclear_lambda"],
                                           average=self.cfg["average_A"])
                self.last_rank = rank if i == 0 else self.last_rank
        self.n_steps += 1
        first_round = (self.cfg["w_epochs"] or 0) + (self.cfg["a_epochs"] or 0)
        if self.restart_models and self.n_docs >= first_round * self.cfg["epoch_size"]:
            self._keep_best_restart(sgd)

    def training_objective(self, model: Model, loss: float, l2: float) -> float:
        """Srikumar & Manning (2014)'s Eq. 5 for ``model`` with mean hinge
        loss ``loss``: ``λ1/2 ||w||² + λ2 ||A||_* + loss``, λ1 = ``l2``."""
        A = model.ops.to_numpy(model.get_ref("labels").get_param("A"))
        return l2 / 2 * weight_norm(model) + self.cfg["nuclear_lambda"] * nuclear_norm(A) + loss

    def _keep_best_restart(self, sgd) -> None:
        """Keep, of the restarts, the one with the lowest training objective
        over the epoch just ended (its parameters and optimizer state go to
        ``self.model``); ``restart_objectives`` keeps every one's."""
        docs = max(self.epoch_docs, 1)
        self.restart_objectives = [self.training_objective(model, loss / docs, float(sgd.L2))
                                   for model, loss in zip(self.models, self.epoch_loss)]
        best = int(numpy.argmin(self.restart_objectives))
        if best:
            adopt_parameters(self.model, self.models[best], sgd)
        self.restart_models = []
        self.epoch_loss = [self.epoch_loss[best]]

    def get_loss(self, examples: Iterable[Example], scores):
        """Structured hinge loss (Hamming cost), averaged over the batch's docs."""
        from ..models.decode import hinge_loss

        examples = list(examples)
        validate_examples(examples, f"{type(self).__name__}.get_loss")
        loss, (dS, dT, dP) = hinge_loss(scores, self.gold_ids(examples), self.cfg["cost"],
                                        self.candidate_mask(eg.predicted for eg in examples))
        n = max(len(examples), 1)
        ops = self.model.ops
        return loss / n, (ops.asarray2f(dS / n), ops.asarray2f(dT / n), ops.asarray1f(dP / n))

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, object]:
        """The scorer's scores, plus ``effective_rank`` of A and
        ``rank_share`` (that rank over the number of labels)."""
        scores = dict(super().score(examples, **kwargs))
        if self.model.has_dim("nO"):
            rank = self.effective_rank
            scores.update(effective_rank=rank, rank_share=rank / len(self.labels))
        return scores

    # -- saving ---------------------------------------------------------------
    def _parts(self) -> Dict[str, Part]:
        """spaCy's fields of a trainable pipe: ``cfg`` (JSON, merged into the
        settings), ``vocab`` and ``model`` (thinc's bytes, checked against
        this model before anything loads: :meth:`_saved_n_out`)."""
        def cfg(saved: dict) -> dict:
            return self._merged_cfg(saved)

        def model(data: bytes) -> Tuple[bytes, Optional[int]]:
            msg = srsly.msgpack_loads(data)
            check_finite_weights(self.name, message_weights(msg))
            return data, self._saved_n_out(msg)

        return {"cfg": Part(lambda: srsly.json_dumps(self.cfg), lambda text: cfg(srsly.json_loads(text)), "cfg",
                            lambda p: srsly.write_json(p, self.cfg), lambda p: cfg(srsly.read_json(p))),
                "vocab": Part(self.vocab.to_bytes, lambda data: lambda: self.vocab.from_bytes(data), "vocab",
                              self.vocab.to_disk, lambda p: lambda: self.vocab.from_disk(p)),
                "model": Part(self.model.to_bytes, model, "model", lambda p: p.write_bytes(self.model.to_bytes()),
                              lambda p: model(p.read_bytes()))}

    def _loaded_cfg(self, staged: dict) -> dict:
        """The staged cfg (or the current one), its labels checked against
        the label count the model will have."""
        cfg = staged.get("cfg", self.cfg)
        self._check_schedule(cfg)
        self._check_labels(cfg["labels"], staged["model"][1] if "model" in staged else self._n_out())
        return cfg

    def _load_model_and_vocab(self, staged: dict) -> None:
        """The model loads in place (a copy would lose the links of a tok2vec listener)."""
        if "model" in staged:
            self.model.from_bytes(staged["model"][0])
        if "vocab" in staged:
            staged["vocab"]()

    def _adopt(self, staged: dict) -> None:
        cfg = self._loaded_cfg(staged)
        self._load_model_and_vocab(staged)
        self.cfg = cfg

    def _n_out(self) -> Optional[int]:
        """The number of labels the model scores (None before initialize)."""
        return self.model.get_dim("nO") if self.model.has_dim("nO") else None

    def _saved_n_out(self, msg: dict) -> Optional[int]:
        """The model's label count once thinc's message ``msg`` is loaded
        into it, after the checks thinc makes node by node as it loads (the
        same structure, no set dimension changed), made here before anything
        changes."""
        nodes = list(self.model.walk())
        if len(msg["nodes"]) != len(nodes):
            raise SavedModelError(f"{self.name}: the saved model has {len(msg['nodes'])} layers, this one "
                                  f"{len(nodes)}: it was saved from another architecture")
        for node, info in zip(nodes, msg["nodes"]):
            for dim, value in info["dims"].items():
                known = node.has_dim(dim)  # True: set, None: not yet set, False: no such dimension
                if value is not None and (known is False or (known and node.get_dim(dim) != value)):
                    raise SavedModelError(f"{self.name}: the saved model's layer {node.name} has {dim} = {value}, "
                                          f"this one {node.get_dim(dim) if known else 'no ' + dim}")
        saved = msg["nodes"][0]["dims"].get("nO")
        return self._n_out() if saved is None else saved

    def _check_labels(self, labels: list, n_out: Optional[int]) -> None:
        """The labels (saved in ``cfg``) and the model's label matrix (its
        ``n_out`` columns) agree: a lost ``cfg``, or one from another model,
        is refused."""
        if not all(isinstance(label, str) for label in labels) or len(set(labels)) != len(labels):
            raise TaggerError(f"{self.name}: the saved labels must be distinct strings, got {labels!r}")
        if n_out is not None and n_out != len(labels):
            raise TaggerError(f"{self.name} has {len(labels)} labels but its model scores "
                              f"{n_out}: the saved cfg (which lists the labels) is missing "
                              f"or belongs to another model; save the trained {self.factory} again")

    def _require_initialized(self) -> None:
        if not (self.model.has_dim("nO")
                and all(node.has_param(name) for node in self.model.walk() for name in node.param_names)):
            raise TaggerError(f"{self.name} is not initialized: call nlp.initialize() with labelled examples, "
                              "or load a trained pipeline")
        self._check_labels(self.cfg["labels"], self._n_out())

    # -- the label space ------------------------------------------------------
    @property
    def label_matrix(self) -> numpy.ndarray:
        """A copy of A (d × M, one column per label) on the CPU."""
        return self.model.ops.to_numpy(self.model.get_ref("labels").get_param("A")).copy()

    @property
    def label_vectors(self) -> Dict[str, numpy.ndarray]:
        """Each label's unit vector a_y (a column of A)."""
        A = self.label_matrix
        return {label: A[:, i].copy() for i, label in enumerate(self.labels)}

    def label_similarities(self) -> numpy.ndarray:
        """Cosine similarity of every pair of label vectors (M × M)."""
        A = self.label_matrix.astype("f")
        A = A / numpy.maximum(numpy.linalg.norm(A, axis=0, keepdims=True), 1e-12)
        return A.T @ A

    @property
    def effective_rank(self) -> int:
        """The number of independent directions of the label vectors
        (singular values of A above 1e-3 of the largest): the number of
        labels for a one-hot A, lower as the nuclear norm merges labels."""
        return effective_rank(self.label_matrix)

    @property
    def has_label_structure(self) -> bool:
        """Whether any two label vectors have a cosine away from 0. With
        orthogonal vectors (one-hot A: the SVM baseline, or DISTRO before
        its first A step) every similarity is 0 and the label space says
        nothing yet about which labels are alike."""
        sims = self.label_similarities()
        numpy.fill_diagonal(sims, 0.0)
        return bool(sims.size and numpy.abs(sims).max() > STRUCTURE_TOL)

    def describe_label_space(self) -> str:
        """One line: the number of labels, the vectors' dimension d, the
        effective rank and whether the label space has structure yet."""
        n, d = len(self.labels), self.label_matrix.shape[0]
        text = f"{n} tags, label vectors of d = {d}, effective rank {self.effective_rank}"
        if self.has_label_structure:
            return text
        unit, w_unit = ("epochs", "epochs") if self.in_epochs else ("steps", "optimizer steps")
        how = ("onehot = true keeps A the identity" if self.model.attrs["onehot"] else
               f"A moves in its phases of a_{unit} = {self.cfg['a_' + unit]} {unit} after every "
               f"w_{unit} = {self.cfg['w_' + unit]} {w_unit}")
        return f"{text}: orthogonal label vectors, every similarity is 0 (no structure yet; {how})"

    def most_similar(self, tag: str, n: int = 5) -> List[Tuple[str, float]]:
        """The ``n`` labels whose label vectors have the highest cosine with
        ``tag``'s. When the label vectors are orthogonal every cosine is 0
        and the order means nothing: a ``UserWarning`` says so (see
        :attr:`has_label_structure`)."""
        if tag not in self.labels:
            raise KeyError(f"unknown tag {tag!r}; the tagger has {len(self.labels)} labels")
        if not self.has_label_structure:
            warnings.warn(f"{self.name}: {self.describe_label_space()}; no tag is closer to {tag!r} "
                          "than another", UserWarning, stacklevel=2)
        i = self.labels.index(tag)
        sims = self.label_similarities()[:, i]
        order = [j for j in numpy.argsort(-sims, kind="stable") if j != i][:n]
        return [(self.labels[j], float(sims[j])) for j in order]

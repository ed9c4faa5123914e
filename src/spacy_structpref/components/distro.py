"""What the ``distro_tagger`` and the ``distro_textcat`` share: the DISTRO
model (Srikumar & Manning 2014) trained by the structured hinge loss, its
label set, the alternating w / A schedule and saving.

Training alternates between phases of ``w_steps`` optimizer steps on w (the
emission/transition weights and the feature layer) and ``a_steps`` steps on
the label matrix A (with the learning rate scaled by ``a_learn_rate_scale``,
each followed by the nuclear-norm proximal step: singular values
soft-thresholded by ``step · nuclear_lambda``, step = learn_rate ·
a_learn_rate_scale, then unit columns). :meth:`DistroPipe.finish_update`
steps only the current phase's sublayers of the model (see
:mod:`..models.distro`). With the model's ``onehot = true`` A stays the
identity and every step is a w step: the structured SVM baseline.

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
from ..models.distro import effective_rank, finish_label_update, set_phase
from ..models.weights import check_finite_weights, message_weights
from ..saving import Part
from .base import StructPrefPipe

# |cosine| above which two label vectors count as related (float32 noise is ~1e-7)
STRUCTURE_TOL = 1e-4


class DistroPipe(StructPrefPipe, TrainablePipe):
    """A DISTRO component; see the module docstring."""

    def __init__(self, vocab, model: Model, name: Optional[str] = None, *, w_steps: int = 100, a_steps: int = 20,
                 nuclear_lambda: float = 1.0, a_learn_rate_scale: float = 1.0, cost: float = 1.0,
                 scorer: Optional[Callable] = None):
        self.vocab = vocab
        self.model = model
        self.name = name or self.factory
        self.cfg = {"labels": [], "w_steps": w_steps, "a_steps": a_steps, "nuclear_lambda": nuclear_lambda,
                    "a_learn_rate_scale": a_learn_rate_scale, "cost": cost}
        self._check_schedule(self.cfg)
        self.scorer = scorer
        self.n_steps = 0  # optimizer steps taken: drives the alternating schedule
        self.last_rank: Optional[int] = None

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
    def _phase(self) -> Tuple[bool, bool]:
        """(update_w, update_A) for the current step of the schedule."""
        if self.model.attrs["onehot"] or self.cfg["a_steps"] == 0:
            return True, False
        period = self.cfg["w_steps"] + self.cfg["a_steps"]
        in_w = self.n_steps % period < self.cfg["w_steps"]
        return in_w, not in_w

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = [eg for eg in examples if len(eg.predicted)]
        validate_examples(examples, f"{type(self).__name__}.update")
        if not examples:
            return losses
        update_w, update_A = self._phase()
        set_phase(self.model, update_w=update_w, update_A=update_A)
        set_dropout_rate(self.model, drop)
        scores, backprop = self.model.begin_update([eg.predicted for eg in examples])
        loss, d_scores = self.get_loss(examples, scores)
        backprop(d_scores)
        if sgd not in (None, False):
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def finish_update(self, sgd) -> None:
        """Step the current phase's sublayers only: Thinc keeps gradients
        (zeroed) between steps, so an optimizer shown the resting part's
        parameters would keep moving them with Adam's momentum."""
        if self._phase()[0]:
            for name in ("tok2vec", "weights"):
                self.model.get_ref(name).finish_update(sgd)
        else:
            self.last_rank = finish_label_update(
                self.model.get_ref("labels"), sgd, lr_scale=self.cfg["a_learn_rate_scale"],
                nuclear_lambda=self.cfg["nuclear_lambda"])
        self.n_steps += 1

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
        how = ("onehot = true keeps A the identity" if self.model.attrs["onehot"] else
               f"A moves in its phases of a_steps = {self.cfg['a_steps']} steps after every "
               f"w_steps = {self.cfg['w_steps']} optimizer steps")
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

"""The ``distro_tagger`` component: a first-order sequence tagger with
distributed label vectors (DISTRO, Srikumar & Manning 2014) that writes
``token.tag_``.

Training alternates between phases of ``w_steps`` optimizer steps on w (the
emission/transition weights and the feature layer) and ``a_steps`` steps on
the label matrix A (with the learning rate scaled by ``a_learn_rate_scale``,
each followed by the nuclear-norm proximal step: singular values
soft-thresholded by ``step · nuclear_lambda``, step = learn_rate ·
a_learn_rate_scale, then unit columns). :meth:`DistroTaggerComponent.finish_update`
steps only the current phase's sublayers of the model (see
:mod:`..models.distro`). With the model's ``onehot = true`` A stays the
identity and every step is a w step: the structured SVM baseline.

``tag_dict_min_count`` (null = off) restricts decoding, in training and at
prediction alike, to a tag dictionary read off the training data at
``initialize`` (see :mod:`..models.tag_dictionary`): words seen at least that
often may take only the tags they were seen with, all other words any tag.
The setting lives on the component, so DISTRO and the one-hot baseline use it
identically; the dictionary is saved with the component.
"""
import warnings
from itertools import islice
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy
import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from thinc.api import Config, Model, set_dropout_rate

from ..errors import SavedModelError, TaggerError
from ..saving import atomic_directory, check_saved, load_errors

# Registers the architectures named in the default config (pure Python; the
# compiled Viterbi is imported on first use).
from ..models import sparse_features as _sparse  # noqa: F401
from ..models.distro import effective_rank, finish_label_update, predict_scores, set_phase
from ..models.tag_dictionary import TagDictionary

# |cosine| above which two label vectors count as related (float32 noise is ~1e-7)
STRUCTURE_TOL = 1e-4

DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy_structpref.DistroTagger.v1"
rank = null
onehot = false

[model.tok2vec]
@architectures = "spacy_structpref.SparseFeatures.v1"
width = null
"""
DEFAULT_MODEL = Config().from_str(DEFAULT_MODEL_CONFIG)["model"]


# the learning settings shared with distro_textcat
SCHEDULE_DEFAULTS = {"w_steps": 100, "a_steps": 20, "nuclear_lambda": 1.0,
                     "a_learn_rate_scale": 1.0, "cost": 1.0}


@Language.factory(
    "distro_tagger",
    assigns=["token.tag"],
    default_config={
        "model": DEFAULT_MODEL,
        "overwrite": False,
        **SCHEDULE_DEFAULTS,
        "tag_dict_min_count": None,
        "scorer": {"@scorers": "spacy.tagger_scorer.v1"},
    },
    default_score_weights={"tag_acc": 1.0},
)
def make_distro_tagger(nlp: Language, name: str, model: Model, overwrite: bool, w_steps: int,
                       a_steps: int, nuclear_lambda: float, a_learn_rate_scale: float,
                       cost: float, tag_dict_min_count: Optional[int],
                       scorer: Optional[Callable]) -> "DistroTaggerComponent":
    return DistroTaggerComponent(nlp.vocab, model, name, overwrite=overwrite, w_steps=w_steps,
                                 a_steps=a_steps, nuclear_lambda=nuclear_lambda,
                                 a_learn_rate_scale=a_learn_rate_scale, cost=cost,
                                 tag_dict_min_count=tag_dict_min_count, scorer=scorer)


class DistroTaggerComponent(TrainablePipe):
    """Sequence tagger with label vectors; see the module docstring."""

    saved_as = "distro_tagger"  # the marker of a saved component (refuses a wrong load)

    def __init__(self, vocab, model: Model, name: str = "distro_tagger", *,
                 overwrite: bool = False, w_steps: int = 100, a_steps: int = 20,
                 nuclear_lambda: float = 1.0, a_learn_rate_scale: float = 1.0,
                 cost: float = 1.0, tag_dict_min_count: Optional[int] = None,
                 scorer: Optional[Callable] = None):
        if w_steps < 1 or a_steps < 0:
            raise TaggerError(f"w_steps must be >= 1 and a_steps >= 0, got {w_steps}, {a_steps}")
        if nuclear_lambda < 0 or cost < 0 or a_learn_rate_scale <= 0:
            raise TaggerError("nuclear_lambda and cost must be >= 0 and a_learn_rate_scale > 0, "
                              f"got {nuclear_lambda}, {cost}, {a_learn_rate_scale}")
        if tag_dict_min_count is not None and (not isinstance(tag_dict_min_count, int)
                                               or tag_dict_min_count < 1):
            raise TaggerError(f"tag_dict_min_count must be null (off) or an int >= 1, got "
                              f"{tag_dict_min_count!r}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.cfg = {"labels": [], "overwrite": overwrite, "w_steps": w_steps,
                    "a_steps": a_steps, "nuclear_lambda": nuclear_lambda,
                    "a_learn_rate_scale": a_learn_rate_scale, "cost": cost,
                    "tag_dict_min_count": tag_dict_min_count, "tag_dictionary": None}
        self.scorer = scorer
        self.n_steps = 0  # optimizer steps taken: drives the alternating schedule
        self.last_rank: Optional[int] = None
        self._tag_dict: Optional[TagDictionary] = None

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
            raise TaggerError(f"cannot add label {label!r}: the distro_tagger is already "
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
        for tag in labels:
            self.add_label(tag)
        self._require_labels()
        if explicit:  # a gold label outside labels= is refused here, not at the first update
            self.gold_ids(get_examples())
        docs = [eg.predicted for eg in islice(get_examples(), 10)]
        if not docs:
            raise TaggerError(f"{self.name}: initialize got no examples")
        self.model.set_dim("nO", len(self.labels))
        self.model.initialize(X=docs)
        min_count = self.cfg["tag_dict_min_count"]
        if min_count is not None:
            index = {label: i for i, label in enumerate(self.labels)}
            pairs = ((t.text, self._gold_id(index, t.tag_)) for eg in get_examples() for t in eg.reference)
            self._tag_dict = TagDictionary.from_pairs(pairs, len(self.labels), min_count)
            self.cfg["tag_dictionary"] = self._tag_dict.to_json()

    def _gold_labels(self, get_examples: Callable[[], Iterable[Example]]) -> List[str]:
        """The label set of the training data: the gold tags."""
        return sorted({t.tag_ for eg in get_examples() for t in eg.reference if t.tag_})

    @property
    def tag_dictionary(self) -> Optional[TagDictionary]:
        """The tag dictionary decoding is restricted to (None when
        ``tag_dict_min_count`` is null)."""
        if self._tag_dict is None and self.cfg.get("tag_dictionary") is not None:
            self._tag_dict = TagDictionary(len(self.labels), self.cfg["tag_dictionary"])
        return self._tag_dict

    def candidate_mask(self, docs: Iterable[Doc]) -> Optional[numpy.ndarray]:
        """(tokens, labels) bool: the tags each token of ``docs`` may take,
        or None when every tag may (no tag dictionary)."""
        td = self.tag_dictionary
        if td is None:
            return None
        orths = [doc.to_array("ORTH") for doc in docs]
        return td.mask_of_hashes(numpy.concatenate(orths) if orths else numpy.zeros(0, "uint64"))

    # -- prediction -----------------------------------------------------------
    def predict(self, docs: Iterable[Doc]) -> List[numpy.ndarray]:
        from ..models.decode import decode

        docs = list(docs)
        self._require_initialized()
        lengths = [len(d) for d in docs]
        if not any(lengths):
            return [numpy.zeros((n,), dtype="i") for n in lengths]
        mask = self.candidate_mask(docs)
        paths = decode(predict_scores(self.model, docs, mask), mask)
        return numpy.split(paths, numpy.cumsum(lengths)[:-1])

    def set_annotations(self, docs: Iterable[Doc], tag_ids: List[numpy.ndarray]) -> None:
        tag_hashes = [self.vocab.strings.add(label) for label in self.labels]
        overwrite = self.cfg["overwrite"]
        for doc, ids in zip(docs, tag_ids):
            for token, i in zip(doc, ids.tolist()):
                if overwrite or not token.tag:
                    token.tag = tag_hashes[i]

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
        validate_examples(examples, "DistroTaggerComponent.update")
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

    def gold_ids(self, examples: Iterable[Example]) -> numpy.ndarray:
        """Gold label id per token (-1 where the tag is missing)."""
        index = {label: i for i, label in enumerate(self.labels)}
        ids = [self._gold_id(index, tag) for eg in examples for tag in eg.get_aligned("TAG", as_string=True)]
        return numpy.asarray(ids, dtype=numpy.int32)

    def _gold_id(self, index: Dict[str, int], label: Optional[str]) -> int:
        """A gold label's id: -1 for none (a missing annotation); a label the
        component was not initialized with is an error, not silently skipped."""
        if not label:
            return -1
        if label not in index:
            raise TaggerError(f"{self.name}: the gold label {label!r} is not one of the {len(index)} labels it was "
                              "initialized with; initialize it with examples that have every label (or labels=)")
        return index[label]

    def get_loss(self, examples: Iterable[Example], scores):
        """Structured hinge loss (Hamming cost), averaged over the batch's docs."""
        from ..models.decode import hinge_loss

        examples = list(examples)
        validate_examples(examples, "DistroTaggerComponent.get_loss")
        loss, (dS, dT, dP) = hinge_loss(scores, self.gold_ids(examples), self.cfg["cost"],
                                        self.candidate_mask(eg.predicted for eg in examples))
        n = max(len(examples), 1)
        ops = self.model.ops
        return loss / n, (ops.asarray2f(dS / n), ops.asarray2f(dT / n), ops.asarray1f(dP / n))

    # -- saving ---------------------------------------------------------------
    def to_disk(self, path, *, exclude=tuple()) -> None:
        with atomic_directory(path, self.saved_as) as tmp:
            super().to_disk(tmp, exclude=exclude)

    def from_disk(self, path, *, exclude=tuple()) -> "DistroTaggerComponent":
        """Load what ``to_disk`` saved (the fields of spaCy's
        ``TrainablePipe.from_disk``: cfg, vocab, model)."""
        path = check_saved(path, self.saved_as)
        with load_errors(f"{self.name} from {path}"):
            cfg = srsly.read_json(path / "cfg") if "cfg" not in exclude and (path / "cfg").exists() else {}
            model = (path / "model").read_bytes() if "model" not in exclude else None
            self._load(cfg, model, None if "vocab" in exclude
                       else lambda: self.vocab.from_disk(path / "vocab", exclude=exclude))
        return self

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "DistroTaggerComponent":
        """Load what ``to_bytes`` saved (see :meth:`from_disk`)."""
        with load_errors(self.name):
            msg = {key: value for key, value in srsly.msgpack_loads(bytes_data).items() if key not in exclude}
            self._load(srsly.json_loads(msg["cfg"]) if "cfg" in msg else {}, msg.get("model"),
                       (lambda: self.vocab.from_bytes(msg["vocab"], exclude=exclude)) if "vocab" in msg else None)
        return self

    def _load(self, saved_cfg: dict, model_bytes: Optional[bytes], load_vocab: Optional[Callable]) -> None:
        """Check everything before setting anything, so that a refused save
        leaves the component as it was: the saved cfg merged into a copy of
        ``cfg``, the saved model against this one (:meth:`_saved_n_out`), the
        labels against the label count the model will have, the tag
        dictionary rebuilt; then the model and the vocab (``load_vocab``)
        loaded and the cfg adopted. A field left out (None, or ``{}`` for the
        cfg) keeps its state. The model loads in place (a copy would lose the
        links of a tok2vec listener)."""
        cfg = {**self.cfg, **saved_cfg}
        n_out = self._n_out() if model_bytes is None else self._saved_n_out(srsly.msgpack_loads(model_bytes))
        self._check_labels(cfg["labels"], n_out)
        tag_dict = None
        if cfg.get("tag_dictionary") is not None:
            with load_errors(f"{self.name}'s tag dictionary"):
                tag_dict = TagDictionary(len(cfg["labels"]), cfg["tag_dictionary"])
        if model_bytes is not None:
            self.model.from_bytes(model_bytes)
        if load_vocab is not None:
            load_vocab()
        self.cfg, self._tag_dict = cfg, tag_dict

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
                              "or belongs to another model; save the trained tagger again")

    def _require_initialized(self) -> None:
        if not (self.model.has_dim("nO")
                and all(node.has_param(name) for node in self.model.walk() for name in node.param_names)):
            raise TaggerError(f"{self.name} is not initialized: call nlp.initialize() with tagged examples, "
                              "or load a trained pipeline")
        self._check_labels(self.cfg["labels"], self._n_out())

    # -- the label space ------------------------------------------------------
    @property
    def label_matrix(self) -> numpy.ndarray:
        """A copy of A (d × M, one column per label) on the CPU."""
        return self.model.ops.to_numpy(self.model.get_ref("labels").get_param("A")).copy()

    @property
    def label_vectors(self) -> Dict[str, numpy.ndarray]:
        """Each tag's unit vector a_y (a column of A)."""
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
        (singular values of A above 1e-3 of the largest): the number of tags
        for a one-hot A, lower as the nuclear norm merges labels."""
        return effective_rank(self.label_matrix)

    @property
    def has_label_structure(self) -> bool:
        """Whether any two label vectors have a cosine away from 0. With
        orthogonal vectors (one-hot A: the SSVM baseline, or DISTRO before
        its first A step) every similarity is 0 and the label space says
        nothing yet about which tags are alike."""
        sims = self.label_similarities()
        numpy.fill_diagonal(sims, 0.0)
        return bool(sims.size and numpy.abs(sims).max() > STRUCTURE_TOL)

    def describe_label_space(self) -> str:
        """One line: the number of tags, the vectors' dimension d, the
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
        """The ``n`` tags whose label vectors have the highest cosine with
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


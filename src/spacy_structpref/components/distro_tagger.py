"""The ``distro_tagger`` component: a first-order sequence tagger with
distributed label vectors (DISTRO, Srikumar & Manning 2014) that writes
``token.tag_``.

Model, training schedule (alternating w and A phases; ``onehot = true``:
the structured SVM baseline) and saving are DISTRO's, shared with the
``distro_textcat`` (:mod:`.distro`).

``tag_dict_min_count`` (null = off) restricts decoding, in training and at
prediction alike, to a tag dictionary read off the training data at
``initialize`` (see :mod:`..models.tag_dictionary`): words seen at least that
often may take only the tags they were seen with, all other words any tag.
The setting lives on the component, so DISTRO and the one-hot baseline use it
identically; the dictionary is saved with the component.

``variant_start`` (null = off; a weight ``own`` >= 0) starts A, at
``initialize``, from the tags' names rather than one-hot: each Brown variant
tag (``NN-TL``, ``FW-NN`` …) as its base tag plus one shared direction per
variant marker plus ``own`` times its own
(:func:`..models.distro.variant_label_matrix`). It needs one dimension per
label (``rank = null``), a non-random start and A learned (not ``onehot``).
"""
from typing import Callable, Iterable, List, Optional

import numpy
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import Model

from ..errors import TaggerError, check_number
from ..models.distro import predict_scores, starts_random, variant_label_matrix
from ..models.tag_dictionary import TagDictionary
from ..saving import load_errors
from .distro import DistroPipe


class DistroTaggerComponent(DistroPipe):
    """Sequence tagger with label vectors; see the module docstring."""

    factory = "distro_tagger"
    runtime_settings = ("overwrite",)

    def __init__(self, vocab, model: Model, name: str = "distro_tagger", *,
                 overwrite: bool = False, w_steps: int = 100, a_steps: int = 20,
                 w_epochs: Optional[int] = None, a_epochs: Optional[int] = None, a_rounds: Optional[int] = None,
                 restarts: int = 1, nuclear_lambda: float = 1.0, a_learn_rate_scale: float = 1.0,
                 average_A: bool = True, cost: float = 1.0, tag_dict_min_count: Optional[int] = None,
                 variant_start: Optional[float] = None, scorer: Optional[Callable] = None):
        super().__init__(vocab, model, name, w_steps=w_steps, a_steps=a_steps, w_epochs=w_epochs,
                         a_epochs=a_epochs, a_rounds=a_rounds, restarts=restarts, nuclear_lambda=nuclear_lambda,
                         a_learn_rate_scale=a_learn_rate_scale, average_A=average_A, cost=cost, scorer=scorer)
        if tag_dict_min_count is not None and (not isinstance(tag_dict_min_count, int)
                                               or tag_dict_min_count < 1):
            raise TaggerError(f"tag_dict_min_count must be null (off) or an int >= 1, got "
                              f"{tag_dict_min_count!r}")
        if variant_start is not None:
            check_number(f"{name}: variant_start (null: off)", variant_start, 0.0, error=TaggerError)
        self.cfg.update({"overwrite": overwrite, "tag_dict_min_count": tag_dict_min_count, "tag_dictionary": None,
                         "variant_start": variant_start})
        self._tag_dict: Optional[TagDictionary] = None

    # -- labels ---------------------------------------------------------------
    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp=None,
                   labels: Optional[List[str]] = None) -> None:
        super().initialize(get_examples, nlp=nlp, labels=labels)
        if self.cfg["variant_start"] is not None:
            self._start_variants(self.cfg["variant_start"])
        min_count = self.cfg["tag_dict_min_count"]
        if min_count is not None:
            index = {label: i for i, label in enumerate(self.labels)}
            pairs = ((t.text, self._gold_id(index, t.tag_)) for eg in get_examples() for t in eg.reference)
            self._tag_dict = TagDictionary.from_pairs(pairs, len(self.labels), min_count)
            self.cfg["tag_dictionary"] = self._tag_dict.to_json()

    def _start_variants(self, own: float) -> None:
        layer = self.model.get_ref("labels")
        # starts_random covers d below M (the model refuses d above M)
        if layer.attrs["identity"] or starts_random(layer):
            raise TaggerError(f"{self.name}: variant_start sets A's start from the tag names, which needs A learned "
                              "(model.onehot = false), one dimension per label (model.rank = null) and no random "
                              "start (model.random_init = false)")
        layer.set_param("A", layer.ops.asarray2f(variant_label_matrix(self.labels, own)))

    def _gold_labels(self, get_examples: Callable[[], Iterable[Example]]) -> List[str]:
        """The label set of the training data: the gold tags."""
        return sorted({t.tag_ for eg in get_examples() for t in eg.reference if t.tag_})

    def gold_ids(self, examples: Iterable[Example]) -> numpy.ndarray:
        """Gold label id per token (-1 where the tag is missing)."""
        index = {label: i for i, label in enumerate(self.labels)}
        ids = [self._gold_id(index, tag) for eg in examples for tag in eg.get_aligned("TAG", as_string=True)]
        return numpy.asarray(ids, dtype=numpy.int32)

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

    # -- saving ---------------------------------------------------------------
    def _adopt(self, staged: dict) -> None:
        """DISTRO's, with the saved tag dictionary rebuilt (checked) first."""
        cfg = self._loaded_cfg(staged)
        tag_dict = None
        if cfg.get("tag_dictionary") is not None:
            with load_errors(f"{self.name}'s tag dictionary"):
                tag_dict = TagDictionary(len(cfg["labels"]), cfg["tag_dictionary"])
        self._load_model_and_vocab(staged)
        self.cfg, self._tag_dict = cfg, tag_dict

"""spaCy component ``kernel_textcat``: classifies Docs into mutually
exclusive classes with one-vs-others kernel SVMs over their parses (Zhang
et al. 2010, §4: the forest kernel against the tree kernel in an SVM;
Zhang & Lee 2003: question classification with tree kernels).

It goes after a ``forest_parser`` and reads its 1-best tree (span group) or
its pruned packed forest (``doc._.forest``), as the kernel block
(``[components.kernel_textcat.kernel]``, registered functions of
:mod:`spacy_structpref.classification.registrations`) says: the subset-tree
kernel, the (tempered) forest kernel, the bag-of-words kernel, or a
weighted sum. It writes ``doc.cats``: a softmax over the classes' SVM
margins, so the highest is the class of largest margin.

Training happens in ``initialize``: the Gram matrix of the examples'
parses (a Doc without one is parsed by the components before this one),
C chosen from ``C_grid`` on every ``dev_every``-th example held out, the
SVMs refit on all examples (scikit-learn's ``SVC(kernel="precomputed")``).
``update`` has nothing to learn. The model keeps the support items, the
dual coefficients and intercepts, saved as arrays (no pickle), atomically
and with checksums: a changed file is refused on load.

Nothing compiled is imported here: the classifier loads on use.
"""
from typing import Callable, Dict, Iterable, List, Optional

import numpy as np
from spacy.language import Language
from spacy.training import Example, validate_get_examples

from ..errors import SavedModelError, StructPrefError, check_count
from ..saving import Part
from .base import StructPrefPipe, preceding_pipe, preceding_pipes


class KernelTextCategorizer(StructPrefPipe):
    """Settings: ``kernel`` (a Doc kernel), ``C_grid`` (the SVM's C; chosen
    on the held-out examples when it has several), ``dev_every`` (every
    n-th example of ``initialize`` is held out for that choice: TREC QC's
    dev split when the examples are its training questions in order),
    ``n_threads`` (binary SVMs trained at once). See the module docstring."""

    factory = "kernel_textcat"
    runtime_settings = ("n_threads",)

    def __init__(self, vocab, kernel, name: str = "kernel_textcat", *, C_grid: Iterable[float] = (1.0,),
                 dev_every: int = 10, n_threads: int = 2, scorer: Optional[Callable] = None):
        for attr in ("items", "prepare", "gram", "settings", "encode", "decode"):
            if not callable(getattr(kernel, attr, None)):
                raise StructPrefError(f"{name}: the kernel must be a Doc kernel (e.g. "
                                      f"spacy_structpref.NamedDocKernel.v1), got a {type(kernel).__name__}")
        self.vocab, self.name, self.kernel, self.scorer = vocab, name, kernel, scorer
        self.cfg = self._checked_cfg({"C_grid": C_grid, "dev_every": dev_every, "n_threads": n_threads})
        self._classifier = None
        self.register_extensions()

    def _checked_cfg(self, cfg: dict) -> dict:
        """``cfg`` (C_grid, dev_every, n_threads) checked, C_grid as floats."""
        from ..classification.svm import check_C, dev_mask

        C_grid = [check_C(c) for c in cfg["C_grid"]]
        if not C_grid:
            raise StructPrefError(f"{self.name}: C_grid is empty")
        dev_mask(0, cfg["dev_every"])  # checks it
        check_count(f"{self.name}: n_threads", cfg["n_threads"], 1)
        return {**cfg, "C_grid": C_grid}

    def _staged_cfg(self, saved: dict) -> dict:
        """Saved settings: the same keys as these, checked."""
        if set(saved) != set(self.cfg):
            raise SavedModelError(f"{self.name}: the saved settings {sorted(saved)} are not {sorted(self.cfg)}")
        return self._checked_cfg(self._merged_cfg(saved))

    def _new_classifier(self, cfg: dict):
        from ..classification.classifier import KernelClassifier

        return KernelClassifier(self.kernel, cfg["C_grid"], cfg["dev_every"], cfg["n_threads"])

    @property
    def classifier(self):
        if self._classifier is None:
            self._classifier = self._new_classifier(self.cfg)
        return self._classifier

    @property
    def labels(self):
        return tuple(self.classifier.labels)

    @property
    def is_trainable(self) -> bool:
        return False

    # ------------------------------------------------------------- training
    def _upstream(self, nlp: Language) -> List[str]:
        """The components before this one; a clear error when no
        ``forest_parser`` is among them (or it keeps no forests that the kernel needs)."""
        parser = preceding_pipe(nlp, self.name, "forest_parser", "classifies the parses")
        if getattr(self.kernel, "needs_forest", False) and not nlp.get_pipe(parser).cfg["store_forest"]:
            raise StructPrefError(f"{self.name}'s kernel reads packed forests, and {parser} does not store "
                                  "them: set its store_forest = true")
        names = list(nlp.component_names)
        return names[:names.index(self.name)]

    def _parsed(self, docs: List, nlp: Language, upstream: List[str]) -> List:
        """The Docs, those without a parse run through the upstream components."""
        from ..progress import progress_bar
        from ..trees.doc import SPANS_KEY

        def parsed(doc) -> bool:
            return bool(len(doc.spans.get(SPANS_KEY, []))) and (
                not getattr(self.kernel, "needs_forest", False) or doc._.forest is not None)

        todo = [i for i, doc in enumerate(docs) if len(doc) and not parsed(doc)]
        if todo:
            for i in progress_bar(todo, desc=f"{self.name}: parse", unit="doc"):
                doc = docs[i]
                for name in upstream:
                    doc = nlp.get_pipe(name)(doc)
                docs[i] = doc
        return docs

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None,
                   labels: Optional[Iterable[str]] = None) -> None:
        """Train the SVMs on the examples (see the module docstring);
        ``labels``: the class set (default: the keys of the examples' gold
        ``doc.cats``)."""
        from ..classification.data import gold_label

        validate_get_examples(get_examples, f"{type(self).__name__}.initialize")
        if nlp is None:
            raise StructPrefError(f"{self.name}.initialize needs the pipeline (nlp=...) to find its forest_parser")
        upstream = self._upstream(nlp)
        examples = list(get_examples())
        empty = [i for i, eg in enumerate(examples) if not len(eg.predicted)]
        if empty:
            raise StructPrefError(f"{self.name}: training example {empty[0]} is an empty Doc")
        gold = [gold_label(eg.reference) for eg in examples]
        if labels is None:
            labels = sorted({label for eg in examples for label in eg.reference.cats})
        docs = self._parsed([eg.predicted for eg in examples], nlp, upstream)
        self.classifier.fit(docs, gold, list(labels))
        self.trained_on = self.upstream(nlp) or None

    def upstream(self, nlp: Language) -> dict:
        """The identity of the ``forest_parser`` before it, whose parses it classifies."""
        parsers = preceding_pipes(nlp, self.name, ("forest_parser",))
        identity = nlp.get_pipe(parsers[-1]).identity() if parsers else None
        return {"forest_parser": identity} if identity else {}

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Nothing to learn by gradient: the SVMs are trained in ``initialize``."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        return losses

    # ---------------------------------------------------------- prediction
    def predict(self, docs):
        docs = list(docs)
        for doc in docs:
            if not len(doc):
                raise StructPrefError(f"{self.name} cannot classify an empty Doc")
        return self.classifier.decision(docs)

    def set_annotations(self, docs, margins) -> None:
        labels = self.classifier.labels
        for doc, row in zip(docs, margins):
            p = np.exp(row - row.max())
            p /= p.sum()
            doc.cats = {label: float(v) for label, v in zip(labels, p)}

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, float]:
        """The scorer's figures on ``examples``, and ``cats_held_out_acc``:
        the accuracy on the Docs held out to choose C, before the refit on
        all training Docs. A dev split drawn from the training Docs (TREC's
        every tenth question) has been learned by the refit SVMs, so this
        is the trained pipeline's figure on unseen questions."""
        kwargs.setdefault("labels", self.labels)
        scores = dict(self.scorer(examples, **kwargs)) if self.scorer is not None else {}
        held_out = self.classifier.held_out_accuracy if self.classifier.is_trained else None
        if held_out is not None:
            scores["cats_held_out_acc"] = held_out
        return scores

    # ------------------------------------------------------- serialisation
    def _parts(self) -> Dict[str, Part]:
        """``cfg`` (the same settings, checked), ``model`` (the trained
        SVMs, none before training): a save with a model loads into the
        classifier its cfg describes, one without leaves the component
        untrained; and ``trained_on``, the identity of the parser whose
        parses it was trained on."""
        def write_model(path) -> None:
            if self.classifier.is_trained:
                path.mkdir()
                self.classifier.to_disk(path)

        def read_model(path) -> Optional[Callable]:
            return (lambda classifier: classifier.from_disk(path)) if path.is_dir() else None

        return {"cfg": self._cfg_part(),
                "model": Part(lambda: self.classifier.to_bytes() if self.classifier.is_trained else None,
                              lambda data: None if data is None else lambda classifier: classifier.from_bytes(data),
                              "model", write_model, read_model),
                "trained_on": self._trained_on_part()}

    def _adopt(self, staged: dict) -> None:
        """A new classifier for the loaded cfg, with the loaded model if any."""
        if not staged:
            return
        cfg = staged.get("cfg", self.cfg)
        classifier = self._new_classifier(cfg)
        if staged.get("model") is not None:
            staged["model"](classifier)
        self.cfg, self._classifier = cfg, classifier

"""spaCy component ``parse_reranker``: reranks the k-best parses a preceding
``forest_parser`` leaves in ``doc._.nbest`` with a preference learner
(Collins & Duffy 2002; Menchetti et al. 2005, §6.2–6.3.2) and writes the
chosen tree to the span group ``spans_key`` (so ``doc._.parse``), its
tags to ``token.tag_`` (``set_tags``), and ``doc._.rerank``: the chosen
candidate's index, its utility and every candidate's utility.

The learner is a config block (``[components.parse_reranker.learner]``,
registered functions of :mod:`spacy_structpref.learners.registrations`):
the kernel voted perceptron, pairwise or setwise, with the subset-tree
kernel or the composite kernel ``K_λ + b·log p·log p'`` (eq. 17), or with
the (tempered) forest kernel over each candidate's bracket-compatible
sub-forest (``spacy_structpref.ForestKernel.v1``, Zhang et al. 2010; the
``forest_parser`` must then store its forests), or the recursive network
with the ``a·log p + b`` input (§6.3.2).

Training data. ``initialize`` reads the gold trees of the examples and
builds jackknifed k-best lists (:func:`~spacy_structpref.reranking.jackknife_lists`,
``n_folds`` folds, each parsed by a grammar read off the other folds with
the preceding ``forest_parser``'s settings), or reads them from
``[initialize.components.parse_reranker] lists`` (built there first when
the file is missing). The lists stay in the component, keyed by sentence.
In ``spacy train`` the Docs an ``update`` sees have not been parsed (the
``forest_parser`` is not an annotating component), and a list the
full-train grammar gave them would be flattering anyway: ``update`` takes
one perceptron pass, or one gradient step, over the jackknifed lists of
the examples it is given, in their order; an example whose words are not
among the initialized sentences is skipped with a warning.

Nothing compiled is imported here: the learner modules load on use.
"""
import warnings
from typing import Callable, Dict, Iterable, Optional

from spacy.language import Language
from spacy.training import Example, validate_get_examples
from spacy.util import ensure_path

from ..errors import StructPrefError
from ..saving import Part
from .base import LearnerPipe, check_spans_key, preceding_pipe, preceding_pipes


class ParseReranker(LearnerPipe):
    """Settings: ``learner`` (a preference learner), ``k`` (candidates
    reranked: the first k of each list; the ``forest_parser``'s k must be at
    least this), ``n_folds`` (jackknife folds for the training lists),
    ``n_jobs`` (worker processes that parse the folds; None: one per core),
    ``min_gap`` (a list's target is trained against its candidates of F1
    lower by more than this; see ``reranking.scorers.training_sets``), ``set_tags``, ``spans_key`` (gold trees for ``initialize`` and scoring,
    and the chosen tree). See the module docstring for how training works."""

    factory = "parse_reranker"
    doc_extensions = ("rerank",)  # {"index", "score", "scores"} of the chosen parse
    runtime_settings = ("k", "n_folds", "n_jobs", "min_gap", "set_tags", "spans_key")

    def __init__(self, vocab, learner, name: str = "parse_reranker", *, k: int = 50, n_folds: int = 10,
                 n_jobs: Optional[int] = None, min_gap: float = 0.05, set_tags: bool = True,
                 spans_key: str = "constituents", scorer: Optional[Callable] = None):
        from ..learners.base import PreferenceLearner

        if not isinstance(learner, PreferenceLearner):
            raise StructPrefError(f"{name}: the learner must be a preference learner (e.g. "
                                  f"spacy_structpref.KernelPerceptron.v1), got a {type(learner).__name__}")
        self.vocab, self.name, self.learner, self.scorer = vocab, name, learner, scorer
        self.cfg = {"k": k, "n_folds": n_folds, "n_jobs": n_jobs, "min_gap": min_gap, "set_tags": set_tags,
                    "spans_key": spans_key}
        self._check_cfg(self.cfg)
        self._lists: Optional[dict] = None  # words -> jackknifed RerankItem, from initialize
        self._ready = False  # the learner was initialized or loaded
        self._warned = False  # about examples without a list
        self.register_extensions()

    def _check_cfg(self, c: dict) -> None:
        if c["k"] < 1:
            raise StructPrefError(f"{self.name}: k must be at least 1, got {c['k']}")
        if c["n_folds"] < 2:
            raise StructPrefError(f"{self.name}: jackknifing needs n_folds >= 2, got {c['n_folds']}")
        if not 0 <= c["min_gap"] < 1:
            raise StructPrefError(f"{self.name}: min_gap is an F1 difference in [0, 1), got {c['min_gap']}")
        if c["n_jobs"] is not None and c["n_jobs"] < 1:
            raise StructPrefError(f"{self.name}: n_jobs must be at least 1 (or null), got {c['n_jobs']}")
        check_spans_key(self.name, c["spans_key"])

    # --------------------------------------------------------- the pipeline
    def preceding_parser(self, nlp: Language, k: Optional[int] = None):
        """The ``forest_parser`` whose lists this component reranks: the
        nearest one before it in ``nlp``; a clear error when there is none,
        or when its k is smaller than this component's (or than ``k``). A
        pipeline is checked when it is built (``initialize``), saved and
        loaded (:meth:`upstream`)."""
        k = self.cfg["k"] if k is None else k
        parser_name = preceding_pipe(nlp, self.name, "forest_parser", "reranks the k-best lists")
        parser = nlp.get_pipe(parser_name)
        if parser.cfg["k"] < k:
            raise StructPrefError(f"{parser_name} keeps {parser.cfg['k']}-best lists, but {self.name} reranks "
                                  f"{k} candidates: set the forest_parser's k to at least "
                                  f"{k}, or the reranker's k to at most {parser.cfg['k']}")
        return parser

    def check_pipeline(self, nlp: Language) -> None:
        """The k of the ``forest_parser`` before it (trained or not), then
        the identity it was trained against."""
        if preceding_pipes(nlp, self.name, ("forest_parser",)):
            self.preceding_parser(nlp)
        super().check_pipeline(nlp)

    def upstream(self, nlp: Language) -> dict:
        """The identity of the ``forest_parser`` before it (see
        :meth:`~.forest_parser.ForestParser.identity`), its k checked."""
        if not preceding_pipes(nlp, self.name, ("forest_parser",)):
            return {}
        identity = self.preceding_parser(nlp).identity()
        return {"forest_parser": identity} if identity else {}

    # ------------------------------------------------------------- training
    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None,
                   lists: Optional[str] = None) -> None:
        """Build the training lists (jackknifed, or read from ``lists``; see
        the module docstring) and initialize the learner on them."""
        from ..reranking import jackknife_lists, load_items, save_items
        from ..reranking.scorers import first_k, learner_symbols, takes_forest, training_sets

        validate_get_examples(get_examples, f"{type(self).__name__}.initialize")
        if nlp is None:
            raise StructPrefError(f"{self.name}.initialize needs the pipeline (nlp=...) to find its forest_parser")
        parser = self.preceding_parser(nlp)
        path = ensure_path(lists) if lists else None
        if path is not None and path.exists():
            items = load_items(path, learner_symbols(self.learner))
        else:
            # TOP-rooted, as the parser's candidates are
            trees = self.training_trees((eg.reference for eg in get_examples()), top=True)
            items = jackknife_lists(trees, settings=parser.pcfg_settings(), n_folds=self.cfg["n_folds"], k=self.cfg["k"],
                                    with_forest=takes_forest(self.learner), n_jobs=self.cfg["n_jobs"],
                                    progress=True, symbols=learner_symbols(self.learner))
            if path is not None:
                save_items(path, items)
        items = first_k(items, self.cfg["k"])
        if any(item.target is None for item in items):
            raise StructPrefError(f"{self.name}: the training lists need gold trees (targets)")
        self._lists = {tuple(item.words): item for item in items}
        sets, gold = training_sets(self.learner, items, self.cfg["min_gap"])
        if not len(sets):
            raise StructPrefError(f"{self.name}: no training list has two candidates to choose from")
        self.learner.initialize(sets, gold)
        self._ready = True
        self.trained_on = self.upstream(nlp) or None

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One perceptron pass (or one gradient step) over the jackknifed
        lists of these examples, in order. ``losses[name]``: the
        perceptron's mistakes, or the network's summed loss."""
        from ..reranking.scorers import training_sets

        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        if self._lists is None:
            raise StructPrefError(f"{self.name} has no training lists: call nlp.initialize() first "
                                  "(update steps over the jackknifed lists built there)")
        examples = list(examples)
        words = [tuple(t.text for t in eg.reference) for eg in examples]
        unseen = sum(w not in self._lists for w in words)
        if unseen and not self._warned:
            warnings.warn(f"{self.name}: {unseen} of {len(examples)} examples are not among the sentences "
                          "it was initialized on (no jackknifed list): skipped (warned once)")
            self._warned = True
        sets, gold = training_sets(self.learner, [self._lists[w] for w in words if w in self._lists],
                                   self.cfg["min_gap"])
        if not len(sets):
            return losses
        step: Dict[str, float] = {}
        # a sentence's words identify its set across epochs: the perceptron pools its support items
        self.learner.update(sets, gold, ids=[tuple(item.words) for item in sets.items], sgd=sgd, losses=step)
        losses[self.name] += sum(step.values())
        return losses

    # ------------------------------------------------------------ reranking
    def predict(self, docs):
        from ..reranking.scorers import learner_symbols, takes_forest, utilities
        from ..trees.forest import Forest

        if not self._ready:
            raise StructPrefError(f"{self.name} is not trained: call nlp.initialize() or load a trained pipeline")
        k = self.cfg["k"]
        out = []
        for doc in docs:
            if len(doc) == 0:
                out.append(None)
                continue
            nbest = doc._.nbest
            if not nbest:
                raise StructPrefError(f"{self.name}: the Doc {doc.text[:40]!r} has no k-best list (doc._.nbest): "
                                      "a forest_parser must run before the parse_reranker")
            texts, log_probs = [t for _, t in nbest[:k]], [float(lp) for lp, _ in nbest[:k]]
            forest = None
            if takes_forest(self.learner) and len(texts) > 1:
                if doc._.forest is None:
                    raise StructPrefError(f"{self.name} scores with the forest kernel and the Doc has no forest: "
                                          "set store_forest = true on the forest_parser")
                forest = Forest.from_dict(doc._.forest, learner_symbols(self.learner))
            out.append((texts, utilities(self.learner, texts, log_probs, forest)))
        return out

    def set_annotations(self, docs, predictions) -> None:
        from ..trees.brackets import parse_bracketed, restore_words
        from ..trees.doc import set_tree

        for doc, pred in zip(docs, predictions):
            if pred is None:
                doc._.rerank = None
                continue
            texts, scores = pred
            best = int(scores.argmax())
            tree = restore_words(parse_bracketed(texts[best]), [t.text for t in doc])
            set_tree(doc, tree, set_tags=self.cfg["set_tags"], spans_key=self.cfg["spans_key"])
            doc._.rerank = {"index": best, "score": float(scores[best]), "scores": scores.tolist()}

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, float]:
        """PARSEVAL (EVALB conventions) of the trees in ``spans_key``."""
        kwargs["spans_key"] = self.cfg["spans_key"]
        return dict(self.scorer(examples, **kwargs)) if self.scorer is not None else {}

    # ------------------------------------------------------- serialisation
    def _parts(self) -> Dict[str, Part]:
        """``cfg`` (merged into the settings, checked), ``learner`` (none
        before training), loaded into the learner, which loads all or
        nothing, and ``trained_on``, the identity of the parser it was
        trained against."""
        def write_learner(path) -> None:
            if self._ready:
                self.learner.to_disk(path)

        return {"cfg": self._cfg_part(),
                "learner": Part(lambda: self.learner.to_bytes() if self._ready else None,
                                lambda data: None if data is None else self.learner.from_bytes(data),
                                "learner", write_learner, self.learner.from_disk),
                "trained_on": self._trained_on_part()}

    def _adopt(self, staged: dict) -> None:
        self.cfg = staged.get("cfg", self.cfg)
        self._ready = self._ready or staged.get("learner") is not None

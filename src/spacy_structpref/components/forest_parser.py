"""spaCy component ``forest_parser``: a constituency parser that writes the
best tree to the span group ``spans_key`` (default
``doc.spans["constituents"]``), the k-best list with each tree's
log-probability (Huang & Chiang 2005) to ``doc._.nbest`` and the pruned
packed forest with hyperedge posteriors to ``doc._.forest``.

Its model, chosen in ``[components.forest_parser.model]``, is one of two
registered architectures:

- ``spacy_structpref.PCFG.v1`` (the default): an unlexicalised PCFG (Klein &
  Manning 2003), a parameter-free model holding the grammar's and the PCFG
  search's settings; the grammar is read off the gold trees in
  ``initialize`` and ``update`` has nothing to learn. It runs through
  :class:`~spacy_structpref.parsing.parser.Parser`.
- ``spacy_structpref.SpanCRF.v1``: a neural span scorer under a tree CRF
  (Stern, Andreas & Klein 2017; Zhang, Zhou & Li 2020); ``initialize`` reads
  its span labels and tags off the gold trees, ``update`` takes a gradient
  step on ``-log p(gold tree)`` plus the tagging head's cross-entropy. It runs
  through :class:`~spacy_structpref.parsing.span_parser.SpanParser`.
- ``spacy_structpref.SpanCRFEnsemble.v1``: trained span CRFs whose scores
  are averaged (``python -m spacy_structpref ensemble-span-parser``
  assembles one, :meth:`ForestParser.use_span_parser` takes it); it parses
  as the span CRF does and is not trained further.

The component's own settings are those of its output and forest search,
the same for both (``parsing.settings.SHARED_SETTINGS``). Heavy modules
(nltk, the compiled chart and forest code) load lazily so that importing
this module stays cheap.
"""
import hashlib
from typing import Callable, Dict, Iterable, Optional

from spacy.language import Language
from spacy.pipeline import Pipe, TrainablePipe
from spacy.training import Example, validate_examples
from thinc.api import Model
from thinc.util import to_numpy

from ..errors import SavedModelError, StructPrefError
from ..models.weights import arrays_digest, weights_digest
from ..models.word_vectors import vectors_digest
from ..parsing.memo import ParseMemo
from ..parsing.settings import DEFAULT_SETTINGS, SHARED_SETTINGS, build_parser, grammar_from_trees, shared_settings
from ..saving import Part
from .base import StructPrefPipe

# doc.user_data flag of a Doc that got the flat fallback tree: why (parsing.parser's TOO_LONG or NO_PARSE)
FALLBACK_KEY = "forest_parser_fallback"
MEMO_SIZE = 512  # sentences whose parses a forest_parser keeps: a PTB-sample dev set (433)

PCFG_ARCH, SPAN_CRF_ARCH = "spacy_structpref.PCFG.v1", "spacy_structpref.SpanCRF.v1"
ENSEMBLE_ARCH = "spacy_structpref.SpanCRFEnsemble.v1"
# the Thinc model name each architecture builds
ARCHITECTURES = {"pcfg": PCFG_ARCH, "span_crf": SPAN_CRF_ARCH, "span_crf_ensemble": ENSEMBLE_ARCH}

DEFAULT_CONFIG = {"model": {"@architectures": PCFG_ARCH}, **{key: DEFAULT_SETTINGS[key] for key in SHARED_SETTINGS},
                  "scorer": {"@scorers": "spacy_structpref.parseval_scorer.v1"}}


class ForestParser(StructPrefPipe, TrainablePipe):
    """Settings (see ``DEFAULT_CONFIG``), whatever the model: ``k``, the
    k-best list's length; ``samples``: with S > 0 (a span CRF only), the
    list keeps the model's k // 2 best and takes the rest from S forward
    passes with dropout on (Monte Carlo dropout), each tree scored by the
    model; ``threshold``, forest hyperedges whose posterior
    is below it are pruned; ``max_length``: a Doc of more tokens gets the
    flat fallback tree at once, flagged and counted as a fallback, since
    chart time grows with the cube of the length (the PCFG: about 5 s and
    0.4 GB at 100 tokens with a PTB grammar, a minute and 0.9 GB at 200;
    null: no bound); ``set_tags`` overwrites ``token.tag_`` with the parse's
    tags; ``store_forest``; ``spans_key``: the span group that holds the gold
    trees for ``initialize`` and scoring, and the predicted tree. The
    model's settings are in its own block (``parsing.settings.PCFG``,
    ``models.span_crf.SpanCRF``); ``cfg["model"]`` names its architecture,
    and a save loads only into a component of the same one.

    Streams go through spaCy's ``Pipe.pipe`` for the PCFG (one Doc at a time:
    the chart parser has nothing to batch, and a Doc that raises goes alone
    to the error handler) and ``TrainablePipe.pipe`` for the span CRF (a
    batch in one forward pass; a batch that raises goes to the handler)."""

    factory = "forest_parser"
    runtime_settings = SHARED_SETTINGS

    def __init__(self, vocab, model: Model, name: str = "forest_parser", *, scorer: Optional[Callable] = None,
                 **cfg):
        if not isinstance(model, Model) or model.name not in ARCHITECTURES:
            raise StructPrefError(f"{name}: the model must be built by {', '.join(ARCHITECTURES.values())}, got "
                                  f"{getattr(model, 'name', type(model).__name__)!r}")
        self.vocab = vocab
        self.name = name
        self.model = model
        self.cfg = {"model": ARCHITECTURES[model.name], **shared_settings(cfg)}
        self._check_samples(self.cfg)
        self.scorer = scorer
        self._parser = None
        self._identity = (None, None)  # (the grammar, its identity): computed once per grammar
        self.memo = ParseMemo(MEMO_SIZE)
        self.register_extensions()

    @property
    def is_pcfg(self) -> bool:
        return self.model.name == "pcfg"

    def _check_cfg(self, c: dict) -> None:
        """Every setting checked when the pipeline is built or loaded, not at
        the first parse; a save of the other model is refused."""
        if c["model"] != self.cfg["model"]:
            raise SavedModelError(f"{self.name}: the save holds a {c['model']} forest_parser, this one runs "
                                  f"{self.cfg['model']}: configure [components.{self.name}.model] with "
                                  f"@architectures = \"{c['model']}\" to load it")
        shared_settings({key: c[key] for key in SHARED_SETTINGS})
        self._check_samples(c)

    def _check_samples(self, c: dict) -> None:
        if c["samples"] and self.is_pcfg:
            raise StructPrefError(f"{self.name}: samples = {c['samples']} needs a span CRF (k-best lists from its "
                                  "dropout samples); the PCFG's lists come from its own search: set samples = 0")

    def pcfg_settings(self) -> dict:
        """The PCFG's settings with the component's, flat, as
        :func:`~spacy_structpref.parsing.settings.parser_settings` takes
        them (e.g. to parse jackknifed rerank lists with the same grammar
        and search); an error for a span-CRF model."""
        if not self.is_pcfg:
            raise StructPrefError(f"{self.name} runs a {self.cfg['model']} model: only a PCFG's settings "
                                  "rebuild its parser on other folds (give the reranker lists parsed "
                                  "by this pipeline instead)")
        return {**self.model.attrs["settings"], **{key: self.cfg[key] for key in SHARED_SETTINGS}}

    @property
    def grammar(self):
        """The PCFG's grammar (None before ``initialize``, and for a span CRF)."""
        return self.model.attrs["grammar"] if self.is_pcfg else None

    @property
    def reads_vectors(self) -> bool:
        """Whether the model reads the pipeline's static vectors (a span CRF
        with ``include_static_vectors``)."""
        return not self.is_pcfg and bool(self.model.attrs.get("static_vectors"))

    def upstream(self, nlp: Language) -> dict:
        """The static vectors a span CRF reads, by SHA-256: a pipeline that
        swaps them, or sources the parser without them (``[initialize]
        vectors`` unset), is refused rather than parsing with other inputs."""
        return {"vector table": vectors_digest(nlp.vocab.vectors)} if self.reads_vectors else {}

    def identity(self) -> Optional[str]:
        """The SHA-256 of what the parser's output depends on, which the
        components trained on its output record (``trained_on``): the PCFG's
        grammar; for the span CRF its span labels and tags, not its weights,
        which train on in ``spacy train`` beside those components. None
        before training."""
        import srsly

        if self.is_pcfg:
            grammar = self.grammar
            if grammar is None:
                return None
            if self._identity[0] is not grammar:
                self._identity = (grammar, hashlib.sha256(srsly.msgpack_dumps(grammar.to_dict())).hexdigest())
            return self._identity[1]
        if self._parser is None:
            return None
        data = {"labels": self._parser.labels.to_dict(), "tags": list(self._parser.tags)}
        return hashlib.sha256(srsly.msgpack_dumps(data)).hexdigest()

    # ------------------------------------------------------------- training
    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None):
        """Estimate the grammar, or read the span CRF's labels and tags and
        initialize its network, from the reference trees of the examples."""
        self.initialize_from_trees(self.training_trees((eg.reference for eg in get_examples()), top=True))

    def initialize_from_trees(self, trees, skip_bad_trees: bool = False) -> "ForestParser":
        """Initialize from nltk trees (outer bracket ``TOP``). For the PCFG:
        estimate the grammar with the model's annotation and lexicon
        settings; ``skip_bad_trees``: leave out trees that are not treebank
        trees (a word under a phrase), counted in ``self.grammar.skipped_trees``,
        rather than fail. For the span CRF: its labels and tags are those of
        the trees, its network initialized on them."""
        if self.is_pcfg:
            self.model.attrs["grammar"] = grammar_from_trees(trees, self.pcfg_settings(), skip_bad_trees)
            self._parser = None
            return self
        from ..parsing.span_parser import SpanParser

        self._parser = SpanParser.from_trees(trees, self.model, vocab=self.vocab, **self._span_settings())
        self._record_vectors()
        return self

    def _record_vectors(self) -> None:
        self.trained_on = {"vector table": vectors_digest(self.vocab.vectors)} if self.reads_vectors else None

    def use_span_parser(self, parser) -> "ForestParser":
        """Parse with ``parser``, a trained
        :class:`~..parsing.span_parser.SpanParser` (e.g. an ensemble from
        ``SpanParser.ensemble``) whose model this component's architecture
        builds; the component's own settings apply to it."""
        from ..models.span_ensemble import is_trained
        from ..parsing.span_parser import SpanParser

        if not isinstance(parser, SpanParser) or ARCHITECTURES.get(parser.model.name) != self.cfg["model"]:
            raise StructPrefError(f"{self.name} runs a {self.cfg['model']} model: it takes a span parser of that "
                                  f"architecture, got {type(parser).__name__}"
                                  f"{' of ' + parser.model.name if isinstance(parser, SpanParser) else ''}")
        if not is_trained(parser.model):
            raise StructPrefError(f"{self.name} takes a trained span parser")
        self.model = parser.model
        self._parser = SpanParser(parser.model, parser.labels, parser.tags, vocab=self.vocab, **self._span_settings())
        self._record_vectors()
        return self

    def _span_settings(self, cfg: Optional[dict] = None) -> dict:
        """The settings of the component (or of ``cfg``) that its span parser takes."""
        cfg = self.cfg if cfg is None else cfg
        return {key: cfg[key] for key in ("threshold", "max_length", "samples")}

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """The span CRF: one gradient step on the reference trees of the
        examples, loss ``Σ -log p(gold tree) + tag cross-entropy``, the
        gradients applied by ``sgd`` (or by :meth:`finish_update` when
        ``sgd`` is None, as in spaCy's training loop); the dropout is the
        model's own (its ``dropout`` setting), on the features, the LSTM and
        the label MLP. The PCFG has nothing to learn by gradient: its grammar
        is estimated in ``initialize``."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        validate_examples(examples, f"{type(self).__name__}.update")
        if self.is_pcfg:
            return losses
        trees = self.gold_trees((eg.reference for eg in examples), top=True)
        if trees:
            losses[self.name] += self.parser.update(trees, sgd=sgd or None)
        return losses

    # ------------------------------------------------------------- parsing
    def pipe(self, stream: Iterable, *, batch_size: int = 128):
        base = Pipe if self.is_pcfg else TrainablePipe
        yield from base.pipe(self, stream, batch_size=batch_size)

    @property
    def parser(self):
        """The library parser: a :class:`~..parsing.parser.Parser` of the
        grammar, or the :class:`~..parsing.span_parser.SpanParser`."""
        if self._parser is None:
            if not self.is_pcfg or self.grammar is None:
                raise StructPrefError(f"{self.name} is not trained: call nlp.initialize() with treebank examples "
                                      "or load a trained pipeline")
            self._parser = build_parser(self.grammar, self.pcfg_settings())
        return self._parser

    def predict(self, docs):
        """One ``ParseResult`` per Doc (None for an empty one). A sentence
        parsed before by the same weights and settings (the dev set of a
        training that evaluates this parser frozen, at each evaluation) is
        not parsed again: the last :data:`MEMO_SIZE` sentences' results are
        kept (``parsing.memo.ParseMemo``), under a digest of the weights (the
        span CRF's parameters and static vectors; the PCFG's grammar) and the
        settings. The results are shared: do not change them in place."""
        parser = self.parser
        if self.reads_vectors and not self.vocab.vectors.shape[0]:
            raise StructPrefError(f"{self.name}'s span CRF reads static vectors, but this pipeline has none: a "
                                  "pipeline that sources it needs [initialize] vectors set to the parser's "
                                  "pipeline (or the vectors it was trained with)")
        k, with_forest = self.cfg["k"], self.cfg["store_forest"]
        todo = [b for b, doc in enumerate(docs) if len(doc)]
        words = [tuple(t.text for t in docs[b]) for b in todo]
        reads_tags = self.is_pcfg and self.model.attrs["settings"]["tag_mode"] != "ignore"
        tags = [tuple(t.tag_ for t in docs[b]) if reads_tags else None for b in todo]

        def parse(positions):
            if self.is_pcfg:
                return [parser.parse(list(words[p]), tags[p], k=k, with_forest=with_forest) for p in positions]
            return parser.parse_many([list(words[p]) for p in positions], k=k, with_forest=with_forest)

        if not self.memo.size:  # no memo: nothing to digest, nothing kept
            self.memo.clear()
            found = parse(range(len(todo)))
        else:
            weights = (self.identity(),) if self.is_pcfg else (weights_digest(self.model), self._vectors_key(), parser)
            found = self.memo.results((*weights, self._settings_key()), list(zip(words, tags)), parse)
        out = [None] * len(docs)
        for b, res in zip(todo, found):
            out[b] = res
        return out

    def _settings_key(self) -> tuple:
        return tuple(sorted((key, repr(value)) for key, value in self.cfg.items()))

    def _vectors_key(self):
        """The static vectors the span CRF reads, digested as its weights are."""
        vectors = self.vocab.vectors
        if not self.reads_vectors or not vectors.shape[0]:
            return None
        return len(vectors.key2row), arrays_digest([("vectors", to_numpy(vectors.data))])

    def set_annotations(self, docs, results) -> None:
        from ..trees.doc import set_tree

        key = self.cfg["spans_key"]
        for doc, res in zip(docs, results):
            if res is None:
                doc.spans[key] = []
                doc._.nbest = []
                doc._.forest = None
                continue
            set_tree(doc, res.tree, set_tags=self.cfg["set_tags"], spans_key=key)
            doc._.nbest = [[float(lp), text] for lp, text in res.nbest]
            doc._.forest = res.forest.to_dict() if res.forest is not None else None
            if res.fallback:
                doc.user_data[FALLBACK_KEY] = res.fallback_reason
            else:
                doc.user_data.pop(FALLBACK_KEY, None)

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, float]:
        """PARSEVAL scores plus ``parse_fallbacks``: how many Docs got the
        flat fallback tree, and ``parse_too_long``: how many of them for
        being longer than ``max_length``. The scorer reads the trees of
        ``spans_key``."""
        from ..parsing.parser import TOO_LONG

        examples = list(examples)
        kwargs["spans_key"] = self.cfg["spans_key"]
        scores = dict(self.scorer(examples, **kwargs)) if self.scorer is not None else {}
        flags = [eg.predicted.user_data.get(FALLBACK_KEY) for eg in examples]
        scores["parse_fallbacks"] = sum(bool(flag) for flag in flags)
        scores["parse_too_long"] = sum(flag == TOO_LONG for flag in flags)
        return scores

    # ------------------------------------------------------- serialisation
    def _parts(self) -> Dict[str, Part]:
        """``cfg`` (merged into the settings, checked: the saved model must
        be this one's) and, for the PCFG, ``grammar``; for the span CRF,
        ``model`` (the network's bytes), ``labels``, ``tags`` and
        ``trained_on`` (the static vectors it reads, if any)."""
        if self.is_pcfg:
            from ..parsing.grammar import Grammar

            return {"cfg": self._cfg_part(),
                    "grammar": Part(lambda: self.grammar.to_dict() if self.grammar is not None else None,
                                    lambda saved: Grammar.from_dict(saved) if saved is not None else None)}
        from ..parsing.span_trees import SpanLabels

        trained = self._parser
        return {"cfg": self._cfg_part(), "trained_on": self._trained_on_part(),
                "model": Part(lambda: trained.model.to_bytes() if trained is not None else None, _saved_bytes),
                "labels": Part(lambda: trained.labels.to_dict() if trained is not None else None,
                               lambda saved: SpanLabels.from_dict(saved) if saved is not None else None),
                "tags": Part(lambda: list(trained.tags) if trained is not None else None,
                             lambda saved: tuple(saved) if saved is not None else None)}

    def _adopt(self, staged: dict) -> None:
        cfg = staged.get("cfg", self.cfg)
        if self.is_pcfg:
            grammar = staged.get("grammar", self.grammar)
            self.cfg = cfg
            self.model.attrs["grammar"] = grammar
            self._parser = None
            return
        parser = self._staged_span_parser(staged, cfg)
        self.cfg = cfg
        if parser is not None:
            self.model, self._parser = parser.model, parser
        elif self._parser is not None:
            for key, value in self._span_settings().items():
                setattr(self._parser, key, value)

    def _staged_span_parser(self, staged: dict, cfg: dict):
        """The span parser of the staged parts (None when the save holds no
        trained model), its network loaded into a copy of this component's
        model so that a refused load changes nothing."""
        from ..models.weights import check_finite_weights, model_weights
        from ..parsing.span_parser import SpanParser

        parts = [staged.get(name) for name in ("model", "labels", "tags")]
        if all(part is None for part in parts):
            return None
        current = self._parser
        if any(part is None for part in parts) and current is None:
            raise SavedModelError(f"{self.name}: the save lacks the span CRF's model, labels or tags")
        data = parts[0] if parts[0] is not None else current.model.to_bytes()
        labels = parts[1] if parts[1] is not None else current.labels
        tags = parts[2] if parts[2] is not None else current.tags
        model = self.model.copy()
        for dim, value in (("nO", len(labels)), ("nT", len(tags))):
            model.set_dim(dim, value, force=True)
        model.from_bytes(data)
        check_finite_weights(self.name, model_weights(model))
        return SpanParser(model, labels, tags, vocab=self.vocab, **self._span_settings(cfg))


def _saved_bytes(saved):
    if saved is not None and not isinstance(saved, bytes):
        raise SavedModelError(f"the saved span CRF model must be bytes, got {type(saved).__name__}")
    return saved

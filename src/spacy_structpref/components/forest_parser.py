"""spaCy component ``forest_parser``: an unlexicalised PCFG parser (Klein &
Manning 2003) that writes the best tree to the span group ``spans_key``
(default ``doc.spans["constituents"]``), the k-best list (Huang & Chiang
2005) to ``doc._.nbest`` and the pruned packed forest to ``doc._.forest``.

The grammar is read off the gold trees in ``initialize``; ``update`` has
nothing to learn. Heavy modules (nltk, the compiled chart and forest code)
load lazily so that importing this module stays cheap.
"""
from typing import Callable, Dict, Iterable, Optional

from spacy.language import Language
from spacy.training import Example

from ..errors import StructPrefError
from ..parsing.settings import (DEFAULT_SETTINGS, build_parser, check_parser_settings, grammar_from_trees,
                                parser_settings)
from ..saving import Part
from .base import StructPrefPipe

# doc.user_data flag of a Doc that got the flat fallback tree: why (parsing.parser's TOO_LONG or NO_PARSE)
FALLBACK_KEY = "forest_parser_fallback"

DEFAULT_CONFIG = {**DEFAULT_SETTINGS, "scorer": {"@scorers": "spacy_structpref.parseval_scorer.v1"}}


class ForestParser(StructPrefPipe):
    """Settings (see ``DEFAULT_CONFIG``): grammar annotation
    (``horizontal_markov`` (-1 = none), ``vertical_markov`` (1 = no parent
    annotation), ``tag_parent``, ``split_unary_tags``, ``split_in``,
    ``split_percent``), lexicon (``rare_threshold``: words seen at most this
    often train the unknown-word signatures; ``smooth``; ``base_signatures``:
    signature model over treebank tags rather than annotated tag states), search (``beam``,
    ``threshold`` posterior pruning, ``merit_threshold`` Viterbi-merit
    pruning, ``max_expansions``, ``k``; ``max_length``: a Doc of more
    tokens gets the flat fallback tree at once, flagged and counted as a
    fallback, since CKY time grows with the cube of the length: about 5 s
    and 0.4 GB at 100 tokens with a PTB grammar, a minute and 0.9 GB at
    200; ``null``: no bound), upstream tags (``tag_mode``
    ``ignore``/``hard``/``soft`` with ``tag_bonus``), and output
    (``set_tags`` overwrites ``token.tag_`` with the parse's tags;
    ``store_forest``; ``spans_key``: the span group that holds the gold
    trees for ``initialize`` and scoring, and the predicted tree).

    Streams go through spaCy's ``Pipe.pipe``: one Doc at a time (the parser
    has nothing to batch), a Doc that raises going to the error handler."""

    factory = "forest_parser"

    def __init__(self, vocab, name: str = "forest_parser", *, scorer: Optional[Callable] = None, **cfg):
        self.vocab = vocab
        self.name = name
        self.cfg = parser_settings(cfg)
        self.scorer = scorer
        self.grammar = None
        self._parser = None
        self.register_extensions()

    def _check_cfg(self, c: dict) -> None:
        """Every setting checked when the pipeline is built or loaded, not at the first parse."""
        check_parser_settings(c)

    # ------------------------------------------------------------- training
    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None):
        """Estimate the grammar from the reference trees of the examples."""
        self.initialize_from_trees(self.training_trees((eg.reference for eg in get_examples()), top=True))

    def initialize_from_trees(self, trees, skip_bad_trees: bool = False) -> "ForestParser":
        """Estimate the grammar from nltk trees (outer bracket ``TOP``) with
        this component's annotation and lexicon settings; ``skip_bad_trees``:
        leave out trees that are not treebank trees (a word under a phrase),
        counted in ``self.grammar.skipped_trees``, rather than fail."""
        self.grammar = grammar_from_trees(trees, self.cfg, skip_bad_trees)
        self._parser = None
        return self

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Nothing to learn by gradient: the grammar is estimated in ``initialize``."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        return losses

    # ------------------------------------------------------------- parsing
    @property
    def parser(self):
        if self.grammar is None:
            raise StructPrefError(f"{self.name} has no grammar: call nlp.initialize() with treebank examples "
                                  "or load a trained pipeline")
        if self._parser is None:
            self._parser = build_parser(self.grammar, self.cfg)
        return self._parser

    def predict(self, docs):
        parser = self.parser
        out = []
        for doc in docs:
            if len(doc) == 0:
                out.append(None)
                continue
            tags = [t.tag_ for t in doc] if self.cfg["tag_mode"] != "ignore" else None
            out.append(parser.parse([t.text for t in doc], tags, k=self.cfg["k"],
                                    with_forest=self.cfg["store_forest"]))
        return out

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
            doc._.nbest = [[lp, text] for lp, text in res.nbest]
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
        """``cfg`` (merged into the settings, checked) and ``grammar``."""
        from ..parsing.grammar import Grammar

        return {"cfg": self._cfg_part(),
                "grammar": Part(lambda: self.grammar.to_dict() if self.grammar is not None else None,
                                lambda saved: Grammar.from_dict(saved) if saved is not None else None)}

    def _adopt(self, staged: dict) -> None:
        self.cfg, self.grammar = staged.get("cfg", self.cfg), staged.get("grammar", self.grammar)
        self._parser = None

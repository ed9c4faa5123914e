"""spaCy component ``forest_parser``: an unlexicalised PCFG parser (Klein &
Manning 2003) that writes the best tree to the span group ``spans_key``
(default ``doc.spans["constituents"]``), the k-best list (Huang & Chiang
2005) to ``doc._.nbest`` and the pruned packed forest to ``doc._.forest``.

The grammar is read off the gold trees in ``initialize``; ``update`` has
nothing to learn. Heavy modules (nltk, the compiled chart and forest code)
load lazily so that importing this factory stays cheap.
"""
from typing import Callable, Dict, Iterable, Optional

import srsly
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.training import Example

from ..errors import StructPrefError
from ..parsing.settings import (DEFAULT_SETTINGS, build_parser, check_parser_settings, grammar_from_trees,
                                parser_settings)
from ..saving import atomic_directory, check_saved, load_errors, merged_settings

# doc.user_data flag of a Doc that got the flat fallback tree: why (parsing.parser's TOO_LONG or NO_PARSE)
FALLBACK_KEY = "forest_parser_fallback"

DEFAULT_CONFIG = {**DEFAULT_SETTINGS, "scorer": {"@scorers": "spacy_structpref.parseval_scorer.v1"}}

# Serialised fields (the names ``exclude`` takes) and their files in a saved component.
FILES = {"cfg": ("cfg.json", srsly.write_json, srsly.read_json),
         "grammar": ("grammar.msgpack", srsly.write_msgpack, srsly.read_msgpack)}


@Language.factory(
    "forest_parser",
    assigns=["doc.spans", "token.tag", "doc._.nbest", "doc._.forest"],
    default_config=DEFAULT_CONFIG,
    default_score_weights={"parseval_f": 1.0, "parseval_p": 0.0, "parseval_r": 0.0, "parseval_f_40": 0.0,
                           "parse_fallbacks": None, "parse_too_long": None},
)
def make_forest_parser(nlp: Language, name: str, horizontal_markov: int, vertical_markov: int,
                       tag_parent: bool, split_unary_tags: bool, split_in: bool, split_percent: bool,
                       rare_threshold: int, smooth: float, base_signatures: bool, beam: float, threshold: float,
                       merit_threshold: float, max_expansions: int, max_length: Optional[int], k: int,
                       tag_mode: str, tag_bonus: float, set_tags: bool, store_forest: bool, spans_key: str,
                       scorer: Optional[Callable]):
    return ForestParser(
        nlp.vocab, name, scorer=scorer, horizontal_markov=horizontal_markov, vertical_markov=vertical_markov,
        tag_parent=tag_parent, split_unary_tags=split_unary_tags, split_in=split_in, split_percent=split_percent,
        rare_threshold=rare_threshold, smooth=smooth, base_signatures=base_signatures, beam=beam,
        threshold=threshold, merit_threshold=merit_threshold, max_expansions=max_expansions,
        max_length=max_length, k=k,
        tag_mode=tag_mode, tag_bonus=tag_bonus, set_tags=set_tags, store_forest=store_forest,
        spans_key=spans_key)


class ForestParser(Pipe):
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

    def __init__(self, vocab, name: str = "forest_parser", *, scorer: Optional[Callable] = None, **cfg):
        self.vocab = vocab
        self.name = name
        self.cfg = parser_settings(cfg)
        self.scorer = scorer
        self.grammar = None
        self._parser = None
        from ..trees import register_extensions
        register_extensions()

    # ------------------------------------------------------------- training
    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None):
        """Estimate the grammar from the reference trees of the examples."""
        from nltk.tree import Tree

        from ..trees.doc import doc_to_tree

        trees = []
        for eg in get_examples():
            tree = doc_to_tree(eg.reference, self.cfg["spans_key"])
            if tree is None:
                continue
            if tree.label() != "TOP":
                tree = Tree("TOP", [tree])
            trees.append(tree)
        if not trees:
            raise StructPrefError(
                f"{self.name}: no training example has constituents in doc.spans[{self.cfg['spans_key']!r}] "
                "(convert the treebank with `python -m spacy_structpref convert ptb corpus/ptb`)")
        self.initialize_from_trees(trees)

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

    def __call__(self, doc):
        self.set_annotations([doc], self.predict([doc]))
        return doc

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
    def _state(self, exclude) -> dict:
        state = {}
        if "cfg" not in exclude:
            state["cfg"] = self.cfg
        if "grammar" not in exclude:
            state["grammar"] = self.grammar.to_dict() if self.grammar is not None else None
        return state

    def _load_state(self, state: dict) -> None:
        """Set the fields present in ``state`` (one that ``exclude`` named, or
        that a save lacks, is left as it is, as spaCy's pipes do). Every field
        is read and checked before any is set: a refused save leaves the
        component as it was."""
        from ..parsing.grammar import Grammar

        cfg, grammar = self.cfg, self.grammar
        if "cfg" in state:
            cfg = merged_settings(self.name, self.cfg, state["cfg"])
            check_parser_settings(cfg)
        if "grammar" in state:
            grammar = Grammar.from_dict(state["grammar"]) if state["grammar"] is not None else None
        self.cfg, self.grammar, self._parser = cfg, grammar, None

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        return srsly.msgpack_dumps(self._state(exclude))

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "ForestParser":
        with load_errors(self.name):
            state = srsly.msgpack_loads(bytes_data)
            self._load_state({field: value for field, value in state.items() if field not in exclude})
        return self

    def to_disk(self, path, *, exclude=tuple()) -> None:
        with atomic_directory(path, "forest_parser") as tmp:
            for field, value in self._state(exclude).items():
                name, write, _ = FILES[field]
                write(tmp / name, value)

    def from_disk(self, path, *, exclude=tuple()) -> "ForestParser":
        path = check_saved(path, "forest_parser")
        with load_errors(f"{self.name} from {path}"):
            self._load_state({field: read(path / name) for field, (name, _, read) in FILES.items()
                              if field not in exclude and (path / name).exists()})
        return self


def preceding_forest_parser(nlp: Language, name: str, uses: str) -> str:
    """The name of the nearest ``forest_parser`` before component ``name`` in
    ``nlp``; a clear error when there is none. ``uses`` says what ``name``
    takes from it ("reranks the k-best lists")."""
    names = list(nlp.component_names)  # disabled (e.g. frozen) components included
    if name not in names:
        raise StructPrefError(f"{name} is not a component of this pipeline ({names})")
    parsers = [n for n in names[:names.index(name)] if nlp.get_pipe_meta(n).factory == "forest_parser"]
    if not parsers:
        raise StructPrefError(f"{name} {uses} of a forest_parser, and no forest_parser "
                              f"precedes it in the pipeline {names}: add one before it")
    return parsers[-1]

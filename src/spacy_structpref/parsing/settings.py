"""The PCFG parser's settings, as the ``forest_parser`` component and the
rerank lists share them, checked in one place, and the grammar and parser
they describe: an unlexicalised PCFG read off treebank trees with Klein &
Manning's (2003) annotation, parsed with posterior and Viterbi-merit
pruning and lazy k-best extraction (Huang & Chiang 2005).

The ``forest_parser`` component splits these settings: those of its output
and forest search, shared with any model it runs (:data:`SHARED_SETTINGS`),
are its own; the rest, the grammar's and the PCFG search's, are those of its
model, ``spacy_structpref.PCFG.v1`` (:func:`PCFG`), a parameter-free Thinc
model holding them and, once estimated, the grammar.

Only spaCy's registry, Thinc's ``Model`` and :mod:`spacy_structpref.errors`
load with this module, so that a spaCy factory can take its defaults without
loading the parser."""
from typing import Optional, Sequence

from spacy.util import registry
from thinc.api import Model

from ..errors import StructPrefError, check_count

DEFAULT_SETTINGS = {
    "horizontal_markov": 2,
    "vertical_markov": 2,
    "tag_parent": True,
    "split_unary_tags": True,
    "split_in": True,
    "split_percent": True,
    "rare_threshold": 2,
    "smooth": 1.0,
    "base_signatures": True,
    "beam": 1e-4,
    "threshold": 1e-5,
    "merit_threshold": 1e-6,
    "max_expansions": 2000,
    "max_length": 100,
    "k": 50,
    "samples": 0,
    "tag_mode": "ignore",
    "tag_bonus": 10.0,
    "set_tags": True,
    "store_forest": True,
    "spans_key": "constituents",  # trees.doc.SPANS_KEY, which would load compiled code if imported here
}


# the settings of forest_parser whatever its model: output, k-best, forest pruning, the length bound;
# samples (k-best lists from dropout samples) needs a span CRF and must stay 0 for the PCFG
SHARED_SETTINGS = ("threshold", "max_length", "k", "samples", "set_tags", "store_forest", "spans_key")


def parser_settings(settings: Optional[dict] = None) -> dict:
    """:data:`DEFAULT_SETTINGS` updated with ``settings``, checked
    (:func:`check_parser_settings`); an unknown key is an error."""
    settings = settings or {}
    unknown = set(settings) - set(DEFAULT_SETTINGS)
    if unknown:
        raise StructPrefError(f"unknown forest_parser setting(s): {', '.join(sorted(unknown))}")
    cfg = {**DEFAULT_SETTINGS, **settings}
    check_parser_settings(cfg)
    return cfg


def check_parser_settings(c: dict) -> None:
    """Check every setting of ``c`` (all of :data:`DEFAULT_SETTINGS`), so
    that a bad one fails when a pipeline is built or loaded, not at the
    first parse."""
    from .grammar import check_annotation
    from .parser import check_settings

    check_settings(c["beam"], c["threshold"], c["merit_threshold"], c["max_expansions"], c["tag_mode"],
                   c["tag_bonus"], c["max_length"])
    check_annotation(c["horizontal_markov"], c["vertical_markov"])
    for key in ("tag_parent", "split_unary_tags", "split_in", "split_percent", "base_signatures", "set_tags",
                "store_forest"):
        if not isinstance(c[key], bool):
            raise StructPrefError(f"{key} must be true or false, got {c[key]!r}")
    check_count("k", c["k"], 1)
    check_count("samples", c["samples"], 0)
    check_count("rare_threshold", c["rare_threshold"], 0)
    # a known word's P(T | w) divides by (count + smooth)
    if not isinstance(c["smooth"], (int, float)) or not 0 <= c["smooth"] < float("inf"):
        raise StructPrefError(f"smooth must be a finite number of at least 0, got {c['smooth']!r}")
    if not isinstance(c["spans_key"], str) or not c["spans_key"]:
        raise StructPrefError(f"spans_key must be a non-empty string, got {c['spans_key']!r}")


def grammar_from_trees(trees: Sequence, cfg: dict, skip_bad_trees: bool = False):
    """The grammar of nltk ``trees`` (outer bracket ``TOP``) with the
    annotation and lexicon settings of ``cfg`` (checked settings, e.g. of
    :func:`parser_settings`); ``skip_bad_trees``: leave out trees that are
    not treebank trees (a word under a phrase), counted in the grammar's
    ``skipped_trees``, rather than fail."""
    from .grammar import Annotation, estimate_grammar

    annotation = Annotation(cfg["horizontal_markov"], cfg["vertical_markov"], cfg["tag_parent"],
                            cfg["split_unary_tags"], cfg["split_in"], cfg["split_percent"])
    return estimate_grammar(trees, annotation, rare_threshold=cfg["rare_threshold"], smooth=cfg["smooth"],
                            base_signatures=cfg["base_signatures"], skip_bad_trees=skip_bad_trees)


def build_parser(grammar, cfg: dict):
    """The :class:`~.parser.Parser` of ``grammar`` with the search and
    upstream-tag settings of ``cfg``."""
    from .parser import Parser

    return Parser(grammar, beam=cfg["beam"], threshold=cfg["threshold"], merit_threshold=cfg["merit_threshold"],
                  max_expansions=cfg["max_expansions"], tag_mode=cfg["tag_mode"], tag_bonus=cfg["tag_bonus"],
                  max_length=cfg["max_length"])



def shared_settings(settings: dict) -> dict:
    """The :data:`SHARED_SETTINGS` of ``settings`` (each given), checked
    as :func:`check_parser_settings` checks them; any other key is an error."""
    unknown = set(settings) - set(SHARED_SETTINGS)
    if unknown:
        raise StructPrefError(f"unknown forest_parser setting(s): {', '.join(sorted(unknown))} (the grammar's "
                              "and the PCFG search's settings belong in [components.forest_parser.model])")
    missing = set(SHARED_SETTINGS) - set(settings)
    if missing:
        raise StructPrefError(f"missing forest_parser setting(s): {', '.join(sorted(missing))}")
    check_parser_settings({**DEFAULT_SETTINGS, **settings})
    return {key: settings[key] for key in SHARED_SETTINGS}


@registry.architectures("spacy_structpref.PCFG.v1")
def PCFG(horizontal_markov: int = 2, vertical_markov: int = 2, tag_parent: bool = True,
         split_unary_tags: bool = True, split_in: bool = True, split_percent: bool = True,
         rare_threshold: int = 2, smooth: float = 1.0, base_signatures: bool = True, beam: float = 1e-4,
         merit_threshold: float = 1e-6, max_expansions: int = 2000, tag_mode: str = "ignore",
         tag_bonus: float = 10.0) -> Model:
    """The unlexicalised PCFG as a parameter-free Thinc model: its
    ``attrs["settings"]`` are the grammar's annotation (Klein & Manning
    2003) and lexicon settings and the PCFG search's (see
    :data:`DEFAULT_SETTINGS`), checked; ``attrs["grammar"]`` is the grammar
    estimated from treebank trees (None until then). It has nothing to
    learn by gradient: the ``forest_parser`` runs it through
    :class:`~.parser.Parser` (:func:`build_parser`)."""
    settings = {"horizontal_markov": horizontal_markov, "vertical_markov": vertical_markov,
                "tag_parent": tag_parent, "split_unary_tags": split_unary_tags, "split_in": split_in,
                "split_percent": split_percent, "rare_threshold": rare_threshold, "smooth": smooth,
                "base_signatures": base_signatures, "beam": beam, "merit_threshold": merit_threshold,
                "max_expansions": max_expansions, "tag_mode": tag_mode, "tag_bonus": tag_bonus}
    parser_settings(settings)
    return Model("pcfg", _pcfg_forward, attrs={"settings": settings, "grammar": None})


def _pcfg_forward(model: Model, X, is_train: bool):
    raise StructPrefError("the PCFG model is run by its chart parser (parsing.settings.build_parser), "
                          "not called as a layer")

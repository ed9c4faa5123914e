"""PCFG parsing: grammar extraction (:mod:`.grammar`), the Cython CKY chart
with inside/outside (:mod:`._chart`), treebank-space forests, Viterbi and
lazy k-best (:mod:`.parser`), the settings the ``forest_parser``
component and the rerank lists share (:mod:`.settings`), and the memo of
parses a frozen parser keeps (:mod:`.memo`).

The names below load on first use: the ``forest_parser`` factory takes its
defaults from :mod:`.settings` and must not load nltk or the parser."""
from ..lazy import lazy_names

_MODULES = {
    "Annotation": "grammar", "Grammar": "grammar", "base_label": "grammar", "estimate_grammar": "grammar",
    "word_signature": "grammar",
    "ParseMemo": "memo",
    "KBest": "parser", "ParseResult": "parser", "Parser": "parser", "kbest": "parser", "prune_by_merit": "parser",
    "DEFAULT_SETTINGS": "settings", "build_parser": "settings", "check_parser_settings": "settings",
    "grammar_from_trees": "settings", "parser_settings": "settings", "PCFG": "settings",
    "SHARED_SETTINGS": "settings", "shared_settings": "settings",
}
__all__ = sorted(_MODULES)

__getattr__ = lazy_names(__name__, _MODULES)

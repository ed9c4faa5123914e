"""PCFG parsing: grammar extraction (:mod:`.grammar`), the Cython CKY chart
with inside/outside (:mod:`._chart`), treebank-space forests, Viterbi and
lazy k-best (:mod:`.parser`)."""
from .grammar import Annotation, Grammar, base_label, estimate_grammar, word_signature
from .parser import KBest, Parser, ParseResult, kbest, prune_by_merit

__all__ = ["Annotation", "Grammar", "KBest", "ParseResult", "Parser", "base_label", "estimate_grammar",
           "kbest", "prune_by_merit", "word_signature"]

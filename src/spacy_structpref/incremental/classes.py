"""Foot classes for specialised attachment predictors (SPEC §8): one
predictor per class of the next word's tag. The map is ours (PTB tags):
personal pronouns count as nouns (they head noun phrases), ``TO`` and ``RP``
as prepositions, ``MD`` as a verb, all determiners (``DT``, ``PDT``, ``WDT``)
as articles, possessive pronouns with the ``POS`` clitic; tags not listed
(``CD``, ``EX``, ``FW``, ``LS``, ``SYM``, ``UH``, ``WP``, …) are Others."""
from typing import Dict

FOOT_CLASSES: Dict[str, tuple] = {
    "Nouns": ("NN", "NNS", "NNP", "NNPS", "PRP"),
    "Verbs": ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD"),
    "Prepositions": ("IN", "TO", "RP"),
    "Articles": ("DT", "PDT", "WDT"),
    "Punctuation": (",", ".", ":", "``", "''", "-LRB-", "-RRB-", "#", "$"),
    "Adjectives": ("JJ", "JJR", "JJS"),
    "Adverbs": ("RB", "RBR", "RBS", "WRB"),
    "Conjunctions": ("CC",),
    "Possessives": ("POS", "PRP$", "WP$"),
}
OTHERS = "Others"
_CLASS_OF = {tag: name for name, tags in FOOT_CLASSES.items() for tag in tags}


def foot_class(tag: str) -> str:
    """The class of a foot tag (``Others`` for any tag not in FOOT_CLASSES)."""
    return _CLASS_OF.get(tag, OTHERS)

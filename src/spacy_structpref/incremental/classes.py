"""Foot classes for specialised attachment predictors (Menchetti et al.
2005): one predictor per class of the next word's tag.

The classes depend on the tagset, so the map is a setting: ``ptb`` (the
default, ours for the Penn Treebank: personal pronouns count as nouns (they
head noun phrases), ``TO`` and ``RP`` as prepositions, ``MD`` as a verb, all
determiners (``DT``, ``PDT``, ``WDT``) as articles, possessive pronouns with
the ``POS`` clitic; tags not listed (``CD``, ``EX``, ``FW``, ``LS``, ``SYM``,
``UH``, ``WP``, …) are Others), ``universal`` (the Universal tagset of Petrov
et al. 2012 and the UPOS tags of Universal Dependencies, mapped the same
way: ``PRON`` and ``PROPN`` as nouns, ``AUX`` as a verb, ``PRT``/``PART``
and ``SCONJ`` as prepositions, ``NUM``, ``INTJ``, ``SYM``, ``X`` as Others),
or any mapping ``{class: [tags]}`` (from a JSON file or a config block,
``spacy_structpref.FootClasses.v1``)."""
import json
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Union

from spacy.util import registry

from ..errors import StructPrefError

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
UNIVERSAL_FOOT_CLASSES: Dict[str, tuple] = {
    "Nouns": ("NOUN", "PROPN", "PRON"),
    "Verbs": ("VERB", "AUX"),
    "Prepositions": ("ADP", "PRT", "PART", "SCONJ"),
    "Articles": ("DET",),
    "Punctuation": (".", "PUNCT"),
    "Adjectives": ("ADJ",),
    "Adverbs": ("ADV",),
    "Conjunctions": ("CONJ", "CCONJ"),
}
OTHERS = "Others"
TAGSETS: Dict[str, Dict[str, tuple]] = {"ptb": FOOT_CLASSES, "universal": UNIVERSAL_FOOT_CLASSES}


class FootClasses:
    """A foot-class map: ``classes[name]`` lists the tags of class ``name``;
    a tag in no class is in ``Others``. Calling it gives a tag's class."""

    def __init__(self, classes: Mapping[str, Iterable[str]], name: str = "custom"):
        if not isinstance(classes, Mapping) or not classes:
            raise StructPrefError(f"foot classes must be a non-empty mapping {{class: [tags]}}, got {classes!r}")
        self.name = name
        self.classes: Dict[str, tuple] = {}
        self._class_of: Dict[str, str] = {}
        for cls, tags in classes.items():
            if not isinstance(cls, str) or not cls:
                raise StructPrefError(f"foot class names must be non-empty strings, got {cls!r}")
            if isinstance(tags, str) or not isinstance(tags, Iterable):
                raise StructPrefError(f"foot class {cls!r} must list its tags, got {tags!r}")
            tags = tuple(tags)
            for tag in tags:
                if not isinstance(tag, str) or not tag:
                    raise StructPrefError(f"foot class {cls!r} has the tag {tag!r}; tags are non-empty strings")
                if tag in self._class_of:
                    raise StructPrefError(f"tag {tag!r} is in foot classes {self._class_of[tag]!r} and {cls!r}; "
                                          "a tag belongs to one class")
                self._class_of[tag] = cls
            self.classes[cls] = tags

    def __call__(self, tag: str) -> str:
        return self._class_of.get(tag, OTHERS)

    def __eq__(self, other) -> bool:
        return isinstance(other, FootClasses) and self.classes == other.classes

    def __repr__(self) -> str:
        return f"FootClasses({self.name!r}, {len(self.classes)} classes, {len(self._class_of)} tags)"

    def to_dict(self) -> Dict[str, list]:
        return {cls: list(tags) for cls, tags in self.classes.items()}

    def coverage(self, tags: Iterable[str]) -> float:
        """The fraction of ``tags`` (a corpus's foot tags, with repeats) not in Others."""
        tags = list(tags)
        return sum(tag in self._class_of for tag in tags) / len(tags) if tags else 0.0


def foot_classes(spec: Union[str, Path, Mapping[str, Sequence[str]], FootClasses] = "ptb") -> FootClasses:
    """A foot-class map from a tagset name (``ptb``, ``universal``), a JSON
    file holding ``{class: [tags]}``, or such a mapping."""
    if isinstance(spec, FootClasses):
        return spec
    if isinstance(spec, Mapping):
        return FootClasses(spec)
    if isinstance(spec, str) and spec in TAGSETS:
        return FootClasses(TAGSETS[spec], spec)
    path = Path(spec)
    if not path.is_file():
        raise StructPrefError(f"foot classes {str(spec)!r} are neither a tagset ({', '.join(TAGSETS)}) nor a "
                              "JSON file {class: [tags]}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise StructPrefError(f"cannot read foot classes from {path}: {err}") from None
    return FootClasses(data, path.stem)


PTB_FOOT_CLASSES = foot_classes("ptb")


def foot_class(tag: str, classes: Optional[FootClasses] = None) -> str:
    """The class of a foot tag under ``classes`` (default: the PTB map;
    ``Others`` for a tag in no class)."""
    return (classes or PTB_FOOT_CLASSES)(tag)


def set_classes(psets: Iterable, classes: Optional[FootClasses] = None) -> List[str]:
    """The foot class of each preference set's incoming word (its ``foot``
    tag) under ``classes`` (default: the PTB map): the key that routes the
    set to its learner in a specialised learner (Menchetti et al. 2005, §6.1.1)."""
    return [foot_class(s.foot, classes) for s in psets]


@registry.misc("spacy_structpref.FootClasses.v1")
def make_foot_classes(tagset: str = "ptb", path: Optional[str] = None,
                      classes: Optional[Dict[str, list]] = None) -> FootClasses:
    """A foot-class map in a config: a built-in ``tagset``, or a JSON file
    (``path``), or the ``classes`` block itself; give one of the last two to
    override the tagset."""
    if path is not None and classes is not None:
        raise StructPrefError("give the foot classes as a path or as a classes block, not both")
    return foot_classes(classes if classes is not None else path if path is not None else tagset)

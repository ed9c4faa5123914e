"""What the corpora's labels are made of: the families of TREC's question
classes, of the PTB's and Basque's tags, and the variants of Brown's tags.
The readers group fine question classes by family; ``label-map`` measures
whether learned label vectors do."""
from typing import Dict, List, Optional, Sequence, Tuple

# Brown's tag variants (Francis & Kučera 1979): a foreign word's tag is its
# category's with "FW-" before it; words in titles, headlines and citations
# add "-TL", "-HL", "-NC" to theirs
VARIANT_PREFIXES = ("FW-",)
VARIANT_SUFFIXES = ("-TL", "-HL", "-NC")


def coarse_label(label: str) -> str:
    """``HUM:ind`` -> ``HUM`` (Li & Roth's coarse class of a fine one); a
    label without a family is its own."""
    return label.split(":", 1)[0]


def label_family(label: str) -> Optional[str]:
    """The family of a ``FAMILY:label`` class (``HUM`` of ``HUM:ind``); None
    for a label without one (a POS tag)."""
    return coarse_label(label) if ":" in label else None


# The PTB tags' coarse classes: the universal part-of-speech tags of Petrov,
# Das & McDonald (2012), their English (en-ptb) mapping
UNIVERSAL_PTB = {
    **dict.fromkeys(("NN", "NNS", "NNP", "NNPS"), "NOUN"),
    **dict.fromkeys(("MD", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ"), "VERB"),
    **dict.fromkeys(("JJ", "JJR", "JJS"), "ADJ"),
    **dict.fromkeys(("RB", "RBR", "RBS", "WRB"), "ADV"),
    **dict.fromkeys(("PRP", "PRP$", "WP", "WP$"), "PRON"),
    **dict.fromkeys(("DT", "EX", "PDT", "WDT"), "DET"),
    **dict.fromkeys(("POS", "RP", "TO"), "PRT"),
    "IN": "ADP", "CC": "CONJ", "CD": "NUM",
    **dict.fromkeys(("FW", "LS", "SYM", "UH"), "X"),
    **dict.fromkeys(("#", "$", "''", "``", ",", ".", ":", "-LRB-", "-RRB-", "(", ")"), "."),
}


def label_families(labels: Sequence[str]) -> Optional[List[str]]:
    """Each label's family, by the scheme the whole label set follows; None
    when it follows none. ``FAMILY:label`` classes (TREC's, or generated
    ones) are in ``FAMILY``; PTB tags in their universal tag
    (:data:`UNIVERSAL_PTB`); Basque's fine tags ``CPOS_POS`` (3LB, CoNLL
    2007) in their coarse part of speech, the part before the first ``_``
    (``IZE_ARR`` and ``IZE`` in ``IZE``)."""
    labels = list(labels)
    if not labels:
        return None
    if all(label_family(label) for label in labels):
        return [label_family(label) for label in labels]
    if all(label in UNIVERSAL_PTB for label in labels):
        return [UNIVERSAL_PTB[label] for label in labels]
    if any("_" in label.strip("_") for label in labels) and all(label[:1].isalpha() for label in labels):
        return [label.split("_", 1)[0] for label in labels]
    return None


def variant_parts(label: str) -> Tuple[str, Tuple[str, ...]]:
    """``(base, markers)`` of a Brown tag: the tag with every variant prefix
    and suffix removed, and those removed (``FW-NN-TL`` → ``("NN", ("FW-",
    "-TL"))``); a tag without them is its own base, with no markers."""
    base, before, markers = label, None, []
    while base != before:
        before = base
        for prefix in VARIANT_PREFIXES:
            if base.startswith(prefix) and len(base) > len(prefix):
                base, markers = base[len(prefix):], markers + [prefix]
        for suffix in VARIANT_SUFFIXES:
            if base.endswith(suffix) and len(base) > len(suffix):
                base, markers = base[:-len(suffix)], markers + [suffix]
    return base, tuple(markers)


def variant_bases(labels: Sequence[str]) -> Dict[str, str]:
    """Each tag that is a Brown variant of another tag of ``labels``, mapped
    to that base tag (:func:`variant_parts`), when it is among the labels."""
    present = set(labels)
    bases = {}
    for label in labels:
        base, _ = variant_parts(label)
        if base != label and base in present:
            bases[label] = base
    return bases

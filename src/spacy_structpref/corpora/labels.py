"""What the corpora's labels are made of: the families of TREC's question
classes and the variants of Brown's tags. The readers group fine question
classes by family; ``label-map`` measures whether learned label vectors do."""
from typing import Dict, Optional, Sequence

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


def variant_bases(labels: Sequence[str]) -> Dict[str, str]:
    """Each tag that is a Brown variant of another tag of ``labels``, mapped
    to that base tag: the tag with every variant prefix and suffix removed
    (``FW-NN-TL`` → ``NN``), when it is among the labels."""
    present = set(labels)
    bases = {}
    for label in labels:
        base, before = label, None
        while base != before:
            before = base
            for prefix in VARIANT_PREFIXES:
                base = base[len(prefix):] if base.startswith(prefix) and len(base) > len(prefix) else base
            for suffix in VARIANT_SUFFIXES:
                base = base[:-len(suffix)] if base.endswith(suffix) and len(base) > len(suffix) else base
        if base != label and base in present:
            bases[label] = base
    return bases

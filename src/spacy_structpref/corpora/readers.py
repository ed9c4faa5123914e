"""Readers for the PTB sample, Basque CoNLL-2007 and Brown.

Data always goes through NLTK's data roots (``NLTK_DATA``): NLTK 3.10 refuses
corpus paths outside them.
"""
import os
from functools import lru_cache
from typing import List, Sequence, Tuple

from nltk.tree import Tree

from ..errors import CorpusError
from ..trees.normalize import normalize_tree

SPLITS = ("train", "dev", "test")
CORPORA = ("ptb", "basque", "brown")
TaggedSentence = List[Tuple[str, str]]

# PTB sample (wsj_0001–wsj_0199): train 0001–0139, dev 0140–0169, test 0170–0199.
_PTB_RANGES = {"train": (1, 139), "dev": (140, 169), "test": (170, 199), "all": (1, 199)}
BASQUE_DEV_SIZE = 260


def check_nltk_data(corpus: str) -> None:
    """Raise a :class:`CorpusError` that says how to fix a missing corpus."""
    import nltk

    for resource in (f"corpora/{corpus}", f"corpora/{corpus}.zip/{corpus}/"):
        try:
            nltk.data.find(resource)
            return
        except LookupError:
            pass
    else:
        roots = os.environ.get("NLTK_DATA")
        hint = (f"NLTK_DATA={roots!r} does not contain corpora/{corpus}(.zip)" if roots
                else "NLTK_DATA is not set; point it at an NLTK data directory (e.g. ../shared/nltk_data)")
        raise CorpusError(f"NLTK corpus {corpus!r} not found: {hint}. "
                          f"`python -m spacy project assets` fetches it.") from None


def _check_split(split: str, allowed: Sequence[str]) -> None:
    if split not in allowed:
        raise CorpusError(f"unknown split {split!r}; expected one of {', '.join(allowed)}")


@lru_cache(maxsize=None)
def _ptb_normalized(split: str) -> Tuple[Tree, ...]:
    check_nltk_data("treebank")
    from nltk.corpus import treebank

    lo, hi = _PTB_RANGES[split]
    files = [f for f in treebank.fileids() if lo <= int(f[4:8]) <= hi]
    return tuple(normalize_tree(t) for f in files for t in treebank.parsed_sents(f))


def ptb_trees(split: str = "train") -> List[Tree]:
    """Normalised (``TOP``-rooted, no traces, no function tags) PTB-sample trees.

    Returns fresh copies: callers may modify them."""
    _check_split(split, tuple(_PTB_RANGES))
    return [t.copy(deep=True) for t in _ptb_normalized(split)]


@lru_cache(maxsize=None)
def _basque(fileid: str) -> Tuple[Tuple[Tuple[str, str], ...], ...]:
    check_nltk_data("conll2007")
    from nltk.corpus import conll2007

    sents, current = [], []
    for line in conll2007.open(fileid).read().splitlines():
        cols = line.split("\t")
        if len(cols) < 5:
            if current:
                sents.append(tuple(current))
                current = []
            continue
        current.append((cols[1], cols[4]))  # FORM, POSTAG (fine tag)
    if current:
        sents.append(tuple(current))
    return tuple(sents)


def basque_sentences(split: str = "train") -> List[TaggedSentence]:
    """Basque CoNLL-2007 (word, fine tag) sentences. Dev is the last 260
    sentences of ``eus.train``, train the rest, test is ``eus.test``."""
    _check_split(split, SPLITS)
    if split == "test":
        return [list(s) for s in _basque("eus.test")]
    train = _basque("eus.train")
    part = train[:-BASQUE_DEV_SIZE] if split == "train" else train[-BASQUE_DEV_SIZE:]
    return [list(s) for s in part]


def brown_sentences(limit: int = None) -> List[TaggedSentence]:
    """Brown tagged sentences (the scale corpus); ``limit`` takes the first n."""
    check_nltk_data("brown")
    from nltk.corpus import brown

    sents = brown.tagged_sents()
    if limit is not None:
        sents = sents[:limit]
    return [list(s) for s in sents]


def use_nltk_data(path) -> None:
    """Make ``path`` an NLTK data root (first in the search order), as setting
    ``NLTK_DATA`` would."""
    import nltk

    path = os.fspath(path)
    os.environ["NLTK_DATA"] = path
    if path not in nltk.data.path:
        nltk.data.path.insert(0, path)


def corpus_items(name: str, split: str, limit: int = None) -> list:
    """The raw items of a corpus split: normalised trees for ``ptb``, (word,
    tag) sentences for ``basque`` and ``brown``. Brown has no fixed split:
    sentence index % 10 == 9 is test, == 8 is dev, the rest train."""
    if name == "ptb":
        return ptb_trees(split)[:limit]
    if name == "basque":
        return basque_sentences(split)[:limit]
    if name == "brown":
        _check_split(split, SPLITS)
        wanted = {"train": set(range(8)), "dev": {8}, "test": {9}}[split]
        return [s for i, s in enumerate(brown_sentences()) if i % 10 in wanted][:limit]
    raise CorpusError(f"unknown corpus {name!r}; expected one of {', '.join(CORPORA)}")


def item_to_doc(vocab, item):
    """A Doc from a corpus item: words, tags, and constituents for trees."""
    from spacy.tokens import Doc

    from ..trees.doc import tree_to_doc

    if isinstance(item, Tree):
        return tree_to_doc(vocab, item)
    if not item:
        raise CorpusError("empty sentence in corpus")
    return Doc(vocab, words=[w for w, _ in item], tags=[t for _, t in item])


def corpus_docs(name: str, split: str, vocab, limit: int = None):
    """Docs of one corpus split (see :func:`corpus_items`)."""
    return [item_to_doc(vocab, item) for item in corpus_items(name, split, limit)]

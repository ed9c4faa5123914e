"""Corpus readers (through NLTK and ``NLTK_DATA``) and the fixed splits of SPEC §2."""
from .readers import (
    CORPORA,
    SPLITS,
    basque_sentences,
    brown_sentences,
    check_nltk_data,
    corpus_docs,
    ptb_trees,
)

__all__ = ["CORPORA", "SPLITS", "basque_sentences", "brown_sentences", "check_nltk_data",
           "corpus_docs", "ptb_trees"]

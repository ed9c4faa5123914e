"""Corpus readers (through NLTK and ``NLTK_DATA``) and the fixed splits of SPEC §2."""
from .readers import (
    CORPORA,
    SPLITS,
    basque_sentences,
    brown_sentences,
    check_nltk_data,
    corpus_docs,
    corpus_items,
    item_to_doc,
    ptb_trees,
    use_nltk_data,
)

__all__ = ["CORPORA", "SPLITS", "basque_sentences", "brown_sentences", "check_nltk_data",
           "corpus_docs", "corpus_items", "item_to_doc", "ptb_trees", "use_nltk_data"]

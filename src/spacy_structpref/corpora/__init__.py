"""Corpus readers (from the NLTK data packages under ``NLTK_DATA``) and the fixed splits."""
from .readers import (
    CORPORA,
    SPLITS,
    CorpusItems,
    LabelledText,
    basque_sentences,
    brown_sentences,
    check_nltk_data,
    corpus_docs,
    corpus_items,
    item_to_doc,
    ptb_trees,
    qc_labels,
    qc_questions,
    read_bracketed,
    read_conll,
    read_labelled,
    read_tagged,
    use_nltk_data,
)

__all__ = ["CORPORA", "SPLITS", "CorpusItems", "LabelledText", "basque_sentences", "brown_sentences", "check_nltk_data",
           "corpus_docs", "corpus_items", "item_to_doc", "ptb_trees", "qc_labels", "qc_questions", "read_bracketed", "read_conll", "read_labelled", "read_tagged",
           "use_nltk_data"]

"""Parse reranking (Collins & Duffy 2002; Menchetti et al. 2005): honest k-best lists and forests from the PCFG
or span-CRF parser (:mod:`.data`), the candidate sets and reranking of a learner (:mod:`.scorers`) and the forest-kernel
sub-forests (:mod:`.forest_kernel`). The PARSEVAL tables of the experiments are
:mod:`spacy_structpref.experiments.reranking_tables`."""
from .data import (
    FORMAT_VERSION,
    RerankItem,
    count_fallbacks,
    fold_assignment,
    fold_lists,
    jackknife_lists,
    load_items,
    parse_lists,
    parser_from_trees,
    save_items,
    sentence_f1,
    target_index,
)

__all__ = ["FORMAT_VERSION", "RerankItem", "count_fallbacks", "fold_assignment", "fold_lists", "jackknife_lists", "load_items",
           "parse_lists", "parser_from_trees", "save_items", "sentence_f1", "target_index"]

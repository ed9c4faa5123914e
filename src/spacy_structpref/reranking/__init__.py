"""Parse reranking (Collins & Duffy 2002; Menchetti et al. 2005): honest k-best lists and forests from the PCFG
parser (:mod:`.data`) and their PARSEVAL evaluation (:mod:`.evaluation`)."""
from .data import (
    FORMAT_VERSION,
    RerankItem,
    count_fallbacks,
    fold_assignment,
    jackknife_lists,
    load_items,
    parse_lists,
    parser_from_trees,
    save_items,
    sentence_f1,
    target_index,
)
from .evaluation import evaluate, evaluate_row, format_rows, one_best_row, oracle_row, print_rows, table_row

__all__ = ["FORMAT_VERSION", "RerankItem", "count_fallbacks", "evaluate", "evaluate_row", "fold_assignment", "format_rows",
           "jackknife_lists", "load_items", "one_best_row", "oracle_row", "parse_lists", "parser_from_trees",
           "print_rows", "save_items", "sentence_f1", "table_row", "target_index"]

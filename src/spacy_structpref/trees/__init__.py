"""Trees and forests: brackets, normalisation, trees on Docs, compact arrays,
packed forests, hash-consed tree sets."""
from .arrays import FlatTrees, SymbolTable, TreeArrays, trees_to_arrays
from .brackets import bracketed_to_arrays, escape_word, parse_bracketed, restore_words, to_bracketed
from .dag import TreeSetDAG
from .doc import SPANS_KEY, doc_to_tree, nbest_trees, register_extensions, set_tree, tree_to_doc
from .forest import Forest, ForestBuilder
from .normalize import normalize_tree, strip_function_tags, tree_problem

register_extensions()

__all__ = [
    "SPANS_KEY", "FlatTrees", "Forest", "ForestBuilder", "SymbolTable", "TreeArrays", "TreeSetDAG", "doc_to_tree",
    "bracketed_to_arrays", "escape_word", "nbest_trees", "normalize_tree", "parse_bracketed", "register_extensions",
    "restore_words", "set_tree", "strip_function_tags", "to_bracketed", "tree_problem", "tree_to_doc",
    "trees_to_arrays",
]

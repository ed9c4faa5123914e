"""Turning tree inputs (TreeArrays, nltk.Tree, bracket strings, Docs with
constituents, Forests) into arrays that share one SymbolTable; a list of
bracket strings is read in one pass (:func:`~.brackets.bracketed_to_arrays`)."""
from typing import Iterable, List, Optional

from nltk.tree import Tree

from ..errors import StructPrefError
from .arrays import FlatTrees, SymbolTable, TreeArrays
from .brackets import bracketed_to_arrays, parse_bracketed
from .forest import Forest


def shared_symbols(items: Iterable, symbols: Optional[SymbolTable] = None) -> SymbolTable:
    """The one SymbolTable that every array input was built with (a new one
    when no input carries a table)."""
    for item in items:
        table = getattr(item, "symbols", None) if isinstance(item, (TreeArrays, FlatTrees, Forest)) else None
        if table is None:
            continue
        if symbols is None:
            symbols = table
        elif table is not symbols:
            raise StructPrefError(
                "mismatched vocabularies: the inputs were converted with different SymbolTables, "
                "so their production ids cannot be compared; convert all trees/forests with one "
                "shared SymbolTable")
    return symbols if symbols is not None else SymbolTable()


def to_tree_arrays(item, symbols: SymbolTable) -> TreeArrays:
    if isinstance(item, TreeArrays):
        if item.symbols is not symbols:
            raise StructPrefError("mismatched vocabularies: a TreeArrays was built with another SymbolTable")
        return item
    if isinstance(item, str):
        item = parse_bracketed(item)
    elif not isinstance(item, Tree):
        from spacy.tokens import Doc

        if isinstance(item, Doc):
            from .doc import doc_to_tree

            tree = doc_to_tree(item)
            if tree is None:
                raise StructPrefError(f"the Doc {item.text[:40]!r} has no constituents to compare")
            item = tree
    if not isinstance(item, Tree):
        raise StructPrefError(
            f"cannot use a {type(item).__name__} as a tree: pass TreeArrays, an nltk.Tree, "
            "a bracketed string or a Doc with constituents")
    return TreeArrays.from_tree(item, symbols)


def to_forest(item, symbols: SymbolTable) -> Forest:
    if isinstance(item, Forest):
        if item.symbols is not symbols:
            raise StructPrefError("mismatched vocabularies: a Forest was built with another SymbolTable")
        return item
    return Forest.from_tree_arrays(to_tree_arrays(item, symbols))


def _bracket_strings(items: list) -> bool:
    return bool(items) and all(isinstance(x, str) for x in items)


def tree_list(items, symbols: Optional[SymbolTable] = None) -> List[TreeArrays]:
    items = list(items)
    symbols = shared_symbols(items, symbols)
    if _bracket_strings(items):
        return bracketed_to_arrays(items, symbols).trees
    return [to_tree_arrays(x, symbols) for x in items]


def tree_batch(items, symbols: Optional[SymbolTable] = None) -> FlatTrees:
    """:func:`tree_list`'s trees laid end to end; bracket strings are read
    straight into place."""
    items = list(items)
    symbols = shared_symbols(items, symbols)
    if _bracket_strings(items):
        return bracketed_to_arrays(items, symbols)
    return FlatTrees.from_trees(tree_list(items, symbols), symbols)

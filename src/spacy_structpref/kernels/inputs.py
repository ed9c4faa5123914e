"""Turning kernel inputs (TreeArrays, nltk.Tree, bracket strings, Docs with
constituents, Forests) into arrays that share one SymbolTable."""
from typing import Iterable, List, Optional

from nltk.tree import Tree

from ..errors import StructPrefError
from ..trees.arrays import SymbolTable, TreeArrays
from ..trees.brackets import parse_bracketed
from ..trees.forest import Forest


def check_lambda(lam: float) -> float:
    lam = float(lam)
    if not 0.0 < lam <= 1.0:
        raise StructPrefError(f"the kernel decay λ must lie in (0, 1], got {lam}")
    return lam


def check_sigma(sigma: float) -> float:
    if sigma not in (0, 1):
        raise StructPrefError(f"sigma must be 1 (subset-tree kernel) or 0 (subtree kernel), got {sigma}")
    return float(sigma)


def shared_symbols(items: Iterable, symbols: Optional[SymbolTable] = None) -> SymbolTable:
    """The one SymbolTable that every array input was built with (a new one
    when no input carries a table)."""
    for item in items:
        table = getattr(item, "symbols", None) if isinstance(item, (TreeArrays, Forest)) else None
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
            from ..trees.doc import doc_to_tree

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


def tree_list(items, symbols: Optional[SymbolTable] = None) -> List[TreeArrays]:
    items = list(items)
    symbols = shared_symbols(items, symbols)
    return [to_tree_arrays(x, symbols) for x in items]

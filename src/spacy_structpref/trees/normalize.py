"""Tree normalisation as is standard for parsing work (Collins 1999; Klein & Manning 2003)."""
import re
from typing import Optional

from nltk.tree import Tree

from .brackets import fold

TOP = "TOP"
# Labels that start with '-' (-NONE-, -LRB-, -RRB-) are kept as they are.
_FUNCTION_TAG = re.compile(r"^([^-=]+)[-=].*$")


def is_preterminal(node) -> bool:
    """A tree node whose only child is a word."""
    return isinstance(node, Tree) and len(node) == 1 and not isinstance(node[0], Tree)


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` → ``NP``, ``PP-LOC=2`` → ``PP``; ``-LRB-``/``-NONE-`` kept."""
    if not label or label.startswith("-"):
        return label
    m = _FUNCTION_TAG.match(label)
    return m.group(1) if m else label


def _strip(node, kids) -> Optional[Tree]:
    if kids is None:  # a word
        return node
    if node.label() == "-NONE-":
        return None
    kids = [k for k in kids if k is not None]
    return Tree(strip_function_tags(node.label()), kids) if kids else None


def tree_problem(tree) -> Optional[str]:
    """What keeps ``tree`` from being a treebank tree, or None: every word
    must be the only child of its preterminal (a word beside other children,
    "a word under a phrase", is refused), every constituent must have a
    child (:func:`normalize_tree` removes childless ones, as Floresta's
    ``(--)``), and every word must be a non-empty string."""
    if not isinstance(tree, Tree):
        return f"not an nltk Tree but a {type(tree).__name__}"
    stack = [tree]
    while stack:
        node = stack.pop()
        if not len(node):
            return f"constituent {node.label()!r} has no children"
        words = [kid for kid in node if not isinstance(kid, Tree)]
        if not words:
            stack.extend(node)
        elif len(node) != 1:
            return (f"word {words[0]!r} under {node.label()!r} is not the only child of a preterminal "
                    "(every word needs its own POS tag node)")
        elif not isinstance(words[0], str) or not words[0]:
            return f"the word under {node.label()!r} is {words[0]!r}, not a non-empty string"
    return None


def normalize_tree(tree: Tree) -> Tree:
    """Delete ``-NONE-`` leaves and emptied constituents, strip function tags
    and indices, and root the tree in ``TOP`` (PTB's unlabeled outer bracket
    becomes ``TOP``; a tree without one gets a ``TOP`` above its root)."""
    out = fold(tree, _strip)
    if out is None:
        raise ValueError("the tree has no words left after removing -NONE- elements")
    if out.label() in ("", TOP):
        out.set_label(TOP)
        return out
    return Tree(TOP, [out])

"""Tree normalisation as is standard for parsing work (SPEC §2)."""
import re
from typing import Optional

from nltk.tree import Tree

TOP = "TOP"
# Labels that start with '-' (-NONE-, -LRB-, -RRB-) are kept as they are.
_FUNCTION_TAG = re.compile(r"^([^-=]+)[-=].*$")


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` → ``NP``, ``PP-LOC=2`` → ``PP``; ``-LRB-``/``-NONE-`` kept."""
    if not label or label.startswith("-"):
        return label
    m = _FUNCTION_TAG.match(label)
    return m.group(1) if m else label


def _strip(node) -> Optional[Tree]:
    if not isinstance(node, Tree):
        return node
    if node.label() == "-NONE-":
        return None
    kids = [k for k in (_strip(c) for c in node) if k is not None]
    if not kids:
        return None
    return Tree(strip_function_tags(node.label()), kids)


def normalize_tree(tree: Tree) -> Tree:
    """Delete ``-NONE-`` leaves and emptied constituents, strip function tags
    and indices, and root the tree in ``TOP`` (PTB's unlabeled outer bracket
    becomes ``TOP``; a tree without one gets a ``TOP`` above its root)."""
    out = _strip(tree)
    if out is None:
        raise ValueError("the tree has no words left after removing -NONE- elements")
    if out.label() in ("", TOP):
        out.set_label(TOP)
        return out
    return Tree(TOP, [out])

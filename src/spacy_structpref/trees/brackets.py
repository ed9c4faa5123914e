"""Reading and writing bracketed trees, with errors that say where they break.

Words are written with the Penn Treebank's escapes, so that any token can be
written and read back: ``(`` becomes ``-LRB-``, ``)`` ``-RRB-`` and whitespace
``_`` (spaCy has whitespace tokens). The escape cannot be undone from the text
alone; :func:`restore_words` puts the original words back by position.
"""
import re
from typing import List, Sequence

from nltk.tree import Tree

from ..errors import BracketError


def _tokenize(text: str) -> List[str]:
    return text.replace("(", " ( ").replace(")", " ) ").split()


def parse_bracketed(text: str) -> Tree:
    """Parse one bracketed tree, e.g. ``(S (NP (DT the) (NN dog)) (VP (VBZ barks)))``.

    PTB's unlabeled outer bracket ``( (S ...) )`` is read with the empty label;
    :func:`normalize_tree` turns it into ``TOP``.
    """
    if not isinstance(text, str):
        raise BracketError(f"expected a bracketed tree string, got {type(text).__name__}")
    toks = _tokenize(text)
    if not toks:
        raise BracketError("empty bracketed tree string")
    if toks[0] != "(":
        raise BracketError(f"a bracketed tree must start with '(', got {toks[0]!r}")
    stack: List[list] = []
    root = None
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok == "(":
            if root is not None:
                raise BracketError(f"text continues after the tree closed at token {i}: {' '.join(toks[i:i + 5])!r}")
            label = ""
            if i + 1 < len(toks) and toks[i + 1] not in "()":
                label = toks[i + 1]
                i += 1
            stack.append([label, []])
        elif tok == ")":
            if not stack:
                raise BracketError(f"unbalanced ')' at token {i} of {text[:80]!r}")
            label, kids = stack.pop()
            if not kids:
                raise BracketError(f"constituent {label or '(unlabeled)'!r} has no children")
            node = Tree(label, kids)
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
        else:
            if root is not None:
                raise BracketError(f"text continues after the tree closed: {tok!r}")
            if not stack:
                raise BracketError(f"word {tok!r} outside any bracket")
            stack[-1][1].append(tok)
        i += 1
    if stack:
        raise BracketError(f"{len(stack)} unclosed '(' in {text[:80]!r}")
    return root


_SPACE = re.compile(r"\s+")


def escape_word(word: str) -> str:
    """A word as it can stand in a bracketed tree: brackets as ``-LRB-`` /
    ``-RRB-``, whitespace runs as ``_``."""
    return _SPACE.sub("_", str(word)).replace("(", "-LRB-").replace(")", "-RRB-")


def to_bracketed(tree: Tree) -> str:
    """One-line bracketed form of a tree, words escaped (:func:`escape_word`):
    :func:`parse_bracketed` reads it back with the same structure and labels."""
    if not isinstance(tree, Tree):
        return escape_word(tree)
    return "(" + tree.label() + " " + " ".join(to_bracketed(k) for k in tree) + ")"


def restore_words(tree: Tree, words: Sequence[str]) -> Tree:
    """A copy of ``tree`` whose leaves, in order, are ``words`` (undoes the
    escaping of a tree read back from :func:`to_bracketed`)."""
    n_leaves = len(tree.leaves())
    if n_leaves != len(words):
        raise BracketError(f"the tree has {n_leaves} words but {len(words)} were given")
    out = tree.copy(deep=True)
    for word, position in zip(words, out.treepositions("leaves")):
        out[position] = word
    return out

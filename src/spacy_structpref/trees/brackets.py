"""Reading and writing bracketed trees, with errors that say where they break.

Words and labels are written with the Penn Treebank's escapes, so that any
token can be written and read back: ``(`` becomes ``-LRB-``, ``)`` ``-RRB-``
and whitespace ``_`` (spaCy has whitespace tokens). The escape cannot be
undone from the text alone; :func:`restore_words` puts the original words
back by position.
"""
import re
from typing import Callable, List, Optional, Sequence

import numpy as np
from nltk.tree import Tree

from ..errors import BracketError
from .arrays import FlatTrees, SymbolTable, offsets


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
                raise BracketError(f"constituent {label or '(unlabeled)'!r} has no children "
                                   "(normalize_tree removes empty constituents)")
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


def bracketed_to_arrays(texts: Sequence[str], symbols: Optional[SymbolTable] = None) -> FlatTrees:
    """Many bracketed trees read straight into arrays: the same arrays and
    SymbolTable entries as ``trees_to_arrays([parse_bracketed(t) for t in texts], symbols)``,
    from one Cython pass over all the text that interns each distinct
    label, word and production once rather than once per node. A malformed
    text raises :func:`parse_bracketed`'s error, and then nothing is interned.
    """
    symbols = symbols if symbols is not None else SymbolTable()
    texts = list(texts)
    data = []
    for text in texts:
        if not isinstance(text, str):
            parse_bracketed(text)  # raises the error for a non-string
        # the Cython scanner knows ASCII whitespace only: respace other text as str.split sees it
        data.append((text if text.isascii() else " ".join(_tokenize(text))).encode("utf-8", "surrogatepass"))
    text_off = offsets([len(d) for d in data])
    from . import _brackets  # compiled: not at import, the package must load without it

    tokens, token_off, spellings = _brackets.tokenize(b"".join(data), text_off)
    read = _brackets.build(tokens, token_off, len(spellings))
    if read["bad"] >= 0:
        parse_bracketed(texts[read["bad"]])
        raise BracketError(f"malformed bracketed tree {texts[read['bad']][:80]!r}")  # not reached: same grammar
    # token id -> label / word id, interned in order of first use as parse_bracketed + from_tree do
    label_of = np.zeros(len(spellings), dtype=np.int64)
    label_of[read["labels"]] = symbols.label_ids([spellings[t] for t in read["labels"].tolist()])
    word_of = np.zeros(len(spellings), dtype=np.int64)
    word_of[read["words"]] = symbols.word_ids([spellings[t] for t in read["words"].tolist()])
    keys = read["keys"]
    keys = np.where(keys >= 0, label_of[np.maximum(keys, 0)], -1 - word_of[np.maximum(-1 - keys, 0)])
    prod_of = np.array(symbols.production_ids(keys, read["key_off"]), dtype=np.int64)
    return FlatTrees(read["node_off"], label_of[read["label"]], prod_of[read["prod"]], read["start"], read["end"],
                     read["child_off"], read["children"], read["n_words"], symbols)


_SPACE = re.compile(r"\s+")  # str.split's whitespace: what _tokenize breaks on


def escape_word(word: str) -> str:
    """A word as it can stand in a bracketed tree: brackets as ``-LRB-`` /
    ``-RRB-``, whitespace runs as ``_``. The empty word cannot be written
    (it would vanish from the text): a :class:`BracketError`."""
    word = str(word)
    if not word:
        raise BracketError("an empty word cannot be written in a bracketed tree")
    return _SPACE.sub("_", word).replace("(", "-LRB-").replace(")", "-RRB-")


def escape_label(label: str) -> str:
    """A label escaped as words are (:func:`escape_word`), so that it stays
    one token; the empty label (PTB's outer bracket) stays empty."""
    return escape_word(label) if label != "" else ""


def fold(root, combine: Callable, children: Callable = None):
    """``combine(node, results)`` bottom-up over a tree, children before
    parents, ``results`` being the children's values in order (None for a
    leaf); ``children(node)`` gives a node's children, None for a leaf
    (default: an nltk Tree's, a non-Tree being a leaf). Runs on an explicit
    stack: trees of any depth need no raised recursion limit."""
    children = children or _tree_children
    kids = children(root)
    if kids is None:
        return combine(root, None)
    stack = [(root, iter(kids), [])]
    while True:
        node, it, done = stack[-1]
        for kid in it:
            sub = children(kid)
            if sub is None:
                done.append(combine(kid, None))
            else:
                stack.append((kid, iter(sub), []))
                break
        else:
            stack.pop()
            value = combine(node, done)
            if not stack:
                return value
            stack[-1][2].append(value)


def _tree_children(node):
    return node if isinstance(node, Tree) else None


def to_bracketed(tree: Tree) -> str:
    """One-line bracketed form of a tree, labels and words escaped
    (:func:`escape_label`, :func:`escape_word`). :func:`parse_bracketed`
    reads it back as the same tree with escaped labels and words (exactly
    the tree when they need no escape). What cannot be written raises a
    :class:`BracketError`: a constituent without children (as Floresta's
    ``(--)``; :func:`normalize_tree` removes them), an empty word, and an
    empty label before a word (which would read back as the label)."""
    if not isinstance(tree, Tree):
        return escape_word(tree)
    out = []
    stack = [iter([tree])]
    while stack:
        kid = next(stack[-1], None)
        if kid is None:
            stack.pop()
            if stack:
                out[-1] += ")"
        elif isinstance(kid, Tree):
            if not len(kid):
                raise BracketError(f"constituent {kid.label()!r} has no children: a bracketed tree cannot hold "
                                   "an empty constituent (normalize_tree removes them)")
            label = escape_label(kid.label())
            if not label and not isinstance(kid[0], Tree):
                raise BracketError(f"a constituent with an empty label cannot start with a word ({kid[0]!r}): "
                                   "the word would read back as its label")
            out.append("(" + label)
            stack.append(iter(kid))
        else:
            out.append(escape_word(kid))
    return " ".join(out)


def restore_words(tree: Tree, words: Sequence[str]) -> Tree:
    """A copy of ``tree`` whose leaves, in order, are ``words`` (undoes the
    escaping of a tree read back from :func:`to_bracketed`)."""
    words = list(words)
    it = iter(words)
    n_leaves = 0

    def combine(node, kids):
        nonlocal n_leaves
        if kids is not None:
            return Tree(node.label(), kids)
        n_leaves += 1
        return next(it, node)

    out = fold(tree, combine)
    if n_leaves != len(words):
        raise BracketError(f"the tree has {n_leaves} words but {len(words)} were given")
    return out

"""Constituency trees on spaCy Docs.

The tree lives natively in a span group, ``doc.spans["constituents"]``
(:data:`SPANS_KEY`) unless a ``spans_key`` is given: one labelled span per
constituent (preterminals excluded: they are ``token.tag_``), in pre-order,
a unary chain as several spans of the same extent, outermost first.
``DocBin`` keeps order, duplicates and labels, so nothing else needs saving.
The ``._`` attributes are getters over the :data:`SPANS_KEY` group.
"""
from typing import Iterator, List, Optional, Tuple

from nltk.tree import Tree
from spacy.tokens import Doc, Span

from ..errors import StructPrefError, TreeDocMismatch
from .brackets import fold, parse_bracketed, restore_words

SPANS_KEY = "constituents"
MISSING_TAG = "X"  # preterminal label for a token that has no tag


def register_extensions() -> None:
    """Register the ``._`` attributes (idempotent)."""
    if not Doc.has_extension("parse"):
        Doc.set_extension("parse", getter=doc_to_tree)
    for name in ("forest", "nbest"):
        # Set by forest_parser: msgpack-serialisable dict / list of [logp, bracketed tree].
        if not Doc.has_extension(name):
            Doc.set_extension(name, default=None)
    if not Span.has_extension("labels"):
        Span.set_extension("labels", getter=_span_labels)
    if not Span.has_extension("parent"):
        Span.set_extension("parent", getter=_span_parent)
    if not Span.has_extension("children"):
        Span.set_extension("children", getter=_span_children)


# ---------------------------------------------------------------- tree → Doc
def _preterminals(tree: Tree) -> List[Tuple[str, str]]:
    out = []
    stack = [tree]  # pre-order on an explicit stack: deep trees need no raised recursion limit
    while stack:
        sub = stack.pop()
        words = [k for k in sub if not isinstance(k, Tree)]
        if words:
            if len(sub) != 1:
                raise StructPrefError(
                    f"word(s) {words!r} under {sub.label()!r} are not the only child of a preterminal; "
                    "every word needs its own preterminal (POS tag) node")
            out.append((words[0], sub.label()))
        else:
            stack.extend(reversed(sub))
    return out


def constituent_spans(tree: Tree) -> List[Tuple[int, int, str]]:
    """``(start, end, label)`` for every non-preterminal node, in pre-order."""
    out: List[Tuple[int, int, str]] = []
    pos = 0
    # (index in out of an open node, its remaining children), on an explicit stack
    stack: List[Tuple[Optional[int], Iterator]] = [(None, iter([tree]))]
    while stack:
        idx, kids = stack[-1]
        for kid in kids:
            if not isinstance(kid, Tree) or len(kid) == 1 and not isinstance(kid[0], Tree):
                pos += 1  # a preterminal (or a stray word)
            else:
                out.append((pos, -1, kid.label()))
                stack.append((len(out) - 1, iter(kid)))
                break
        else:
            stack.pop()
            if idx is not None:
                start, _, label = out[idx]
                out[idx] = (start, pos, label)
    return out


def set_tree(doc: Doc, tree: Tree, set_tags: bool = True, spans_key: str = SPANS_KEY) -> Doc:
    """Put ``tree`` on ``doc``: constituents into ``doc.spans[spans_key]``,
    and (unless ``set_tags`` is False) the preterminal labels into
    ``token.tag_``."""
    if not isinstance(tree, Tree):
        raise StructPrefError(f"expected an nltk.Tree, got {type(tree).__name__}")
    leaves = _preterminals(tree)
    words = [t.text for t in doc]
    if [w for w, _ in leaves] != words:
        raise TreeDocMismatch(
            f"the tree's leaves do not match the Doc's words: tree has {len(leaves)} leaves "
            f"{[w for w, _ in leaves][:8]!r}..., Doc has {len(words)} tokens {words[:8]!r}...")
    if set_tags:
        for token, (_, tag) in zip(doc, leaves):
            token.tag_ = tag
    doc.spans[spans_key] = [Span(doc, s, e, label=lab) for s, e, lab in constituent_spans(tree)]
    return doc


def tree_to_doc(vocab, tree: Tree, spans_key: str = SPANS_KEY) -> Doc:
    """A new Doc with the tree's words, tags and constituents (in ``doc.spans[spans_key]``)."""
    leaves = _preterminals(tree)
    if not leaves:
        raise StructPrefError("cannot make a Doc from a tree without words")
    doc = Doc(vocab, words=[w for w, _ in leaves])
    return set_tree(doc, tree, spans_key=spans_key)


# ---------------------------------------------------------------- Doc → tree
class _Node:
    __slots__ = ("start", "end", "labels", "kids", "parent")

    def __init__(self, start: int, end: int, label: str, parent: Optional["_Node"]):
        self.start, self.end, self.labels, self.kids, self.parent = start, end, [label], [], parent


def _structure(doc: Doc, spans_key: str = SPANS_KEY) -> List[_Node]:
    """Rebuild the nodes (one per extent, unary chains merged) from the
    pre-order span group, checking that it is a proper tree."""
    if spans_key not in doc.spans:
        return []
    nodes: List[_Node] = []
    stack: List[_Node] = []
    for span in doc.spans[spans_key]:
        s, e = span.start, span.end
        while stack and not (stack[-1].start <= s and e <= stack[-1].end):
            stack.pop()
        if stack and (stack[-1].start, stack[-1].end) == (s, e) and not stack[-1].kids:
            stack[-1].labels.append(span.label_)  # next link of a unary chain
            continue
        if not stack and nodes:
            raise StructPrefError(f"constituent {span.label_}[{s}:{e}) is outside the tree's root span")
        parent = stack[-1] if stack else None
        if parent is not None and parent.kids and parent.kids[-1].end > s:
            raise StructPrefError(
                f"constituents overlap or are out of pre-order: {span.label_}[{s}:{e}) after "
                f"[{parent.kids[-1].start}:{parent.kids[-1].end})")
        node = _Node(s, e, span.label_, parent)
        if parent is not None:
            parent.kids.append(node)
        nodes.append(node)
        stack.append(node)
    return nodes


def _node_to_tree(node: _Node, built: List[Tree], doc: Doc) -> Tree:
    """The tree of ``node``, its child nodes' trees ``built``: the tokens
    between them become preterminals."""
    kids: List[Tree] = []
    pos = node.start
    for kid, sub in zip(node.kids + [None], built + [None]):
        upto = kid.start if kid is not None else node.end
        kids.extend(Tree(doc[i].tag_ or MISSING_TAG, [doc[i].text]) for i in range(pos, upto))
        if kid is not None:
            kids.append(sub)
            pos = kid.end
    tree = None
    for label in reversed(node.labels):
        tree = Tree(label, kids if tree is None else [tree])
    return tree


def doc_to_tree(doc: Doc, spans_key: str = SPANS_KEY) -> Optional[Tree]:
    """The ``nltk.Tree`` stored in ``doc.spans[spans_key]`` (``None`` when it
    has no constituents)."""
    nodes = _structure(doc, spans_key)
    if not nodes:
        return None
    root = nodes[0]
    if (root.start, root.end) != (0, len(doc)):
        raise StructPrefError(f"the root constituent spans [{root.start}:{root.end}), not the whole Doc of {len(doc)} tokens")
    return fold(root, lambda node, built: _node_to_tree(node, built, doc), lambda node: node.kids)


def read_docs(path, vocab) -> List[Doc]:
    """The Docs of a ``.spacy`` (DocBin) file; a path that is no such file,
    or a file that is not a DocBin, is a :class:`StructPrefError` naming it."""
    from pathlib import Path

    from spacy.tokens import DocBin

    path = Path(path)
    if not path.is_file():
        raise StructPrefError(f"no .spacy file at {path}" + (" (it is a directory)" if path.is_dir() else ""))
    try:
        return list(DocBin().from_disk(path).get_docs(vocab))
    except (ValueError, KeyError, TypeError) as err:  # msgpack and DocBin's own checks of the data
        raise StructPrefError(f"{path} is not a DocBin (.spacy) file: {str(err).splitlines()[0]}") from None


def write_docs(docs, path) -> None:
    """Write Docs to a ``.spacy`` (DocBin) file, never half-written. Their
    ``user_data`` (the ``._`` attributes) is kept only when some Doc has any:
    spaCy decodes each stored entry on every read, even an empty one, and a
    training corpus is read every epoch."""
    from spacy.tokens import DocBin

    from ..saving import atomic_file

    docs = list(docs)
    with atomic_file(path) as tmp:
        DocBin(docs=docs, store_user_data=any(doc.user_data for doc in docs)).to_disk(tmp)


def nbest_trees(doc: Doc) -> List[Tuple[float, Tree]]:
    """``doc._.nbest`` as ``(log-probability, nltk.Tree)`` pairs whose leaves
    are the Doc's own words (the stored strings escape brackets and spaces)."""
    words = [t.text for t in doc]
    return [(float(logp), restore_words(parse_bracketed(text), words))
            for logp, text in doc._.nbest or []]


def _find(span: Span) -> Optional[_Node]:
    for node in _structure(span.doc):
        if (node.start, node.end) == (span.start, span.end):
            return node
    return None


def _span_labels(span: Span) -> List[str]:
    """Labels of the constituents with exactly this extent, outermost first;
    a single token with no constituent gives its tag."""
    node = _find(span)
    if node is not None:
        return list(node.labels)
    if len(span) == 1 and span[0].tag_:
        return [span[0].tag_]
    return []


def _span_parent(span: Span) -> Optional[Span]:
    """The smallest constituent strictly containing this span's extent."""
    node = _find(span)
    if node is not None:
        parent = node.parent
    else:
        best = None
        for cand in _structure(span.doc):
            if cand.start <= span.start and span.end <= cand.end and (cand.end - cand.start) > len(span):
                best = cand  # pre-order: later containing nodes are smaller
        parent = best
    if parent is None:
        return None
    return Span(span.doc, parent.start, parent.end, label=parent.labels[-1])


def _span_children(span: Span) -> List[Span]:
    """Immediate children: constituent spans, and one-token spans (labelled
    with the tag) for the preterminals directly below."""
    node = _find(span)
    if node is None:
        return []
    out: List[Span] = []
    pos = node.start
    for kid in node.kids + [None]:
        upto = kid.start if kid is not None else node.end
        out.extend(Span(span.doc, i, i + 1, label=span.doc[i].tag_ or MISSING_TAG) for i in range(pos, upto))
        if kid is not None:
            out.append(Span(span.doc, kid.start, kid.end, label=kid.labels[0]))
            pos = kid.end
    return out

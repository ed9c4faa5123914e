"""Treebank trees as the labelled binary span sets of span-based parsers.

A span parser (Stern, Andreas & Klein 2017; Kitaev & Klein 2018; Zhang, Zhou
& Li 2020) scores labelled spans ``(i, j, label)``, ``0 <= i < j <= n``, of a
*full binary bracketing* of the ``n`` words: ``2n - 1`` spans, the ``n``
one-word spans, the whole sentence, and for every span longer than one word
exactly one split into two spans of the set. Trees map onto such sets by:

- the outer ``TOP`` is dropped (it is put back on output);
- preterminals are not spans: their labels are returned as the ``tags``;
- a unary chain ``(S (VP ...))`` is one span with the *chain label*
  ``"S+VP"``, outermost first; a one-word span whose tag has no constituent
  directly above it gets the empty label ``""``;
- an n-ary node with children ``c1 ... cm`` is *left-factored*: the spans
  ``[c1 c2]``, ``[c1 c2 c3]``, ... ``[c1 ... c(m-1)]`` get the empty label
  and ``[c1 ... cm]`` the node's (chain) label, i.e. ``((c1 c2) c3) ... cm``.

Spans with the empty label are spliced out when a tree is rebuilt, so the
map back is exact on every treebank tree.
"""
from typing import Dict, Iterable, List, Sequence, Tuple

from nltk.tree import Tree

from ..errors import StructPrefError
from ..trees.brackets import escape_label, escape_word
from ..trees.normalize import TOP, is_preterminal

EMPTY = ""
CHAIN_JOIN = "+"

Span = Tuple[int, int, str]


class SpanLabels:
    """The span label vocabulary: index 0 is the empty label ``""`` (a span
    that is not a constituent; span models fix its score at 0), then the
    constituent and chain labels in sorted order."""

    def __init__(self, labels: Iterable[str]):
        labels = tuple(labels)
        if not labels or labels[0] != EMPTY:
            raise StructPrefError(f"span labels must start with the empty label '', got {labels[:3]!r}")
        for label in labels:
            if not isinstance(label, str):
                raise StructPrefError(f"span labels must be strings, got {label!r}")
        if len(set(labels)) != len(labels):
            dup = sorted({lab for lab in labels if labels.count(lab) > 1})
            raise StructPrefError(f"span labels must be distinct; repeated: {dup!r}")
        for label in labels[1:]:
            check_label(label)
        self._labels = labels
        self._index: Dict[str, int] = {label: i for i, label in enumerate(labels)}

    @classmethod
    def from_trees(cls, trees: Iterable[Tree]) -> "SpanLabels":
        """Every (chain) label that :func:`tree_to_spans` gives on ``trees``."""
        seen = set()
        for tree in trees:
            seen.update(label for _, _, label in tree_to_spans(tree)[2])
        seen.discard(EMPTY)
        return cls((EMPTY, *sorted(seen)))

    @property
    def labels(self) -> Tuple[str, ...]:
        return self._labels

    def index(self, label: str) -> int:
        """The id of ``label``; a StructPrefError names a label outside the vocabulary."""
        try:
            return self._index[label]
        except (KeyError, TypeError):
            raise StructPrefError(f"unknown span label {label!r} (the vocabulary has {len(self)} labels, "
                                  f"e.g. {', '.join(repr(lab) for lab in self._labels[1:6])})") from None

    def __len__(self) -> int:
        return len(self._labels)

    def __contains__(self, label) -> bool:
        return label in self._index

    def __eq__(self, other) -> bool:
        return isinstance(other, SpanLabels) and other._labels == self._labels

    def __hash__(self) -> int:
        return hash(self._labels)

    def __repr__(self) -> str:
        return f"SpanLabels({len(self)} labels)"

    def to_dict(self) -> dict:
        return {"labels": list(self._labels)}

    @classmethod
    def from_dict(cls, data: dict) -> "SpanLabels":
        if not isinstance(data, dict) or not isinstance(data.get("labels"), (list, tuple)):
            raise StructPrefError("span labels data must be a dict with a 'labels' list")
        return cls(data["labels"])


def check_label(label: str) -> None:
    """Refuses a chain label with an empty part (``"S++VP"``, ``"+S"``)."""
    if not isinstance(label, str):
        raise StructPrefError(f"a span label must be a string, got {label!r}")
    if label and not all(label.split(CHAIN_JOIN)):
        raise StructPrefError(f"span label {label!r} has an empty part in its chain")


def _chain_below(node) -> Tuple[List[str], Tree]:
    """The labels of the unary chain from ``node`` down, and the node where
    it stops: a preterminal or a node with two or more children."""
    labels = []
    while not is_preterminal(node) and len(node) == 1:
        labels.append(node.label())
        node = node[0]
    if not is_preterminal(node):
        labels.append(node.label())
    return labels, node


def tree_to_spans(tree: Tree) -> Tuple[List[str], List[str], List[Span]]:
    """``(words, tags, spans)`` of a ``TOP``-rooted treebank tree: the
    ``2n - 1`` labelled spans of its left-factored binarisation (see the
    module docstring), ordered by start, then longest first."""
    if not isinstance(tree, Tree):
        raise StructPrefError(f"expected an nltk Tree, got {type(tree).__name__}")
    if tree.label() != TOP:
        raise StructPrefError(f"the tree's root is {tree.label()!r}, not {TOP!r} (normalize_tree adds it)")
    words: List[str] = []
    tags: List[str] = []
    spans: List[Span] = []

    def visit(labels: List[str], node) -> Tuple[int, int]:
        for label in labels:
            if not label or CHAIN_JOIN in label or label == TOP:
                raise StructPrefError(f"constituent label {label!r} cannot be a span label (it is empty, "
                                      f"{TOP!r} below the root, or holds {CHAIN_JOIN!r})")
        chain = CHAIN_JOIN.join(labels)
        start = len(words)
        if is_preterminal(node):
            words.append(node[0])
            tags.append(node.label())
            spans.append((start, start + 1, chain))
            return start, start + 1
        if not isinstance(node, Tree) or not len(node):
            raise StructPrefError(f"not a treebank tree: {node!r} under {labels[-1:]!r} is not a constituent "
                                  "with children or a preterminal over one word")
        bounds = [start]
        for kid in node:
            if not isinstance(kid, Tree):
                raise StructPrefError(f"word {kid!r} under {node.label()!r} is not the only child of a preterminal")
            bounds.append(visit(*_chain_below(kid))[1])
        for m in range(2, len(bounds) - 1):
            spans.append((start, bounds[m], EMPTY))
        spans.append((start, bounds[-1], chain))
        return start, bounds[-1]

    if not len(tree) or is_preterminal(tree):
        raise StructPrefError(f"the {TOP!r} node needs constituents or preterminals below it")
    if len(tree) == 1 and isinstance(tree[0], Tree):
        visit(*_chain_below(tree[0]))
    else:
        visit([], tree)
    spans.sort(key=lambda s: (s[0], -s[1]))
    return words, tags, spans


def spans_to_tree(words: Sequence[str], tags: Sequence[str], spans: Iterable[Span]) -> Tree:
    """The ``TOP``-rooted tree of a labelled full binary bracketing: spans
    with the empty label are spliced into their parent, chain labels become
    unary chains, each word goes under its tag. The inverse of
    :func:`tree_to_spans`."""
    n = len(words)
    if n == 0:
        raise StructPrefError("cannot build a tree over no words")
    if len(tags) != n:
        raise StructPrefError(f"{n} words but {len(tags)} tags")
    by_cell: Dict[Tuple[int, int], str] = {}
    for span in spans:
        try:
            i, j, label = span
        except (TypeError, ValueError):
            raise StructPrefError(f"a span must be (start, end, label), got {span!r}") from None
        check_label(label)
        if not (0 <= i < j <= n):
            raise StructPrefError(f"span {span!r} is outside 0 <= start < end <= {n}")
        if (i, j) in by_cell:
            raise StructPrefError(f"span [{i}, {j}) appears twice")
        by_cell[int(i), int(j)] = label
    if len(by_cell) != 2 * n - 1:
        raise StructPrefError(f"a binary bracketing of {n} words has {2 * n - 1} spans, got {len(by_cell)}")
    if (0, n) not in by_cell:
        raise StructPrefError(f"the spans lack the whole sentence [0, {n})")
    # Spans starting at i, longest first: the left child of [i, j) is the
    # longest shorter one.
    starts: Dict[int, List[int]] = {}
    for i, j in sorted(by_cell, key=lambda c: (c[0], -c[1])):
        starts.setdefault(i, []).append(j)
    used = 0

    def build(i: int, j: int) -> list:
        nonlocal used
        used += 1
        if j == i + 1:
            kids = [Tree(tags[i], [words[i]])]
        else:
            k = next((end for end in starts[i] if end < j), None)
            if k is None or (k, j) not in by_cell:
                raise StructPrefError(f"span [{i}, {j}) has no split into two spans of the set "
                                      "(the spans are not a binary bracketing)")
            kids = build(i, k) + build(k, j)
        label = by_cell[i, j]
        if not label:
            return kids
        for part in reversed(label.split(CHAIN_JOIN)):
            kids = [Tree(part, kids)]
        return kids

    top = Tree(TOP, build(0, n))
    if used != 2 * n - 1:
        raise StructPrefError(f"only {used} of the {2 * n - 1} spans nest into one binary bracketing "
                              "(some spans cross or are left over)")
    return top


def spans_to_bracketed(words: Sequence[str], tags: Sequence[str], spans: Sequence[Span]) -> str:
    """``to_bracketed(spans_to_tree(words, tags, spans))`` for spans in
    preorder, written without building the tree (:class:`BracketWriter`)."""
    return BracketWriter(words, tags).write(spans)


class BracketWriter:
    """The bracketed text of span trees over one sentence, written straight
    from their spans in preorder (a span, then its left child's subtree,
    then its right child's: the order of :func:`~.span_chart.kbest`'s
    trees): what ``to_bracketed(spans_to_tree(words, tags, spans))`` gives,
    without building the tree, for a k-best list wanted as text. The words
    under their tags, and each label's brackets, are written once for all
    the trees. Spans in another order, or not a full binary bracketing, are
    an error."""

    def __init__(self, words: Sequence[str], tags: Sequence[str]):
        self.n = len(words)
        if self.n == 0:
            raise StructPrefError("cannot write a tree over no words")
        if len(tags) != self.n:
            raise StructPrefError(f"{self.n} words but {len(tags)} tags")
        self.leaves = [f"({escape_label(t)} {escape_word(w)})" for w, t in zip(words, tags)]
        self._brackets: Dict[str, Tuple[str, str]] = {}

    def _written(self, label: str) -> Tuple[str, str]:
        """A (chain) label's opening brackets, space-separated, and its closing ones."""
        written = self._brackets.get(label)
        if written is None:
            check_label(label)
            parts = label.split(CHAIN_JOIN) if label else []
            written = self._brackets[label] = (" ".join("(" + escape_label(p) for p in parts), ")" * len(parts))
        return written

    def write(self, spans: Sequence[Span]) -> str:
        n = self.n
        if len(spans) != 2 * n - 1:
            raise StructPrefError(f"a binary bracketing of {n} words has {2 * n - 1} spans, got {len(spans)}")
        out = ["(" + TOP]
        # open spans, innermost last: [start, end, closing brackets, whether the left child came]
        stack: List[list] = []
        cursor = 0  # where the next span must start
        for i, j, label in spans:
            while stack and stack[-1][1] <= i:
                out[-1] += stack.pop()[2]
            if stack:
                parent = stack[-1]
                ok = i == cursor and (j == parent[1] if parent[3] else i == parent[0] and j < parent[1])
                parent[3] = True
            else:
                ok = (i, j) == (0, n) and len(out) == 1
            if not ok:
                raise StructPrefError(f"span {(i, j, label)!r} does not follow its parent's in the preorder of a "
                                      f"binary bracketing of {n} words")
            opening, closing = self._written(label)
            if opening:
                out.append(opening)
            if j - i == 1:
                out.append(self.leaves[i] + closing)
                cursor = j
            else:
                stack.append([i, j, closing, False])
        while stack:
            out[-1] += stack.pop()[2]
        if cursor != n:
            raise StructPrefError(f"the spans cover the words up to {cursor}, not all {n}")
        return " ".join(out) + ")"

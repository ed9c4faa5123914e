"""Incremental trees and connection paths (Menchetti et al. 2005, §6.1,
after Lombardo & Sturt's dynamic grammar).

A sentence is read left to right keeping one connected tree. ``T_i`` is the
part of the gold tree under ``r_i`` (the lowest common ancestor of the
preterminals of ``w_1 … w_i``) that dominates one of ``w_1 … w_i``. When
``w_{i+1}`` arrives, ``T_{i+1} \\ T_i`` is its connection path (CP):

- *attach* (``r_{i+1} = r_i``): a chain hung as the new rightmost child of a
  node on ``T_i``'s right frontier (the anchor), down to ``w_{i+1}``'s
  preterminal (the foot);
- *lift* (``r_{i+1}`` above ``r_i``): a new root whose left branch is a chain
  down to the old root (the anchor) and whose right branch a chain down to
  the foot.

Every new node has exactly one child in ``T_{i+1}`` except a lift's new root,
which has two: nothing else can lie left of ``w_1`` or between ``w_i`` and
``w_{i+1}``. So a CP is described completely by its kind, the anchor's label,
the lift's spine and the chain of labels down to the foot (:class:`CPType`),
plus, for an attach, the anchor's depth on the right frontier.
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from nltk.tree import Tree

from ..errors import StructPrefError

ATTACH, LIFT = "attach", "lift"
Position = Tuple[int, ...]


@dataclass(frozen=True, order=True)
class CPType:
    """The type of a connection path: kind, anchor label, labelled shape, foot.

    ``spine``: a lift's new root, then the labels down to (not including) the
    old root; empty for an attach. ``chain``: the labels from the topmost new
    node on the foot's side down to the foot, which is ``chain[-1]``."""

    kind: str
    anchor: str
    spine: Tuple[str, ...]
    chain: Tuple[str, ...]

    def __post_init__(self):
        if self.kind not in (ATTACH, LIFT):
            raise StructPrefError(f"a CP kind is {ATTACH!r} or {LIFT!r}, not {self.kind!r}")
        if not self.chain or (self.kind == LIFT) != bool(self.spine):
            raise StructPrefError(f"malformed CP type {self!r}: a chain is needed, and a spine "
                                  "exactly for a lift")

    @property
    def foot(self) -> str:
        return self.chain[-1]

    def __str__(self) -> str:
        chain = _nest(self.chain, "·")
        if self.kind == ATTACH:
            return f"attach to {self.anchor}: {chain}"
        left = _nest(self.spine[1:] + (self.anchor,), "…")
        return f"lift {self.anchor}: ({self.spine[0]} {left} {chain})"

    def to_list(self) -> list:
        return [self.kind, self.anchor, list(self.spine), list(self.chain)]

    @classmethod
    def from_list(cls, data: Sequence) -> "CPType":
        kind, anchor, spine, chain = data
        return cls(kind, anchor, tuple(spine), tuple(chain))


def _nest(labels: Sequence[str], inner: str) -> str:
    out = inner
    for label in reversed(labels):
        out = f"({label} {out})"
    return out


@dataclass(frozen=True)
class ConnectionPath:
    """The gold CP of word ``word`` (0-based, ≥ 1): its type and, for an
    attach, the anchor's depth on ``T_word``'s right frontier (root = 0)."""

    type: CPType
    word: int
    depth: int


def preterminal_positions(tree: Tree) -> List[Position]:
    """Tree positions of the preterminals, in word order."""
    if not isinstance(tree, Tree) or not tree.leaves():
        raise StructPrefError("an incremental analysis needs a tree with at least one word")
    positions = [p[:-1] for p in tree.treepositions("leaves")]
    for p in positions:
        node = tree[p]
        if len(node) != 1:
            raise StructPrefError(f"word {node[0]!r} is not the only child of its preterminal "
                                  f"{node.label()!r}: incremental trees need tagged words")
    return positions


def _common_prefix(a: Position, b: Position) -> Position:
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    return a[:k]


def chain_tree(labels: Sequence[str], word: str) -> Tree:
    """The unary chain ``(labels[0] (labels[1] … (foot word)))``."""
    node = Tree(labels[-1], [word])
    for label in reversed(labels[:-1]):
        node = Tree(label, [node])
    return node


def connection_paths(tree: Tree) -> List[ConnectionPath]:
    """The gold CP of every word from the second on."""
    pre = preterminal_positions(tree)
    root = pre[0]  # r_1: the first preterminal
    paths = []
    for i in range(1, len(pre)):
        foot = pre[i]
        new_root = _common_prefix(root, foot)
        if new_root == root:
            # attach: the new nodes are those whose leftmost word is w_{i+1}, i.e.
            # reached from the foot by going up through first children only.
            top = len(foot)
            while top - 1 > len(root) and foot[top - 1] == 0:
                top -= 1
            anchor = foot[:top - 1]
            cp = CPType(ATTACH, tree[anchor].label(), (),
                        tuple(tree[foot[:k]].label() for k in range(top, len(foot) + 1)))
            paths.append(ConnectionPath(cp, i, len(anchor) - len(root)))
        else:
            spine = tuple(tree[root[:k]].label() for k in range(len(new_root), len(root)))
            chain = tuple(tree[foot[:k]].label() for k in range(len(new_root) + 1, len(foot) + 1))
            paths.append(ConnectionPath(CPType(LIFT, tree[root].label(), spine, chain), i, 0))
            root = new_root
    return paths


def right_frontier(tree: Tree) -> List[Tree]:
    """The nodes from the root down to the last preterminal (last children)."""
    nodes = [tree]
    while isinstance(nodes[-1][-1], Tree):
        nodes.append(nodes[-1][-1])
    return nodes


def check_edit(frontier: List[Tree], cp: CPType, depth: int) -> None:
    """Raise unless a CP of type ``cp`` fits the tree whose right frontier is
    ``frontier``: under the node at ``depth`` (attach) or over the root (lift)."""
    if cp.kind == ATTACH:
        if not 0 <= depth < len(frontier) - 1:
            raise StructPrefError(f"no anchor at depth {depth}: the right frontier has "
                                  f"{len(frontier) - 1} nodes that can take a child")
        anchor = frontier[depth]
    else:
        anchor = frontier[0]
    if anchor.label() != cp.anchor:
        raise StructPrefError(f"CP type {cp} does not fit at node {anchor.label()!r}")


def extend(prefix: Tree, cp: CPType, depth: int, word: str, reduced: bool = False) -> Tree:
    """``prefix`` (some ``T_i``) joined with a CP of type ``cp`` for ``word``:
    an attach under the right-frontier node at ``depth``, a lift over the root.
    ``prefix`` is left untouched. ``reduced`` applies tree reduction: of
    ``prefix`` only its right frontier and the frontier nodes' immediate
    children are kept, the latter as bare labels."""
    frontier = right_frontier(prefix)
    check_edit(frontier, cp, depth)
    chain = chain_tree(cp.chain, word)
    node = frontier[-1][-1]  # the last word
    for d in range(len(frontier) - 1, -1, -1):
        kids = [_kept(k, reduced) for k in frontier[d][:-1]]
        kids.append(node)
        if cp.kind == ATTACH and d == depth:
            kids.append(chain)
        node = Tree(frontier[d].label(), kids)
    if cp.kind == LIFT:
        for label in reversed(cp.spine[1:]):
            node = Tree(label, [node])
        node = Tree(cp.spine[0], [node, chain])
    return node


def _kept(child, reduced: bool):
    if not isinstance(child, Tree):
        return child
    return child.label() if reduced else child.copy(deep=True)


def incremental_trees(tree: Tree, paths: Optional[List[ConnectionPath]] = None) -> List[Tree]:
    """``T_1 … T_n`` of a tagged tree (fresh trees, ``tree`` is untouched);
    ``paths``: its :func:`connection_paths`, if already computed."""
    first = tree[preterminal_positions(tree)[0]]
    trees = [first.copy(deep=True)]
    words = tree.leaves()
    for path in connection_paths(tree) if paths is None else paths:
        trees.append(extend(trees[-1], path.type, path.depth, words[path.word]))
    return trees

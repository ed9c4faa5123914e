"""Preference sets for first-pass attachment (Menchetti et al. 2005, §6.1).

The CP inventory is read off training trees. For each word from the second
on, the candidates are every inventory type whose foot is the word's tag,
joined at every node where its anchor label fits: right-frontier nodes (not
the last preterminal) for an attach, the root for a lift. The gold candidate
is ``T_{i+1}``; when its CP type is not in the inventory the set has no
correct candidate and stays in the evaluation as an error.
"""
import json
from collections import Counter
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from itertools import repeat
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from nltk.tree import Tree

from ..errors import StructPrefError, check_count
from ..trees.dag import TreeSetDAG
from ..trees.arrays import INT, SymbolTable, offsets
from .paths import (ATTACH, CPType, check_edit, connection_paths, extend, incremental_trees,
                    right_frontier)

Edit = Tuple[CPType, int]  # (CP type, anchor depth on the right frontier; 0 for a lift)


class CPInventory:
    """CP types with their training counts, indexed by foot."""

    def __init__(self, counts: Dict[CPType, int]):
        self.counts = Counter(counts)
        by_foot: Dict[str, List[CPType]] = {}
        # most frequent first, ties in a fixed order: candidate lists are reproducible
        for cp in sorted(self.counts, key=lambda t: (-self.counts[t], t)):
            by_foot.setdefault(cp.foot, []).append(cp)
        self.by_foot = by_foot

    @classmethod
    def from_trees(cls, trees: Iterable[Tree]) -> "CPInventory":
        return cls(Counter(path.type for tree in trees for path in connection_paths(tree)))

    def __len__(self) -> int:
        return len(self.counts)

    def __contains__(self, cp: CPType) -> bool:
        return cp in self.counts

    def types(self, foot: str) -> List[CPType]:
        return self.by_foot.get(foot, [])

    def to_json(self) -> str:
        return json.dumps([[cp.to_list(), n] for cp, n in sorted(self.counts.items())])

    @classmethod
    def from_json(cls, text: str) -> "CPInventory":
        try:
            return cls({CPType.from_list(cp): int(n) for cp, n in json.loads(text)})
        except (ValueError, TypeError) as err:
            raise StructPrefError(f"not a CP inventory: {err}") from None


def candidate_edits(prefix: Tree, foot: str, inventory: CPInventory) -> List[Edit]:
    """Every (CP type, anchor depth) of the inventory that fits ``prefix`` for
    a next word tagged ``foot``."""
    frontier = [node.label() for node in right_frontier(prefix)[:-1]]
    edits = []
    for cp in inventory.types(foot):
        if cp.kind == ATTACH:
            edits.extend((cp, d) for d, label in enumerate(frontier) if label == cp.anchor)
        elif prefix.label() == cp.anchor:
            edits.append((cp, 0))
    return edits


@dataclass
class PreferenceSet:
    """The candidates for word ``word`` (0-based) of a sentence: ``prefix`` is
    ``T_word``, each edit one candidate ``T_{word+1}``; ``gold`` indexes the
    correct edit, or is None when the gold CP type is not in the inventory."""

    prefix: Tree
    word: int
    token: str
    foot: str
    edits: List[Edit]
    gold: Optional[int]

    def __len__(self) -> int:
        return len(self.edits)

    def trees(self, reduced: bool = False) -> List[Tree]:
        """The candidate trees (fresh), in the order of ``edits``."""
        return [extend(self.prefix, cp, depth, self.token, reduced) for cp, depth in self.edits]

    def dag(self, symbols: SymbolTable, reduced: bool = False) -> TreeSetDAG:
        """The candidate trees as one hash-consed DAG (:func:`candidate_dag`)."""
        return candidate_dag(self.prefix, self.token, self.edits, symbols, reduced)


def candidate_dag(prefix: Tree, token: str, edits: Sequence[Edit], symbols: SymbolTable,
                  reduced: bool = False) -> TreeSetDAG:
    """The candidates ``T_{i+1}`` of a prefix tree ``T_i`` for the next word
    ``token``, one per edit (a CP type and its anchor depth, e.g. from
    :func:`candidate_edits`), in order, built straight into one hash-consed
    DAG over ``symbols``: node for node what
    ``TreeSetDAG([extend(prefix, cp, depth, token, reduced) ...], symbols)``
    holds, without building the trees, and with no gold answer needed:
    the prefix is interned once, each candidate adds only its CP and the
    rebuilt path from its anchor up. Nodes are numbered in the order a
    post-order walk of the candidates meets them, so DAG ids agree too.

    Of reduced trees, an attachment's new anchor node and the path above it
    are new to the DAG (the anchor holds the frontier node below it and the
    word's chain, and no other node holds both), and so is a lift's new
    root: they are appended without a look-up, a path as one run of
    nodes; the prefix's frontier nodes, the chains and a lift's spine can
    coincide with one another (a repeated word and tag) and are hash-consed.
    With kept subtrees (``reduced=False``) a new subtree can repeat an
    earlier one, and an edit given twice repeats its candidate's nodes:
    then every node is looked up."""
    if not edits:
        return TreeSetDAG(symbols=symbols)  # nothing of the prefix is in any candidate
    frontier = right_frontier(prefix)
    bottom = len(frontier) - 1
    labels = [symbols.label_id(node.label()) for node in frontier]

    def word(w) -> int:
        return -(symbols.word_id(str(w)) + 1)

    # per frontier node, its children but the last (bare labels when reduced); kept subtrees interned first
    kept = TreeSetDAG(symbols=symbols)
    kept_syms, kept_ids = [], []
    for node in frontier:
        syms, ids = [], []
        for kid in node[:-1]:
            if not isinstance(kid, Tree):
                syms.append(word(kid))
            elif reduced:
                syms.append(word(kid.label()))
            else:
                syms.append(symbols.label_id(kid.label()))
                ids.append(kept.intern_tree(kid))
        kept_syms.append(syms)
        kept_ids.append(tuple(ids))
    nodes = _NodeList(kept.productions, kept.children)
    last = labels[1:] + [word(frontier[-1][-1])]
    prods = [symbols.production_id(lab, syms + [x]) for lab, syms, x in zip(labels, kept_syms, last)]
    top_down = prods[::-1]  # a path's productions, from just above its anchor up to the root
    # the prefix's own frontier nodes, interned bottom-up when first needed: original[known:]
    original, known = [-1] * len(frontier), len(frontier)
    chains: Dict[Tuple[str, ...], Tuple[int, int]] = {}

    def original_node(depth: int) -> int:
        nonlocal known
        while known > depth:
            known -= 1
            below = (original[known + 1],) if known < bottom else ()
            original[known] = nodes.intern(prods[known], kept_ids[known] + below)
        return original[depth]

    def unary(node: int, label: int, above) -> Tuple[int, int]:
        """``node`` (labelled ``label``) under unary nodes labelled ``above``, innermost last."""
        for name in reversed(above):
            parent = symbols.label_id(name)
            node, label = nodes.intern(symbols.production_id(parent, [label]), (node,)), parent
        return node, label

    def chain(labels: Tuple[str, ...]) -> Tuple[int, int]:
        """The chain ``labels`` down to the new word: its top node and label,
        built on the chain one shorter (chains sharing their lower part build it once)."""
        got = chains.get(labels)
        if got is None:
            if len(labels) == 1:
                foot = symbols.label_id(labels[0])
                got = nodes.intern(symbols.production_id(foot, [word(token)]), ()), foot
            else:
                got = unary(*chain(labels[1:]), labels[:1])
            chains[labels] = got
        return got

    anchored: Dict[Tuple[int, str], int] = {}  # (depth, chain top) -> the anchor's new production
    fresh = reduced and len(set(map(tuple, edits))) == len(edits)  # each candidate's own nodes are new to the DAG
    roots = []
    for cp, depth in edits:
        check_edit(frontier, cp, depth)
        if cp.kind == ATTACH:
            below = original_node(depth + 1)
            prod = anchored.get((depth, cp.chain[0]))
            if prod is None:
                prod = anchored[depth, cp.chain[0]] = symbols.production_id(
                    labels[depth], kept_syms[depth] + [last[depth], symbols.label_id(cp.chain[0])])
            node = nodes.intern(prod, kept_ids[depth] + (below, chain(cp.chain)[0]), new=fresh)
            if fresh:
                node = nodes.run(top_down[len(prods) - depth:], node)
            else:
                for d in range(depth - 1, -1, -1):
                    node = nodes.intern(prods[d], kept_ids[d] + (node,))
        else:
            left, label = unary(original_node(0), labels[0], cp.spine[1:])
            top = chain(cp.chain)[0]
            root = symbols.label_id(cp.spine[0])
            node = nodes.intern(symbols.production_id(root, [label, symbols.label_id(cp.chain[0])]),
                                (left, top), new=fresh)
        roots.append(node)
    return TreeSetDAG.from_arrays(symbols, *nodes.arrays(), np.asarray(roots, dtype=INT))


class _NodeList:
    """DAG nodes in order as flat lists (production, child count, children),
    hash-consed where :func:`candidate_dag` looks them up, appended where it
    knows them new; starting from ``productions``/``children`` (a DAG's)."""

    def __init__(self, productions: Sequence[int], children: Sequence[Tuple[int, ...]]):
        self.prod, self.n_kids = list(productions), [len(k) for k in children]
        self.kids = [k for kids in children for k in kids]
        self.index = {(p, k): i for i, (p, k) in enumerate(zip(productions, children))}

    def intern(self, prod: int, kids: Tuple[int, ...], new: bool = False) -> int:
        """The node's id; ``new``: known not to be among the nodes (no look-up)."""
        key = (prod, kids)
        d = None if new else self.index.get(key)
        if d is None:
            d = self.index[key] = len(self.prod)
            self.prod.append(prod)
            self.n_kids.append(len(kids))
            self.kids.extend(kids)
        return d

    def run(self, prods: Sequence[int], node: int) -> int:
        """Unary nodes known to be new, ``prods[0]`` over ``node``, each next
        one over the one before; returns the top one's id."""
        first, n = len(self.prod), len(prods)
        if not n:
            return node
        self.prod.extend(prods)
        self.n_kids.extend(repeat(1, n))
        self.kids.append(node)
        self.kids.extend(range(first, first + n - 1))
        return first + n - 1

    def arrays(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(prod, kid_off, kids)`` as :meth:`TreeSetDAG.dag_arrays` gives them."""
        return np.asarray(self.prod, dtype=INT), offsets(self.n_kids, INT), np.asarray(self.kids, dtype=INT)


@dataclass(eq=False)  # identity: its fields are arrays
class KeptSet:
    """What a learner reads of a :class:`PreferenceSet` (its word, foot,
    gold index and candidates), without the prefix tree: the candidates are
    kept as their DAG's :meth:`TreeSetDAG.to_arrays` over ``symbols``
    (about 4 KiB for a PTB set of ~60 reduced candidates, where the set
    with its prefix tree takes tens), and :meth:`dag` rebuilds the DAG from
    them, several times faster than building it. What learners derive per
    candidate (a kernel's self-kernels) is kept too, in ``per_tree``."""

    arrays: Tuple[np.ndarray, ...]
    symbols: SymbolTable
    reduced: bool
    word: int
    foot: str
    gold: Optional[int]
    per_tree: Dict = field(default_factory=dict)

    @classmethod
    def of(cls, pset: PreferenceSet, dag: TreeSetDAG, reduced: bool) -> "KeptSet":
        """``pset`` kept, ``dag`` being its candidates (``pset.dag(symbols, reduced)``)."""
        return cls(dag.to_arrays(), dag.symbols, reduced, pset.word, pset.foot, pset.gold)

    def __len__(self) -> int:
        return len(self.arrays[3])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)

    def dag(self, symbols: SymbolTable, reduced: bool = False) -> TreeSetDAG:
        """The candidates' DAG, as :meth:`PreferenceSet.dag` built it (over the
        same SymbolTable and reduction only: a clear error otherwise)."""
        if symbols is not self.symbols or reduced != self.reduced:
            raise StructPrefError("a kept preference set rebuilds its candidates only over the SymbolTable "
                                  f"and with the reduction (reduced = {self.reduced}) it was built with")
        return TreeSetDAG.from_arrays(symbols, *self.arrays, per_tree=self.per_tree)


class CandidateSets(SequenceABC):
    """The candidates of many preference sets as a sequence whose item ``i``
    is built on access (``psets[i].dag(symbols, reduced)``; a set may be a
    :class:`KeptSet`): the learners' ``fit`` only indexes it, so a whole
    treebank's sets (~70 KiB each as DAGs) are never held at once. With
    ``keep``, each set is replaced by its :class:`KeptSet` at its first
    build (~4 KiB a set), and later accesses rebuild from that: for
    learners that pass over the same sets many times."""

    def __init__(self, psets: Sequence, symbols: SymbolTable, reduced: bool = False, keep: bool = False):
        self.psets, self.symbols, self.reduced, self.keep = list(psets), symbols, reduced, keep
        self._sizes = [len(p) for p in self.psets]  # read at every minibatch: counted once

    def __len__(self) -> int:
        return len(self.psets)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return CandidateSets(self.psets[i], self.symbols, self.reduced, self.keep)
        pset = self.psets[i]
        if not self.keep or isinstance(pset, KeptSet):
            return pset.dag(self.symbols, self.reduced)
        dag = pset.dag(self.symbols, self.reduced)
        self.psets[i] = KeptSet.of(pset, dag, self.reduced)
        return dag

    def sizes(self) -> List[int]:
        """Each set's number of candidates, without building any (the list
        is the sequence's own: read it, do not change it)."""
        return self._sizes


class SetCache:
    """The preference sets (:func:`preference_sets`) of trees seen before,
    as :class:`KeptSet` lists by the tree's bracketing: a trainer that goes
    over the same treebank several times (spaCy's epochs, and its dev
    evaluations) builds each tree's sets once. Kept up to ``max_bytes`` of
    arrays; from the first tree that does not fit on, the sets of trees not
    kept are built at every call (as PreferenceSets). Each distinct
    tree gets a number for the cache's lifetime, so a set's id ``(tree
    number, word)`` is the same whenever its tree comes again: what a
    learner's ``update`` pools support by."""

    def __init__(self, inventory: CPInventory, symbols: SymbolTable, reduced: bool = False,
                 max_bytes: int = 1 << 30):
        self.max_bytes = check_count("the set cache's max_bytes", max_bytes, 0)
        self.inventory, self.symbols, self.reduced = inventory, symbols, reduced
        self.nbytes, self.full = 0, max_bytes == 0  # full: trees not kept are no longer tried
        self._number: Dict[str, int] = {}
        self._kept: Dict[int, List[KeptSet]] = {}

    def serves(self, inventory: CPInventory, symbols: SymbolTable, reduced: bool) -> bool:
        """Whether the kept sets are those of this inventory, SymbolTable and reduction."""
        return inventory is self.inventory and symbols is self.symbols and reduced == self.reduced

    def sets(self, trees: Iterable[Tree]) -> Tuple[List, List[Tuple[int, int]]]:
        """``(sets, ids)``: every tree's preference sets in order (KeptSets,
        or PreferenceSets for trees beyond the cache's size) and each set's
        id ``(tree number, word)``."""
        from ..trees.brackets import to_bracketed

        sets, ids = [], []
        for tree in trees:
            key = to_bracketed(tree)
            number = self._number.setdefault(key, len(self._number))
            tree_sets = self._kept.get(number)
            if tree_sets is None:
                tree_sets = preference_sets(tree, self.inventory)
                if not self.full:
                    tree_sets = [KeptSet.of(s, s.dag(self.symbols, self.reduced), self.reduced)
                                 for s in tree_sets]
                    size = sum(s.nbytes for s in tree_sets)
                    self.full = self.nbytes + size > self.max_bytes
                    if not self.full:
                        self._kept[number], self.nbytes = tree_sets, self.nbytes + size
            sets.extend(tree_sets)
            ids.extend((number, s.word) for s in tree_sets)
        return sets, ids


def learner_inputs(psets: Sequence[PreferenceSet], symbols: SymbolTable, reduced: bool = True,
                   specialise: bool = False, classes=None, keep: bool = False
                   ) -> Tuple[CandidateSets, List[Optional[int]], Optional[List[str]]]:
    """``(sets, gold, keys)`` for a preference learner: the sets' candidates
    (built on access, over ``symbols``; kept compactly after the first
    build with ``keep``, for a learner that takes several passes), each
    set's gold index, and with ``specialise`` each set's foot class under
    ``classes`` (default: the PTB map), else None."""
    from .classes import set_classes

    return (CandidateSets(psets, symbols, reduced, keep), [s.gold for s in psets],
            set_classes(psets, classes) if specialise else None)


def preference_sets(tree: Tree, inventory: CPInventory) -> List[PreferenceSet]:
    """One preference set per word from the second on, tags from ``tree``."""
    paths = connection_paths(tree)
    words = tree.leaves()
    sets = []
    for path, prefix in zip(paths, incremental_trees(tree, paths)):
        edits = candidate_edits(prefix, path.type.foot, inventory)
        gold = edits.index((path.type, path.depth)) if path.type in inventory else None
        sets.append(PreferenceSet(prefix, path.word, words[path.word], path.type.foot, edits, gold))
    return sets


def preference_sets_of(trees: Iterable[Tree], inventory: CPInventory) -> List[PreferenceSet]:
    """The preference sets of every tree, in order (:func:`preference_sets`)."""
    return [s for tree in trees for s in preference_sets(tree, inventory)]

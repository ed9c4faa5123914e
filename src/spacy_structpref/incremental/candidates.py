"""Preference sets for first-pass attachment (SPEC §8).

The CP inventory is read off training trees. For each word from the second
on, the candidates are every inventory type whose foot is the word's tag,
joined at every node where its anchor label fits: right-frontier nodes (not
the last preterminal) for an attach, the root for a lift. The gold candidate
is ``T_{i+1}``; when its CP type is not in the inventory the set has no
correct candidate and stays in the evaluation as an error.
"""
import json
from collections import Counter
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

from nltk.tree import Tree

from ..errors import StructPrefError
from .paths import ATTACH, CPType, connection_paths, extend, incremental_trees, right_frontier

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

"""First-pass (incremental) attachment, SPEC §8: incremental trees, connection
paths and their inventory, preference sets with tree reduction, foot classes."""
from .candidates import (CandidateSets, CPInventory, PreferenceSet, candidate_edits,
                         preference_sets)
from .classes import FOOT_CLASSES, OTHERS, foot_class
from .paths import (ATTACH, LIFT, ConnectionPath, CPType, connection_paths, extend,
                    incremental_trees, right_frontier)

__all__ = [
    "ATTACH", "FOOT_CLASSES", "LIFT", "OTHERS", "CandidateSets", "CPInventory", "CPType", "ConnectionPath",
    "PreferenceSet", "candidate_edits", "connection_paths", "extend", "foot_class",
    "incremental_trees", "preference_sets", "right_frontier",
]

"""First-pass (incremental) attachment (Sturt et al. 2003; Menchetti et al. 2005):
incremental trees, connection paths and their inventory, preference sets with
tree reduction, foot classes, and a strongly incremental parser over them."""
from .candidates import (CandidateSets, CPInventory, KeptSet, PreferenceSet, SetCache, candidate_dag,
                         candidate_edits, learner_inputs, preference_sets, preference_sets_of)
from .classes import (FOOT_CLASSES, OTHERS, UNIVERSAL_FOOT_CLASSES, FootClasses, foot_class, foot_classes,
                      set_classes)
from .parsing import (FRAG, MAX_BEAM_WIDTH, IncrementalParse, IncrementalParser, Scorer, Step, fallback_edit,
                      flat_parse)
from .paths import (ATTACH, LIFT, ConnectionPath, CPType, connection_paths, extend,
                    incremental_trees, right_frontier)

__all__ = [
    "ATTACH", "FOOT_CLASSES", "FRAG", "IncrementalParse", "IncrementalParser", "LIFT", "MAX_BEAM_WIDTH", "OTHERS", "Scorer",
    "Step", "CandidateSets", "CPInventory", "CPType", "ConnectionPath", "KeptSet", "SetCache",
    "PreferenceSet", "candidate_dag", "candidate_edits", "connection_paths", "extend", "fallback_edit", "flat_parse", "foot_class",
    "incremental_trees", "learner_inputs", "preference_sets", "preference_sets_of", "right_frontier", "FootClasses",
    "foot_classes", "set_classes", "UNIVERSAL_FOOT_CLASSES",
]

"""Learner inputs the attachment tests share, built from gold trees."""
from spacy_structpref.incremental import preference_sets_of


def candidates_and_gold(trees, inventory, symbols=None):
    """``(candidates, gold)`` of the preference sets of ``trees``: each set's
    reduced candidate trees, or their DAG in ``symbols``, and its gold index."""
    sets = preference_sets_of(trees, inventory)
    candidates = [s.trees(reduced=True) if symbols is None else s.dag(symbols, reduced=True) for s in sets]
    return candidates, [s.gold for s in sets]

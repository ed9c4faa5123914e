"""Keying preference sets by the foot class of their incoming word
(``set_classes``, and ``learner_inputs`` that hands them to a learner)."""
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.incremental import (OTHERS, CPInventory, FootClasses, learner_inputs, preference_sets_of,
                                          set_classes)
from spacy_structpref.trees import SymbolTable


def test_set_classes_by_hand():
    class Set:
        def __init__(self, foot):
            self.foot = foot

    sets = [Set("NN"), Set("IN"), Set("XX"), Set("NNS")]
    assert set_classes(sets) == ["Nouns", "Prepositions", OTHERS, "Nouns"]
    mine = FootClasses({"N": ["NN"], "P": ["IN", "TO"]})
    assert set_classes(sets, mine) == ["N", "P", OTHERS, OTHERS]


def test_learner_inputs_are_the_sets_their_gold_and_keys():
    trees = ptb_trees("train")[:3]
    psets = preference_sets_of(trees, CPInventory.from_trees(ptb_trees("train")[:50]))
    symbols = SymbolTable()
    sets, gold, keys = learner_inputs(psets, symbols, reduced=True)
    assert keys is None and gold == [s.gold for s in psets] and len(sets) == len(psets)
    assert list(sets[2]) == psets[2].trees(True) and sets.symbols is symbols
    _, _, keys = learner_inputs(psets, symbols, specialise=True)
    assert keys == set_classes(psets) and len(keys) == len(psets)

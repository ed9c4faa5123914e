"""Foot classes per tagset (the class of the word being attached, which
keys the specialised learners): the PTB map, the universal tagsets, maps read
from JSON or given in a config, clear errors for bad maps, and keying
preference sets by their class (``set_classes``, ``learner_inputs``)."""
import json

import pytest
import spacy

from spacy_structpref.errors import StructPrefError
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.incremental import (FOOT_CLASSES, OTHERS, CPInventory, FootClasses, foot_class, foot_classes,
                                          learner_inputs, preference_sets_of, set_classes)
from spacy_structpref.trees import SymbolTable

UNIVERSAL = ["ADJ", "ADP", "ADV", "CONJ", "DET", "NOUN", "NUM", "PRT", "PRON", "VERB", ".", "X"]
UPOS = ["ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X"]


def test_ptb_map_is_the_default_and_unchanged():
    assert foot_classes().classes == FOOT_CLASSES and foot_classes("ptb") == foot_classes()
    assert foot_class("NN") == "Nouns" and foot_class("NOUN") == OTHERS


def test_universal_map_puts_few_feet_into_others():
    ptb, universal = foot_classes("ptb"), foot_classes("universal")
    # the defect: under the PTB map all but "." are Others
    assert [t for t in UNIVERSAL if ptb(t) != OTHERS] == ["."] and ptb.coverage(UPOS) == 0.0
    assert universal.coverage(UNIVERSAL) == 10 / 12
    assert [t for t in UNIVERSAL if universal(t) == OTHERS] == ["NUM", "X"]
    assert [t for t in UPOS if universal(t) == OTHERS] == ["INTJ", "NUM", "SYM", "X"]
    assert universal("PRON") == foot_class("PRON", universal) == "Nouns" and universal("AUX") == "Verbs"


def test_foot_classes_from_json_and_config(tmp_path):
    path = tmp_path / "cess_esp.json"
    path.write_text(json.dumps({"Nouns": ["nc", "np"], "Verbs": ["vm", "va"]}), encoding="utf-8")
    assert foot_classes(path)("nc") == "Nouns" and foot_classes(str(path))("sp") == OTHERS
    nlp = spacy.blank("es")
    pipe = nlp.add_pipe("attachment_predictor", config={"foot_classes": {
        "@misc": "spacy_structpref.FootClasses.v1", "path": str(path)}})
    assert pipe.foot_class("vm") == "Verbs"
    pipe = spacy.blank("es").add_pipe("attachment_predictor", config={"foot_classes": {
        "@misc": "spacy_structpref.FootClasses.v1", "classes": {"Nouns": ["nc"]}}})
    assert pipe.foot_class("nc") == "Nouns" and pipe.foot_class("vm") == OTHERS


@pytest.mark.parametrize("classes,match", [
    ({"Nouns": ["NN"], "Names": ["NN"]}, "in foot classes 'Nouns' and 'Names'"),
    ({"Nouns": "NN"}, "must list its tags"),
    ({"Nouns": [""]}, "non-empty strings"),
    ({}, "non-empty mapping"),
])
def test_bad_foot_classes_are_clear_errors(classes, match):
    with pytest.raises(StructPrefError, match=match):
        FootClasses(classes)


def test_unknown_tagset_or_bad_file_is_a_clear_error(tmp_path):
    with pytest.raises(StructPrefError, match="neither a tagset"):
        foot_classes("stts")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(StructPrefError, match="cannot read foot classes"):
        foot_classes(tmp_path / "bad.json")
    with pytest.raises(StructPrefError, match="not both"):
        spacy.blank("en").add_pipe("attachment_predictor", config={"foot_classes": {
            "@misc": "spacy_structpref.FootClasses.v1", "path": "x.json", "classes": {"A": ["B"]}}})


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

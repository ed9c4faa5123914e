"""Saving is atomic and a saved component refuses to load into the wrong one."""
import pytest
import spacy
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.saving import MARKER, atomic_directory
from spacy_structpref.errors import StructPrefError
from spacy_structpref.trees import parse_bracketed, tree_to_doc

TREES = ["(TOP (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .)))",
         "(TOP (S (NP (DT A) (NN cat)) (VP (VBZ sleeps)) (. .)))"]


def _trained():
    nlp = spacy.blank("en")
    tagger, parser = nlp.add_pipe("distro_tagger"), nlp.add_pipe("forest_parser")
    golds = [tree_to_doc(nlp.vocab, parse_bracketed(t)) for t in TREES]
    nlp.initialize(lambda: [Example(nlp.make_doc(g.text), g) for g in golds])
    return nlp, tagger, parser


def test_wrong_component_is_a_clear_error(tmp_path):
    nlp, tagger, parser = _trained()
    tagger.to_disk(tmp_path / "tagger")
    parser.to_disk(tmp_path / "parser")
    with pytest.raises(StructPrefError, match="holds a saved distro_tagger, not a forest_parser"):
        parser.from_disk(tmp_path / "tagger")
    with pytest.raises(StructPrefError, match="holds a saved forest_parser, not a distro_tagger"):
        tagger.from_disk(tmp_path / "parser")
    with pytest.raises(StructPrefError, match="does not hold a saved"):
        tagger.from_disk(tmp_path)


def test_pipeline_round_trip_and_empty_doc(tmp_path):
    nlp, _, _ = _trained()
    nlp.to_disk(tmp_path / "pipe")
    again = spacy.load(tmp_path / "pipe")
    doc = again("The cat barks .")
    assert len(doc) == 4 and doc._.parse is not None and doc[1].tag_
    assert len(again("")) == 0


def test_interrupted_save_leaves_previous_save_intact(tmp_path):
    target = tmp_path / "comp"
    with atomic_directory(target, "distro_tagger") as tmp:
        (tmp / "weights").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_directory(target, "distro_tagger") as tmp:
            (tmp / "weights").write_text("half")
            raise RuntimeError("disk full")
    assert (target / "weights").read_text() == "old" and (target / MARKER).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["comp"]

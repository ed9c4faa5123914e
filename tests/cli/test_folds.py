"""Jackknife fold corpora and fold trainings (spacy_structpref.cli.folds)."""
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_structpref.cli.convert import convert
from spacy_structpref.cli.folds import fold_corpora, train_folds
from spacy_structpref.errors import StructPrefError
from spacy_structpref.reranking import fold_assignment

from tests.helpers.paths import CONFIGS


@pytest.fixture(scope="module")
def tiny_ptb(tmp_path_factory):
    out = tmp_path_factory.mktemp("ptb")
    convert("ptb", out, limit=10)
    return out


def texts(path):
    return [d.text for d in DocBin().from_disk(path).get_docs(spacy.blank("en").vocab)]


def test_folds_hold_out_contiguous_blocks_and_train_on_the_rest(tiny_ptb, tmp_path):
    fold_corpora(tiny_ptb / "train.spacy", tmp_path, 3)
    corpus = texts(tiny_ptb / "train.spacy")
    folds = fold_assignment(len(corpus), 3).tolist()
    held = []
    for f in range(3):
        out, train = texts(tmp_path / f"fold_{f}" / "held_out.spacy"), texts(tmp_path / f"fold_{f}" / "train.spacy")
        assert out == [t for t, g in zip(corpus, folds) if g == f]
        assert train == [t for t, g in zip(corpus, folds) if g != f]
        held += out
    assert held == corpus


def test_bad_fold_input_is_refused(tiny_ptb, tmp_path):
    with pytest.raises(StructPrefError, match="no .spacy file"):
        fold_corpora(tmp_path / "missing.spacy", tmp_path, 2)
    with pytest.raises(StructPrefError, match="folds"):
        fold_corpora(tiny_ptb / "train.spacy", tmp_path, 1)
    with pytest.raises(StructPrefError, match="fold-corpora"):
        train_folds(CONFIGS / "forest_parser.cfg", tmp_path / "none", tmp_path / "out")


def test_each_fold_trains_a_pipeline_and_a_failure_names_its_log(tiny_ptb, tmp_path):
    fold_corpora(tiny_ptb / "train.spacy", tmp_path / "folds", 2)
    overrides = ["--paths.dev", str(tiny_ptb / "dev.spacy"), "--training.max_steps", "1"]
    assert train_folds(CONFIGS / "forest_parser.cfg", tmp_path / "folds", tmp_path / "out", overrides,
                       n_jobs=2) == [0, 0]
    for f in range(2):
        nlp = spacy.load(tmp_path / "out" / f"fold_{f}" / "model-best")
        assert nlp.pipe_names == ["forest_parser"]
    # one fold alone (the others' trainings go to another job)
    assert train_folds(CONFIGS / "forest_parser.cfg", tmp_path / "folds", tmp_path / "one", overrides, only=[1]) == [0]
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["fold_1", "fold_1.log"]
    with pytest.raises(StructPrefError, match="not \\[2\\]"):
        train_folds(CONFIGS / "forest_parser.cfg", tmp_path / "folds", tmp_path / "one", overrides, only=[1, 2])
    with pytest.raises(StructPrefError, match="fold_0.log"):
        train_folds(CONFIGS / "forest_parser.cfg", tmp_path / "folds", tmp_path / "bad",
                    ["--components.forest_parser.k", "0"])

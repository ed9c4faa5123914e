"""atomic_file: a file written through it is either the whole new content or
left as it was, with no temporary file behind."""
import pytest

from spacy_structpref.saving import atomic_file, partial_path


def test_atomic_file_replaces_the_target_on_success(tmp_path):
    target = tmp_path / "sub" / "scores.json"
    with atomic_file(target) as tmp:
        assert tmp == partial_path(target) == tmp_path / "sub" / "scores.part.json"
        tmp.write_text("new")
        assert not target.exists()  # nothing visible before the block ends
    assert target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["scores.json"]


def test_atomic_file_leaves_the_target_on_failure(tmp_path):
    target = tmp_path / "train.spacy"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_file(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.spacy"]


def test_atomic_file_failure_before_writing(tmp_path):
    with pytest.raises(KeyError):
        with atomic_file(tmp_path / "plot.png"):
            raise KeyError("nothing written")
    assert not list(tmp_path.iterdir())

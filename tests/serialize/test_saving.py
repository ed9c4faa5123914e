"""atomic_file: a file written through it is either the whole new content or
left as it was, with no temporary file behind. SavedParts: saving named parts
in spaCy's idiom, exclude honoured, a refused load staged away."""
import pytest

from spacy_structpref.saving import Part, SavedParts, atomic_file, partial_path


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


# -- atomic_directory: what a save replaces, and what it leaves -------------------------------
import json  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402

from spacy_structpref.errors import SavedModelError  # noqa: E402
from spacy_structpref.saving import MARKER, atomic_directory, check_saved  # noqa: E402


def _save(path, files, factory="thing"):
    with atomic_directory(path, factory) as tmp:
        for name, text in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(text)


def _tree(path):
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))


def test_save_into_a_directory_keeps_what_the_save_does_not_own(tmp_path):
    models = tmp_path / "models"
    (models / "notes").mkdir(parents=True)
    (models / "keep.txt").write_text("mine")
    (models / "notes" / "a.txt").write_text("a")
    _save(models, {"cfg": "1", "part/w": "2"})
    assert _tree(models) == sorted([MARKER, "cfg", "keep.txt", "notes", "notes/a.txt", "part", "part/w"])
    (models / "part" / "readme").write_text("foreign, inside our directory")
    _save(models, {"cfg": "3"})  # the earlier save's part/w is ours: replaced (here: gone)
    assert _tree(models) == sorted([MARKER, "cfg", "keep.txt", "notes", "notes/a.txt", "part", "part/readme"])
    assert (models / "cfg").read_text() == "3" and (models / "keep.txt").read_text() == "mine"
    assert json.loads((models / MARKER).read_text())["files"].keys() == {"cfg"}
    assert check_saved(models, "thing") == models
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models"]


def test_a_file_the_save_writes_replaces_a_foreign_one(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "cfg").write_text("foreign")
    _save(tmp_path / "m", {"cfg": "ours"})
    assert (tmp_path / "m" / "cfg").read_text() == "ours"


def test_save_onto_a_file_is_refused(tmp_path):
    target = tmp_path / "model.bin"
    target.write_text("precious")
    with pytest.raises(SavedModelError, match="it is a file, not a directory"):
        _save(target, {"cfg": "1"})
    assert target.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"]


def test_save_where_a_foreign_directory_blocks_a_file_is_refused(tmp_path):
    (tmp_path / "m" / "cfg").mkdir(parents=True)
    (tmp_path / "m" / "cfg" / "x").write_text("x")
    with pytest.raises(SavedModelError, match="is where the save writes a file"):
        _save(tmp_path / "m", {"cfg": "1"})
    assert _tree(tmp_path / "m") == ["cfg", "cfg/x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_saved_directories_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        _save(tmp_path / "m", {"cfg": "1"})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m").stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((tmp_path / "m" / "cfg").stat().st_mode) == 0o666 & ~umask


def test_killed_saves_leave_one_temporary_directory_that_the_next_save_removes(tmp_path):
    target = tmp_path / "m"
    _save(target, {"cfg": "old"})
    (tmp_path / ".m.backup").mkdir()  # a hidden directory of the user's, of a similar name
    killed = textwrap.dedent(f"""
        import os
        from spacy_structpref.saving import atomic_directory
        with atomic_directory({str(target)!r}, "thing") as tmp:
            (tmp / "cfg").write_text("half")
            os._exit(9)
        """)
    for _ in range(2):
        assert subprocess.run([sys.executable, "-c", killed]).returncode == 9
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".m.saving-")]
    assert len(left) == 1  # each save removed the one killed before it: they never pile up
    assert (target / "cfg").read_text() == "old" and check_saved(target, "thing")
    _save(target, {"cfg": "new"})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.backup", "m"]
    assert (target / "cfg").read_text() == "new"


def test_a_save_in_progress_is_not_taken_for_a_killed_one(tmp_path):
    target, started = tmp_path / "m", tmp_path / "started"
    slow = textwrap.dedent(f"""
        import pathlib, time
        from spacy_structpref.saving import atomic_directory
        with atomic_directory({str(target)!r}, "thing") as tmp:
            (tmp / "cfg").write_text("first")
            pathlib.Path({str(started)!r}).touch()
            time.sleep(1.0)
        """)
    first = subprocess.Popen([sys.executable, "-c", slow])
    while not started.exists() and first.poll() is None:
        time.sleep(0.01)
    _save(target, {"cfg": "second"})  # waits for the first save's lock, then replaces it
    assert first.wait() == 0
    assert (target / "cfg").read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "started"]


def test_a_save_killed_between_its_renames_is_recovered(tmp_path):
    target = tmp_path / "m"
    _save(target, {"cfg": "old"})
    (target / "keep.txt").write_text("mine")
    # the state a save killed after moving the previous save aside leaves behind
    aside = tmp_path / ".m.replaced-0123456789abcdef"
    os.replace(target, aside)
    (tmp_path / ".m.saving-fedcba9876543210").mkdir()
    with pytest.raises(SavedModelError, match="interrupted.*saving again to the path restores it"):
        check_saved(target, "thing")
    _save(target, {"cfg": "new"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    assert (target / "cfg").read_text() == "new" and (target / "keep.txt").read_text() == "mine"


def test_nested_saves_into_one_parent_do_not_deadlock(tmp_path):
    with atomic_directory(tmp_path / "a", "thing") as tmp:
        (tmp / "cfg").write_text("a")
        _save(tmp_path / "b", {"cfg": "b"})
    assert check_saved(tmp_path / "a", "thing") and check_saved(tmp_path / "b", "thing")


def test_a_saved_directory_is_checked_file_by_file(tmp_path):
    _save(tmp_path / "m", {"cfg": "1", "part/w": "2"})
    (tmp_path / "m" / "part" / "w").write_text("3")
    with pytest.raises(SavedModelError, match=r"part/w does not match the checksum saved with it"):
        check_saved(tmp_path / "m", "thing")
    (tmp_path / "m" / "part" / "w").unlink()
    with pytest.raises(SavedModelError, match=r"part/w is missing"):
        check_saved(tmp_path / "m", "thing")


@pytest.mark.parametrize("marker, why", [
    ('{"factory":"thing","files":{"../x":"' + "0" * 64 + '"}}', "not a name inside"),
    ('{"factory":"thing","files":{"/etc/passwd":"' + "0" * 64 + '"}}', "not a name inside"),
    ('{"factory":"thing","files":{"cfg":"ABC"}}', "not a map of names to SHA-256"),
    ('{"factory":"thing","files":{},"factory":"thing"}', "a key appears twice"),
    ('{"factory":"thing","filez":{}}', "unexpected keys"),
    ('{"factory":"thing","files":{}', "damaged"),
    ('["thing"]', "no factory name"),
])
def test_a_crafted_or_damaged_marker_is_refused(tmp_path, marker, why):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / MARKER).write_text(marker)
    with pytest.raises(SavedModelError, match=why):
        check_saved(tmp_path / "m", "thing")


def test_a_symbolic_link_out_of_the_directory_is_refused(tmp_path):
    _save(tmp_path / "m", {"cfg": "1"})
    (tmp_path / "elsewhere").write_text("1")
    (tmp_path / "m" / "cfg").unlink()
    (tmp_path / "m" / "cfg").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SavedModelError, match="leads outside the directory"):
        check_saved(tmp_path / "m", "thing")


def test_a_marker_without_checksums_loads_with_a_warning(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / MARKER).write_text('{"factory": "thing"}')
    with pytest.warns(UserWarning, match="saved without file checksums"):
        assert check_saved(tmp_path / "m", "thing") == tmp_path / "m"


class Pair(SavedParts):
    """Two parts staged into a dict and adopted together, the second
    refusing a negative number: a minimal owner of saved parts."""
    saved_as = "pair"

    def __init__(self, a=0, b=0):
        self.a, self.b = a, b

    def _parts(self):
        def b(value):
            if value < 0:
                raise SavedModelError("b must be >= 0")
            return value

        return {"a": (lambda: self.a, int), "b": Part(lambda: self.b, b, "b.txt",
                                                      lambda p: p.write_text(str(self.b)),
                                                      lambda p: b(int(p.read_text())))}

    def _load(self, load):
        staged = {}
        load({name: part._replace(put=lambda v, name=name, put=part.put: staged.__setitem__(name, put(v)),
                                  read=lambda p, name=name, read=part.read: staged.__setitem__(name, read(p)))
              for name, part in ((n, Part(*p).completed(n)) for n, p in self._parts().items())})
        vars(self).update(staged)


def test_saved_parts_round_trip_exclude_and_files(tmp_path):
    assert (Pair().from_bytes(Pair(1, 2).to_bytes()).a, Pair().from_bytes(Pair(1, 2).to_bytes()).b) == (1, 2)
    assert vars(Pair(5, 5).from_bytes(Pair(1, 2).to_bytes(exclude=["a"]))) == {"a": 5, "b": 2}
    assert vars(Pair(5, 5).from_bytes(Pair(1, 2).to_bytes(), exclude=["b"])) == {"a": 1, "b": 5}
    Pair(1, 2).to_disk(tmp_path / "p")
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == sorted(["a.msgpack", "b.txt", MARKER])
    assert vars(Pair().from_disk(tmp_path / "p")) == {"a": 1, "b": 2}
    Pair(1, 2).to_disk(tmp_path / "q", exclude=["b"])
    assert not (tmp_path / "q" / "b.txt").exists() and vars(Pair(5, 5).from_disk(tmp_path / "q")) == {"a": 1, "b": 5}


def test_saved_parts_refused_load_changes_nothing(tmp_path):
    pair = Pair(5, 5)
    with pytest.raises(SavedModelError, match="b must be"):
        pair.from_bytes(Pair(1, -1).to_bytes())
    with pytest.raises(SavedModelError, match="cannot load pair: the saved data is malformed"):
        pair.from_bytes(b"\x93not msgpack")
    Pair(1, -1).to_disk(tmp_path / "p")
    with pytest.raises(SavedModelError, match="b must be"):
        pair.from_disk(tmp_path / "p")
    with pytest.raises(SavedModelError, match="holds a saved pair, not a other"):
        type("Other", (Pair,), {"saved_as": "other"})().from_disk(tmp_path / "p")
    assert vars(pair) == {"a": 5, "b": 5}


# -- settings given at load, the exchange, and readers ------------------------------------------
import threading  # noqa: E402
import warnings  # noqa: E402

from spacy_structpref.saving import exchange, merged_settings, reading  # noqa: E402


def test_merged_settings_keep_what_is_given_at_load_for_runtime_settings_only():
    built = {"k": 3, "beam": 1, "rank": 5}  # as the config with the values given built them
    saved = {"k": 10, "beam": 1, "rank": 5}
    assert merged_settings("c", built, saved) == saved  # nothing given: the save's
    with pytest.warns(UserWarning, match=r"^c: k = 3 given at load replaces the saved 10$") as caught:
        assert merged_settings("c", built, saved, given={"k", "beam"}, runtime={"k", "beam"}) == built
    assert len(caught) == 1  # beam given as saved: nothing to say
    with pytest.raises(SavedModelError, match=r"c: rank = 4 \(saved: 5\) given at load: the trained model depends"):
        merged_settings("c", {**built, "rank": 4}, saved, given={"k", "rank"}, runtime={"k"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert merged_settings("c", built, {"k": 10}, given={"beam", "rank"}, runtime=()) == {**built, "k": 10}


def test_exchange_swaps_two_directories_in_one_step(tmp_path):
    _save(tmp_path / "a", {"cfg": "a"})
    _save(tmp_path / "b", {"cfg": "b"})
    if not exchange(tmp_path / "a", tmp_path / "b"):
        pytest.skip("no renameat2 exchange on this system")
    assert (tmp_path / "a" / "cfg").read_text() == "b" and (tmp_path / "b" / "cfg").read_text() == "a"
    assert not exchange(tmp_path / "a", tmp_path / "missing")  # refused, nothing moved
    assert (tmp_path / "a" / "cfg").read_text() == "b"


def test_a_save_waits_for_the_readers_of_its_directory(tmp_path):
    target = tmp_path / "m"
    _save(target, {"cfg": "old"})
    saver = threading.Thread(target=_save, args=(target, {"cfg": "new"}))
    with reading(target) as path:
        assert path == target.resolve()
        saver.start()
        saver.join(0.5)
        assert saver.is_alive() and (target / "cfg").read_text() == "old"  # held back while read
    saver.join(10)
    assert (target / "cfg").read_text() == "new"

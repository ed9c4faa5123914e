"""Project steps side by side: the order from deps and outputs, skipping of
unchanged steps, failures, the variables a workflow must pass, and the
summary's rows of a group."""
import json
import sys
from pathlib import Path

import pytest

from spacy_structpref.cli.project_steps import group_members, summary_rows
from spacy_structpref.cli.side_by_side import run_side_by_side, split_arguments, step_order
from spacy_structpref.errors import StructPrefError

# each step appends "start NAME" / "end NAME" to events.txt around a short sleep, then writes its output
STEP = ("python -m spacy_structpref timed {name} -- python -c \"import time, pathlib, os; "
        "e = pathlib.Path('events.txt'); e.open('a').write('start {name}\\n'); time.sleep({sleep}); "
        "pathlib.Path('{out}').write_text('${{vars.word}} ' + os.environ['OPENBLAS_NUM_THREADS']); "
        "e.open('a').write('end {name}\\n')\"")


def _project(tmp_path: Path, steps: dict) -> Path:
    """A project.yml whose commands are ``steps`` (name: (deps, output, sleep))
    and a command ``group`` running them side by side (workflow ``all``)."""
    import srsly

    commands = [{"name": name, "script": [STEP.format(name=name, out=out, sleep=sleep)], "deps": deps,
                 "outputs": [out]} for name, (deps, out, sleep) in steps.items()]
    group = ("python -m spacy_structpref timed group -- python -m spacy_structpref side-by-side "
             + " ".join(steps) + " --n-jobs 2 --vars.word ${vars.word}")
    srsly.write_yaml(tmp_path / "project.yml", {
        "title": "test", "vars": {"word": "hello", "n_jobs": 2}, "workflows": {"all": ["group"]},
        "commands": [{"name": "group", "script": [group]}, *commands]})
    return tmp_path


def _events(project: Path) -> list:
    return (project / "events.txt").read_text().split("\n")[:-1]


def test_steps_run_side_by_side_after_what_they_read(tmp_path, monkeypatch, capsys):
    from spacy_structpref.cli import side_by_side

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setattr(side_by_side, "STATUS_EVERY", 0.3)
    project = _project(tmp_path, {"slow": ([], "a.txt", 1.0), "after_slow": (["a.txt"], "b.txt", 0),
                                  "fast": ([], "c.txt", 0.2)})
    outcome = run_side_by_side(["slow", "after_slow", "fast"], 2, split_arguments(["slow", "--vars.word", "hi"])[1], project)
    assert outcome == {"slow": "done", "after_slow": "done", "fast": "done"}
    assert "steps finished; running: slow (" in capsys.readouterr().out  # what a long step's wait shows
    events = _events(project)
    # slow and fast overlap; after_slow starts only once slow has ended
    assert events.index("start fast") < events.index("end slow")
    assert events.index("end slow") < events.index("start after_slow")
    # the workflow's variable reached the steps, which ran with one BLAS thread
    assert (project / "b.txt").read_text() == "hi 1"
    assert (project / "logs" / "slow.log").read_text().startswith("$ python -m spacy_structpref timed slow")
    # every step's time recorded, from processes that wrote side by side
    assert set(json.loads((project / "metrics" / "step_times.json").read_text())) == {"slow", "after_slow", "fast"}
    # nothing changed: skipped, as spacy project run would; --force runs them again
    assert set(run_side_by_side(["slow", "after_slow", "fast"], 2, {"vars.word": "hi"}, project).values()) == {"skipped"}
    # an output changed since: its step runs again (and writes what after_slow read before: that one is skipped)
    (project / "a.txt").write_text("changed")
    again = run_side_by_side(["slow", "after_slow", "fast"], 1, {"vars.word": "hi"}, project)
    assert again == {"slow": "done", "after_slow": "skipped", "fast": "skipped"}
    assert run_side_by_side(["fast"], 1, {"vars.word": "hi"}, project, force=True) == {"fast": "done"}


def test_a_failed_step_stops_new_starts_and_names_its_log(tmp_path):
    project = _project(tmp_path, {"first": ([], "a.txt", 0), "second": (["a.txt"], "b.txt", 0)})
    (project / "a.txt").mkdir()  # writing the output fails
    with pytest.raises(StructPrefError, match=r"first failed \(exit 1\); see logs/first.log"):
        run_side_by_side(["first", "second"], 2, {"vars.word": "x"}, project)
    assert "IsADirectoryError" in (project / "logs" / "first.log").read_text()
    assert not (project / "logs" / "second.log").exists()


def test_the_variables_steps_use_must_be_passed(tmp_path):
    project = _project(tmp_path, {"one": ([], "a.txt", 0)})
    with pytest.raises(StructPrefError, match=r"--vars.word \$\{vars.word\}"):
        run_side_by_side(["one"], 2, {}, project)
    with pytest.raises(StructPrefError, match="no command 'nope'"):
        run_side_by_side(["one", "nope"], 2, {"vars.word": "x"}, project)
    with pytest.raises(StructPrefError, match="n_jobs"):
        run_side_by_side(["one"], 0, {"vars.word": "x"}, project)
    with pytest.raises(StructPrefError, match="only --vars"):
        split_arguments(["one", "--force"])
    with pytest.raises(StructPrefError, match="name the project steps"):
        split_arguments(["--vars.word", "x"])
    assert split_arguments(["a", "b", "--vars.word=x", "--vars.n", "-3", "--vars.flag", "--vars.m", "1"]) == (
        ["a", "b"], {"vars.word": "x", "vars.n": -3, "vars.flag": True, "vars.m": 1})


def test_step_order_follows_outputs_and_refuses_cycles():
    commands = {"a": {"outputs": ["training/a"]}, "b": {"deps": ["training/a/model-best"], "outputs": ["m/b.json"]},
                "c": {"deps": ["m/b.json", "corpus/x"]}, "d": {"deps": ["training/ab"]}}
    assert step_order(commands, ["c", "b", "a", "d"]) == {"a": set(), "b": {"a"}, "c": {"b"}, "d": set()}
    cyclic = {"a": {"deps": ["y"], "outputs": ["x"]}, "b": {"deps": ["x"], "outputs": ["y"]}}
    with pytest.raises(StructPrefError, match="cycle among a, b"):
        step_order(cyclic, ["a", "b"])
    with pytest.raises(StructPrefError, match="named twice"):
        step_order(commands, ["a", "a"])


def test_group_members_are_read_off_the_script_line():
    line = "python -m spacy_structpref timed g -- python -m spacy_structpref side-by-side a b-c --n-jobs 2 --vars.x 1"
    assert group_members(line) == ["a", "b-c"]
    assert group_members("python -m spacy_structpref timed g -- python -m spacy train x.cfg") == []


def test_the_summary_lists_a_groups_steps_under_it_without_counting_them_twice(tmp_path):
    project = _project(tmp_path, {"one": ([], "a.txt", 0), "two": ([], "b.txt", 0)})
    times = {"group": {"seconds": 100.0, "status": 0, "finished": 0.0, "commands": []},
             "one": {"seconds": 90.0, "status": 0, "finished": 0.0, "commands": []},
             "two": {"seconds": 80.0, "status": 0, "finished": 0.0, "commands": []}}
    (project / "metrics").mkdir()
    (project / "metrics" / "step_times.json").write_text(json.dumps(times))
    rows = summary_rows(project, "all")
    assert [r[0] for r in rows] == ["group", "  ↳ one", "  ↳ two", "total"]
    assert rows[-1][1] == "1 min 40 s"


def test_the_command_line_runs_a_group(tmp_path):
    import subprocess

    project = _project(tmp_path, {"one": ([], "a.txt", 0)})
    done = subprocess.run([sys.executable, "-m", "spacy_structpref", "side-by-side", "one", "--project", str(project),
                           "--vars.word", "w"], capture_output=True, text=True, cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "one: done" in done.stdout and (project / "a.txt").read_text().startswith("w ")

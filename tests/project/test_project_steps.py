"""The main job reports as it goes: every step of `spacy project run all`
timed (`timed`), and a last `summary` table of every step's time and key
figure; project.yml and .ci/run agree with it."""
import json
import re
import shlex
import subprocess
import sys

import pytest
import srsly
from spacy.tokens import Doc, DocBin

from spacy_structpref.cli.project_steps import (NEW_RUN_GAP, duration, group_members, is_summary, key_figure,
                                                record, run_timed, step_figure, summary)
from spacy_structpref.cli.side_by_side import step_order
from spacy_structpref.errors import StructPrefError
from tests.helpers.paths import ROOT


def test_duration():
    assert [duration(s) for s in (None, 4.4, 65, 3725)] == ["-", "4 s", "1 min 05 s", "1 h 02 min"]


def test_timed_runs_records_and_passes_the_status_on(tmp_path, capfd):
    timings = tmp_path / "times.json"
    assert run_timed("evaluate", ["python", "-c", "print('scored')"], timings) == 0
    assert run_timed("evaluate", ["python", "-c", "import sys; sys.exit(3)"], timings) == 3
    out = capfd.readouterr().out
    assert "scored" in out and re.search(r"⏱ evaluate: done in \d+ s\n", out)
    assert re.search(r"⏱ evaluate: failed in \d+ s \(step so far \d+ s\)", out)
    entry = json.loads(timings.read_text())["evaluate"]
    assert [c["status"] for c in entry["commands"]] == [0, 3] and entry["status"] == 3
    assert entry["commands"][0]["command"] == "python -c 'print('\"'\"'scored'\"'\"')'"
    assert entry["seconds"] == pytest.approx(sum(c["seconds"] for c in entry["commands"]), abs=0.11)
    with pytest.raises(StructPrefError, match="no command"):
        run_timed("evaluate", [], timings)


def test_a_step_run_again_starts_a_new_record(tmp_path):
    timings = tmp_path / "times.json"
    record("s", "a", 10.0, 0, start=1000.0, timings=timings)
    assert record("s", "b", 5.0, 0, start=1010.5, timings=timings)["seconds"] == 15.0   # the step's next line
    assert record("s", "a", 2.0, 0, start=1016.0, timings=timings)["seconds"] == 2.0    # its first line again
    entry = record("s", "c", 1.0, 0, start=1018.0 + NEW_RUN_GAP + 1, timings=timings)     # long after: a new run
    assert [c["command"] for c in entry["commands"]] == ["c"] and entry["seconds"] == 1.0
    timings.write_text("{")
    with pytest.raises(StructPrefError, match="not valid JSON"):
        record("s", "a", 1.0, 0, start=0.0, timings=timings)


def test_key_figures(tmp_path, nlp):
    parse = tmp_path / "parse.json"
    parse.write_text(json.dumps({"all": {"f1": 76.514}, "len<=40": {"f1": 77.43}}))
    assert key_figure(parse) == "F1 76.51, ≤40 77.43"
    tagger = tmp_path / "tagger.json"
    tagger.write_text(json.dumps({"tag_acc": 0.96129, "speed": 1000.0}))
    assert key_figure(tagger) == "TAG 96.13"
    textcat = tmp_path / "textcat.json"
    textcat.write_text(json.dumps({"parseval_f": 0.0, "cats_accuracy": 0.914, "cats_macro_f": 0.8812,
                                   "cats_held_out_acc": 0.8732, "speed": 9.0}))
    assert key_figure(textcat) == "CATS ACC 91.40, CATS MACRO F 88.12"  # spacy evaluate's: the test figures
    classifier = tmp_path / "kernel_textcat"
    classifier.mkdir()
    (classifier / "meta.json").write_text(json.dumps({"performance": {"cats_accuracy": 1.0, "cats_macro_f": 1.0,
                                                                      "cats_held_out_acc": 0.8732}}))
    assert key_figure(classifier) == "dev CATS HELD-OUT ACC 87.32"
    model = tmp_path / "model-best"
    model.mkdir()
    (model / "meta.json").write_text(json.dumps({"performance": {"parseval_f": 0.75, "parseval_f_40": 0.7612,
                                                                 "parse_fallbacks": 2}}))
    assert key_figure(model) == "dev PARSEVAL F 75.00, PARSEVAL F ≤40 76.12"
    curve = tmp_path / "learning_curve.json"
    curve.write_text(json.dumps({"metric": "tag_acc", "summary": [
        {"config": "distro", "fraction": 0.5, "mean": 90.0, "std": 1.0},
        {"config": "distro", "fraction": 1.0, "mean": 96.13, "std": 0.21},
        {"config": "ssvm", "fraction": 1.0, "mean": 96.19, "std": 0.04}]}))
    assert key_figure(curve) == "distro 96.13 ± 0.21; ssvm 96.19 ± 0.04 (tag_acc, all train)"
    rerank = tmp_path / "rerank.json"
    rows = [{"name": n, "<=40": {"F1": f}} for n, f in (("PCFG 1-best", 77.43), ("VP", 78.0), ("RNN", 77.9),
                                                         ("oracle", 90.27))]
    rerank.write_text(json.dumps({"rows": rows}))
    assert key_figure(rerank) == "F1 ≤40: PCFG 1-best 77.43, VP 78.00, oracle 90.27"
    attach = tmp_path / "attach.json"
    attach.write_text(json.dumps({"L": {"1": 16.86}, "rows": [
        {"tags": "gold", "search": "greedy", "f1_40": 66.24}, {"tags": "gold", "search": "beam", "f1_40": 68.14},
        {"tags": "tagger", "search": "greedy", "f1_40": 60.0}]}))
    assert key_figure(attach) == "F1 ≤40 greedy 66.24, beam 68.14; L_1 16.86 %"
    selection = tmp_path / "parser_selection.json"
    selection.write_text(json.dumps({"selected": "span", "metric": "parseval_f", "candidates": [
        {"model": "pcfg", "dev": {"parseval_f": 0.7612}}, {"model": "span", "dev": {"parseval_f": 0.8686}}]}))
    assert key_figure(selection) == "selected span (dev PARSEVAL F: pcfg 76.12, span 86.86)"
    grid = tmp_path / "protocol.json"
    point = {"lambda1": "0.0001", "lambda2": "0.1", "rank_setting": None, "seed": "0", "best": 96.4, "last": 96.21,
             "rank": 30, "labels": 45}
    chosen = {"lambda1": "0.0001", "lambda2": "0.1", "rank_setting": "31", "score": 96.21, "ranks": [30, 29],
              "labels": 45}
    grid.write_text(json.dumps({"use": "last", "grid": [point], "chosen": chosen, "test_acc": 96.05}))
    assert key_figure(grid) == "test 96.05, dev 96.21 at lambda1 0.0001, lambda2 0.1, d 31 (rank 30, 29 of 45)"
    grid.write_text(json.dumps({"use": "best", "grid": [point], "chosen": chosen, "test_acc": 96.05,
                                "seeds": ["0", "1"], "selection": "cross-validation"}))
    assert key_figure(grid) == ("test 96.05 (mean of 2 seeds), cross-validation 96.21 at lambda1 0.0001, "
                                "lambda2 0.1, d 31 (rank 30, 29 of 45)")
    (tmp_path / "broken.json").write_text("{")
    assert key_figure(tmp_path / "broken.json") == ""
    DocBin(docs=[Doc(nlp.vocab, words=["a"])] * 3).to_disk(tmp_path / "train.spacy")
    DocBin(docs=[Doc(nlp.vocab, words=["a"])]).to_disk(tmp_path / "dev.spacy")
    (tmp_path / "map.png").write_bytes(b"\x89PNG")
    assert step_figure(["train.spacy", "dev.spacy"], tmp_path) == "train 3 / dev 1 docs"
    assert step_figure(["parse.json", "map.png", "gone.png"], tmp_path) == \
        "F1 76.51, ≤40 77.43; wrote map.png; missing gone.png"


def test_summary_table(tmp_path):
    (tmp_path / "project.yml").write_text("""
title: t
vars:
  out: "metrics"
workflows:
  all: [convert, evaluate, summary]
commands:
  - name: convert
    script: ["python -m spacy_structpref timed convert -- python -c 'pass'"]
    outputs: ["corpus/train.spacy"]
  - name: evaluate
    script: ["python -m spacy_structpref timed evaluate -- python -c 'pass'"]
    outputs: ["${vars.out}/parse.json"]
  - name: summary
    script: ["python -m spacy_structpref summary"]
""")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "parse.json").write_text(json.dumps({"all": {"f1": 76.5}, "len<=40": {"f1": 77.4}}))
    record("evaluate", "python -c pass", 125.0, 0, start=1000.0, timings=tmp_path / "metrics" / "step_times.json")
    text = summary(tmp_path)
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "2 min 05 s" in rows["evaluate"] and "ok" in rows["evaluate"] and "F1 76.50, ≤40 77.40" in rows["evaluate"]
    assert "not timed" in rows["convert"] and "missing corpus/train.spacy" in rows["convert"]
    assert "summary" not in rows and re.match(r"total +2 min 05 s", rows["total"])
    with pytest.raises(StructPrefError, match="no workflow 'main'"):
        summary(tmp_path, "main")
    cli = subprocess.run([sys.executable, "-m", "spacy_structpref", "summary", "--project", str(tmp_path)],
                         capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout.rstrip().splitlines()[-1].startswith("total")


def _project():
    from weasel.util import load_project_config

    return load_project_config(ROOT)  # variables filled in


@pytest.mark.parametrize("workflow", ["all", "paper"])
def test_every_step_is_timed_and_the_summary_ends_the_workflow(workflow):
    project = _project()
    steps = project["workflows"][workflow]
    commands = {c["name"]: c for c in project["commands"]}
    assert commands[steps[-1]]["script"] == [f"python -m spacy_structpref summary --workflow {workflow}"]
    assert is_summary(commands[steps[-1]]) and not any(is_summary(commands[s]) for s in steps[:-1])
    for step in steps[:-1]:
        for line in commands[step]["script"]:
            words = shlex.split(line)
            assert words[:6] == ["python", "-m", "spacy_structpref", "timed", step, "--"], line


def _expanded(steps: list, commands: dict) -> list:
    """A workflow's steps with each side-by-side group replaced by its members."""
    return [member for step in steps
            for member in ([m for line in commands[step]["script"] for m in group_members(line)] or [step])]


def test_the_main_job_makes_the_package_and_leaves_the_papers_tables_to_paper():
    project = _project()
    commands = {c["name"]: c for c in project["commands"]}
    steps, paper = (_expanded(project["workflows"][w], commands) for w in ("all", "paper"))
    for step in ("select-parser", "package", "train-kernel-textcat-tree", "report"):
        assert step in steps
    group = next(s for s in project["workflows"]["all"] if _expanded([s], commands) != [s])
    waits = step_order(commands, _expanded([group], commands))
    # the parser is chosen between the two rerankers, each trained on its own parser's lists
    assert {"train-parse-reranker", "train-span-reranker"} <= waits["select-parser"]
    assert "span-rerank-lists" in waits["train-span-reranker"] and "rerank-lists" in waits["train-parse-reranker"]
    assert steps.index("package") > max(steps.index(s) for s in ("train-parse-reranker", "select-parser",
                                                                 "train-attachment-predictor"))
    assert any(o.startswith("packages/") and o.endswith(".tar.gz") for o in commands["package"]["outputs"])
    for table in ("tagger-learning-curve", "rerank-table", "attachment-tables", "attachment-pca",
                  "train-distro-brown", "textcat-bench", "qc-distro"):
        assert table in paper and table not in steps
    # the product's components and pictures are not the papers' tables
    for product in ("train-attachment-predictor", "attachment-alternatives", "train-kernel-textcat-forest"):
        assert product not in paper
    assert "attachment-alternatives" in steps and "train-attachment-predictor" in waits["attachment-alternatives"]
    # Brown's learning curves are a workflow of their own, not part of `paper`'s time
    brown_curve = _expanded(project["workflows"]["brown-curve"], commands)
    assert "brown-learning-curve" in brown_curve and "brown-learning-curve" not in paper
    # Brown's tags are the paper's: in `all` only the span CRF's word vectors read Brown (its raw text)
    assert {step for step in steps for dep in commands[step].get("deps", []) if "corpus/brown" in dep} \
        == {"train-vectors"}


def test_a_short_run_caps_every_iterative_training():
    """Every ``spacy train`` of the project whose config trains by steps
    (evaluating every ``eval_frequency`` > 1 steps) passes the ``max_steps``
    variable on, so that a short run (CI's) is short in every workflow."""
    from spacy.util import load_config

    project = _project()
    max_steps = str(project["vars"]["max_steps"])
    uncapped = []
    for command in project["commands"]:
        for line in command["script"]:
            words = shlex.split(line)
            if "--" not in words or words[words.index("--") + 1:][:4] != ["python", "-m", "spacy", "train"]:
                continue
            config = load_config(ROOT / words[words.index("--") + 5], interpolate=False)
            if config["training"]["eval_frequency"] > 1:
                option = words.index("--training.max_steps") if "--training.max_steps" in words else None
                if option is None or words[option + 1] != max_steps:
                    uncapped.append(command["name"])
    assert not uncapped, f"trainings a short run does not cap: {uncapped}"


def test_ci_checks_what_the_workflow_writes():
    """.ci/run checks files that steps of `all` write, and the step times of `all`."""
    ci = (ROOT / ".ci" / "run").read_text()
    project = _project()
    commands = {c["name"]: c for c in project["commands"]}
    steps = _expanded(project["workflows"]["all"], commands)
    outputs = {o for c in project["commands"] if c["name"] in steps for o in c.get("outputs", [])}
    checked = re.findall(r"test -s (\S+)", ci)
    assert checked and set(checked) <= outputs, set(checked) - outputs
    assert "project run all" in ci and "metrics/step_times.json" in ci and "^total" in ci


def test_timed_command_line_passes_options_and_status_on(tmp_path):
    """Options after -- belong to the timed command, and its exit status is ours."""
    base = [sys.executable, "-m", "spacy_structpref", "timed", "step", "--timings", str(tmp_path / "t.json"), "--"]
    ok = subprocess.run(base + ["python", "-c", "import sys; print(sys.argv[1:])", "--output", "y"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "['--output', 'y']" in ok.stdout
    failed = subprocess.run(base + ["python", "-c", "raise SystemExit(4)"], capture_output=True, text=True)
    assert failed.returncode == 4 and "⏱ step: failed" in failed.stdout

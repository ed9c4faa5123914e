"""Step times and the end-of-run summary of the spaCy project's main job.

``python -m spacy_structpref timed STEP -- COMMAND …`` runs one script line
of a project command, prints how long it took and records it under STEP in
``metrics/step_times.json``; ``python -m spacy_structpref summary`` (the
last step of ``spacy project run all``) prints every step of the workflow
with its time and its key figure, read from the outputs ``project.yml``
declares for it (metrics JSON, trained pipelines' dev scores, corpus sizes).
"""
import fcntl
import json
import shlex
import subprocess
import sys
import time
from itertools import takewhile
from pathlib import Path
from typing import Dict, List, Optional

from ..errors import StructPrefError
from ..saving import atomic_file
from .score_names import SCORE_NAMES, format_score

TIMINGS = Path("metrics") / "step_times.json"
# Script lines of one step run back to back: a line that starts longer than
# this after the step's last one ended (or repeats a recorded line) begins a new run of the step.
NEW_RUN_GAP = 30.0


def duration(seconds: Optional[float]) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _read_timings(path: Path) -> Dict[str, dict]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except ValueError as err:
        raise StructPrefError(f"{path} is not valid JSON ({err}); delete it to start the step times afresh")


def record(step: str, command: str, seconds: float, status: int, start: float,
           timings: Path = TIMINGS) -> dict:
    """Add one script line's time to ``step``'s record in ``timings`` and
    return the record: ``seconds`` (the step's lines so far), ``status``
    (the first non-zero exit status, else 0), ``finished`` (Unix time) and
    ``commands``."""
    timings = Path(timings)
    timings.parent.mkdir(parents=True, exist_ok=True)
    # steps run side by side record into the same file: one read-modify-write at a time
    with open(timings.with_name(timings.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _record(step, command, seconds, status, start, timings)


def _record(step: str, command: str, seconds: float, status: int, start: float, timings: Path) -> dict:
    data = _read_timings(timings)
    entry = data.get(step)
    if (entry is None or start - entry["finished"] > NEW_RUN_GAP
            or command in [c["command"] for c in entry["commands"]]):
        entry = {"seconds": 0.0, "status": 0, "commands": []}
    entry["commands"].append({"command": command, "seconds": round(seconds, 1), "status": status})
    entry["seconds"] = round(entry["seconds"] + seconds, 1)
    entry["status"] = entry["status"] or status
    entry["finished"] = start + seconds
    data[step] = entry
    with atomic_file(timings) as tmp:
        tmp.write_text(json.dumps(data, indent=2), encoding="utf8")
    return entry


def interpreter_command(command: List[str]) -> List[str]:
    """``command`` with ``python``/``pip`` read as the project runner reads
    them: this interpreter (and its pip)."""
    run = list(command)
    if run and run[0] in ("python", "python3"):
        run = [sys.executable, *run[1:]]
    elif run and run[0] in ("pip", "pip3"):
        run = [sys.executable, "-m", "pip", *run[1:]]
    return run


def run_timed(step: str, command: List[str], timings: Path = TIMINGS) -> int:
    """Run ``command`` (``python``/``pip`` as the project runner reads them:
    this interpreter), its output going straight through; record its time
    under ``step`` and print it. Returns the command's exit status."""
    if not command:
        raise StructPrefError(f"timed {step}: no command to run (put it after --)")
    run = interpreter_command(command)
    start = time.time()
    try:
        status = subprocess.run(run).returncode
    except OSError as err:
        raise StructPrefError(f"timed {step}: cannot run {run[0]!r} ({err})")
    seconds = time.time() - start
    entry = record(step, shlex.join(command), seconds, status, start, timings)
    state = "failed" if status else "done"
    print(f"⏱ {step}: {state} in {duration(seconds)}"
          + (f" (step so far {duration(entry['seconds'])})" if len(entry["commands"]) > 1 else ""), flush=True)
    return status


# ------------------------------------------------------------------ figures
# the scores a summary row shows (a trained pipeline's dev scores, spacy evaluate's JSON); a
# classifier's alone where it has them (a parser before it is a means, scored on no gold trees);
# of a trained pipeline's, the held-out accuracy alone where there is one (kernel_textcat's dev
# questions are among those its SVMs were refit on)
KEY_SCORES = ("tag_acc", "parseval_f", "parseval_f_40", "attach_acc")
CLASSIFIER_SCORES = ("cats_accuracy", "cats_macro_f")
HELD_OUT_SCORES = ("cats_held_out_acc",)


def _scores(scores: dict, held_out: bool = False) -> str:
    groups = (HELD_OUT_SCORES, CLASSIFIER_SCORES) if held_out else (CLASSIFIER_SCORES,)
    keys = next((keys for keys in groups if any(k in scores for k in keys)), KEY_SCORES)
    return ", ".join(f"{SCORE_NAMES[k]} {format_score(scores[k])}" for k in keys
                     if k in scores and isinstance(scores[k], float))


def json_form(data) -> str:
    """Which of this project's metrics files ``data`` (parsed JSON) is, by its
    form: ``learning_curve`` (learning_curve.json), ``parseval``
    (evaluate-parse), ``reranker`` (a reranking table's rows, first the
    1-best, last the oracle), ``incremental`` (the incremental parser's
    rows), ``attachment_tables``, ``spacy_scores`` (spacy evaluate),
    ``parser_selection`` (select-parser), ``setting_grid`` (a grid of
    settings chosen on dev, bench/distro_grid.py) or ``other``."""
    if not isinstance(data, dict):
        return "other"
    if "summary" in data and "metric" in data:
        return "learning_curve"
    if "all" in data and "len<=40" in data:
        return "parseval"
    rows = data.get("rows")
    if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
        if all("name" in r and "<=40" in r for r in rows):
            return "reranker"
        if all("f1_40" in r for r in rows):
            return "incremental"
    if "settings" in data and ("table1" in data or "subset_tables" in data):
        return "attachment_tables"
    if "speed" in data:
        return "spacy_scores"
    if "selected" in data and isinstance(data.get("candidates"), list):
        return "parser_selection"
    if isinstance(data.get("grid"), list) and isinstance(data.get("chosen"), dict):
        return "setting_grid"
    return "other"


def _json_figure(data) -> str:
    """The key figure of a metrics JSON file of this project, by its form."""
    if not isinstance(data, dict):
        return ""
    form = json_form(data)
    if form == "learning_curve":  # the largest training set
        rows = data["summary"]
        last = max((r["fraction"] for r in rows), default=None)
        return "; ".join(f"{r['config']} {r['mean']:.2f} ± {r['std']:.2f}" for r in rows
                         if r["fraction"] == last) + (f" ({data['metric']}, all train)" if rows else "")
    if form == "parseval":
        return f"F1 {data['all']['f1']:.2f}, ≤40 {data['len<=40']['f1']:.2f}"
    rows = data.get("rows")
    if form == "reranker":
        best = max(rows[1:-1] or rows[:1], key=lambda r: r["<=40"]["F1"])
        return (f"F1 ≤40: {rows[0]['name']} {rows[0]['<=40']['F1']:.2f}, {best['name']} "
                f"{best['<=40']['F1']:.2f}, {rows[-1]['name']} {rows[-1]['<=40']['F1']:.2f}")
    if form == "incremental":
        gold = [r for r in rows if r.get("tags") == "gold"] or rows
        text = ", ".join(f"{r.get('search', '')} {r['f1_40']:.2f}" for r in gold)
        loss = (data.get("L") or {}).get("1")
        return f"F1 ≤40 {text}" + (f"; L_1 {loss:.2f} %" if loss is not None else "")
    if form == "parser_selection":
        metric = data["metric"]
        return f"selected {data['selected']} (dev {SCORE_NAMES.get(metric, metric)}: " + ", ".join(
            f"{c['model']} {format_score(c['dev'][metric])}" for c in data["candidates"]) + ")"
    if form == "setting_grid":
        chosen = data["chosen"]
        n_seeds = len(data.get("seeds") or [0])
        of_seeds = f" (mean of {n_seeds} seeds)" if n_seeds > 1 else ""
        test = "" if data.get("test_acc") is None else f"test {data['test_acc']:.2f}{of_seeds}, "
        d = "" if chosen.get("rank_setting") is None else f", d {chosen['rank_setting']}"
        ranks = ", ".join(str(rank) for rank in chosen["ranks"])
        return (f"{test}{data.get('selection', 'dev')} {chosen['score']:.2f} at lambda1 {chosen['lambda1']}, "
                f"lambda2 {chosen['lambda2']}{d} (rank {ranks} of {chosen['labels']})")
    return _scores(data)


def key_figure(path: Path) -> str:
    """What an output of a step shows in one line ('' when nothing is known)."""
    if path.is_dir():
        meta = path / "meta.json"
        if meta.exists():
            scores = _scores(json.loads(meta.read_text(encoding="utf8")).get("performance") or {}, held_out=True)
            return f"dev {scores}" if scores else ""
        return ""
    if path.suffix == ".json":
        try:
            return _json_figure(json.loads(path.read_text(encoding="utf8")))
        except (ValueError, KeyError, TypeError):
            return ""
    return ""


def step_figure(outputs: List[str], root: Path) -> str:
    """The key figures of a step's outputs: corpus files give their Doc
    counts, files without a figure are named or counted."""
    from spacy.tokens import DocBin

    docs, figures, files, missing = [], [], [], []
    for output in outputs:
        path = root / output
        if not path.exists():
            missing.append(output)
        elif path.suffix == ".spacy":
            docs.append(f"{path.stem} {len(DocBin().from_disk(path)):,}")
        else:
            figure = key_figure(path)
            (figures if figure else files).append(figure or output)
    parts = ([" / ".join(docs) + " docs"] if docs else []) + figures
    if files:
        parts.append(f"wrote {files[0]}" if len(files) == 1 else f"wrote {len(files)} files")
    if missing:
        parts.append(f"missing {missing[0]}" if len(missing) == 1 else f"missing {len(missing)} outputs")
    return "; ".join(parts)


def group_members(script_line: str) -> List[str]:
    """The steps a ``side-by-side`` script line runs (empty for any other
    line, also under ``timed``): its arguments before the first option."""
    words = shlex.split(script_line)
    starts = [i + 2 for i in range(len(words) - 1) if words[i:i + 2] == ["spacy_structpref", "side-by-side"]]
    if not starts:
        return []
    return list(takewhile(lambda word: not word.startswith("-"), words[starts[0]:]))


def is_summary(command: Optional[dict]) -> bool:
    """Whether a project command prints this table (a workflow's last step)."""
    return bool(command) and any(line.split()[:4] == ["python", "-m", "spacy_structpref", "summary"]
                                 for line in command.get("script", []))


SUMMARY_HEADER = ("step", "time", "finished", "status", "key figure")
SUMMARY_ALIGNS = ("l", "r", "l", "l", "l")


def summary_rows(project_dir: Path = Path("."), workflow: str = "all", timings: Optional[Path] = None) -> list:
    """The rows of :func:`summary`'s table (:data:`SUMMARY_HEADER`), the
    last one the total time."""
    from weasel.util import load_project_config

    project_dir = Path(project_dir)
    config = load_project_config(project_dir)
    if workflow not in config.get("workflows", {}):
        raise StructPrefError(f"project.yml has no workflow {workflow!r} "
                              f"(it has {', '.join(config.get('workflows', {}))})")
    commands = {c["name"]: c for c in config.get("commands", [])}
    times = _read_timings(project_dir / (timings or TIMINGS))
    rows, total = [], 0.0
    def row(step: str, name: str) -> list:
        entry = times.get(step)
        outputs = commands[step].get("outputs", []) if step in commands else []
        if entry is None:
            when, state = "-", "not timed"
        else:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry["finished"]))
            state = f"failed ({entry['status']})" if entry["status"] else "ok"
        return [name, duration(entry and entry["seconds"]), when, state, step_figure(outputs, project_dir)]

    for step in config["workflows"][workflow]:
        if is_summary(commands.get(step)):  # this table
            continue
        rows.append(row(step, step))
        total += times.get(step, {}).get("seconds", 0.0)
        # a group's steps ran side by side within its time: listed under it, not added to the total
        members = [m for line in commands.get(step, {}).get("script", []) for m in group_members(line)]
        rows.extend(row(member, f"  ↳ {member}") for member in members)
    rows.append(["total", duration(total), "", "", ""])
    return rows


def summary(project_dir: Path = Path("."), workflow: str = "all", timings: Optional[Path] = None) -> str:
    """The table of every step of ``workflow``: its recorded time (and when
    it finished: an old time is a step skipped this run, nothing having
    changed), its exit status and its key figure (:func:`summary_rows`)."""
    from wasabi import table

    return table(summary_rows(project_dir, workflow, timings), header=SUMMARY_HEADER, divider=True,
                 aligns=SUMMARY_ALIGNS, max_col=40)


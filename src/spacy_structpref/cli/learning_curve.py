"""Learning curves: train one or more spaCy configs on growing, nested
fractions of a training corpus with several seeds, evaluate every run on a
test corpus, and print / save / draw the mean ± standard deviation per
fraction. With the DISTRO and the one-hot SSVM configs this is the
comparison of Srikumar & Manning (2014) at every training-set size, each
point a mean of seeds.

Every run is an ordinary ``python -m spacy train`` followed by ``python -m
spacy evaluate`` in a subprocess (so runs can go in parallel and a crash
stays in its own log), and a finished run is not repeated: rerunning the
command with the same arguments resumes where it stopped.
"""
import json
import math
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..corpora.assets import md5
from ..errors import StructPrefError
from ..saving import atomic_file, partial_path

SUBSET_SEED = 0  # one fixed order of the training Docs: the subsets are nested


def _check_inputs(configs: Sequence[Path], train_path: Path, test_path: Path,
                  fractions: Sequence[float], seeds: Sequence[int], n_jobs: int,
                  plot: Path) -> None:
    for path in [*configs, train_path, test_path]:
        if not Path(path).exists():
            raise StructPrefError(f"{path} does not exist")
    if not configs:
        raise StructPrefError("give at least one training config")
    names = [Path(c).stem for c in configs]
    if len(set(names)) != len(names):
        raise StructPrefError(f"config file names must differ (they name the curves): {names}")
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        raise StructPrefError(f"fractions must lie in (0, 1], got {list(fractions)}")
    if not seeds:
        raise StructPrefError("give at least one seed")
    if n_jobs < 1:
        raise StructPrefError(f"n_jobs must be >= 1, got {n_jobs}")
    if plot.suffix not in (".png", ".svg"):
        raise StructPrefError(f"the plot must be a .png or .svg file, got {plot}")


def main_metric(config_path: Path) -> str:
    """The score with the highest weight in the config's ``[training.score_weights]``."""
    from spacy.util import load_config

    weights = load_config(config_path, interpolate=False)["training"].get("score_weights") or {}
    weighted = {k: v for k, v in weights.items() if v}
    if not weighted:
        raise StructPrefError(f"{config_path} has no [training.score_weights]; pass --metric")
    return max(weighted, key=weighted.get)


def write_subsets(train_path: Path, fractions: Sequence[float], out_dir: Path) -> Dict[float, dict]:
    """Nested random subsets of the training Docs (one fixed shuffle), written
    as ``train_<fraction>.spacy``. Returns {fraction: {"path", "docs", "tokens"}}."""
    import spacy

    from ..trees.doc import read_docs, write_docs

    docs = read_docs(train_path, spacy.blank("xx").vocab)
    if not docs:
        raise StructPrefError(f"{train_path} holds no Docs")
    random.Random(SUBSET_SEED).shuffle(docs)
    out_dir.mkdir(parents=True, exist_ok=True)
    subsets = {}
    for fraction in sorted(set(fractions)):
        subset = docs[: max(1, math.ceil(fraction * len(docs)))]
        path = out_dir / f"train_{fraction:g}.spacy"
        write_docs(subset, path)
        subsets[fraction] = {"path": str(path), "docs": len(subset),
                             "tokens": sum(len(d) for d in subset),
                             "md5": md5(path)}
    return subsets


def _plan(config: Path, train: dict, test_path: Path, seed: int, run_dir: Path,
          overrides: Sequence[str], gold_preproc: bool, fingerprints: Dict[str, str]) -> dict:
    """One run on the subset ``train`` (see :func:`write_subsets`): its
    ``run_dir``, train and evaluate commands, and the record that identifies
    them (commands and the md5 of config, train and test data:
    ``fingerprints`` maps the config and test paths to theirs)."""
    python = [sys.executable, "-m", "spacy"]
    train_cmd = [*python, "train", str(config), "--output", str(run_dir / "model"),
                 "--paths.train", train["path"], "--system.seed", str(seed), *overrides]
    # spacy evaluate writes where atomic_file (in _run) expects it
    eval_cmd = [*python, "evaluate", str(run_dir / "model" / "model-best"), str(test_path),
                "--output", str(partial_path(run_dir / "scores.json"))]
    eval_cmd += ["--gold-preproc"] if gold_preproc else []
    # the interpreter path is left out so that a new virtual environment can resume
    recorded = {"train": train_cmd[1:], "evaluate": eval_cmd[1:], "train_md5": train["md5"],
                "test_md5": fingerprints[str(test_path)], "config_md5": fingerprints[str(config)]}
    return {"run_dir": run_dir, "train_cmd": train_cmd, "eval_cmd": eval_cmd, "recorded": recorded}


def _finished(run_dir: Path, recorded: dict) -> Optional[dict]:
    """The scores of a run that already finished in ``run_dir`` with the same
    commands on the same data (None: it has to run)."""
    scores_path, commands_path = run_dir / "scores.json", run_dir / "commands.json"
    if scores_path.exists() and commands_path.exists() and \
            json.loads(commands_path.read_text()) == recorded:
        return json.loads(scores_path.read_text())
    return None


def _run(run_dir: Path, train_cmd: list, eval_cmd: list, recorded: dict) -> dict:
    """Train and evaluate one run (see :func:`_plan`), unless it already
    finished (:func:`_finished`): a changed config, override or data means
    the run is redone. The scores get the run's wall-clock ``seconds``."""
    done = _finished(run_dir, recorded)
    if done is not None:
        return done
    scores_path, commands_path = run_dir / "scores.json", run_dir / "commands.json"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    log = run_dir / "run.log"
    start = time.perf_counter()
    with atomic_file(scores_path) as tmp:
        with log.open("w", encoding="utf8") as out:
            for cmd in (train_cmd, eval_cmd):
                out.write("$ " + " ".join(cmd) + "\n")
                out.flush()
                if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode:
                    tail = log.read_text(encoding="utf8").splitlines()[-15:]
                    raise StructPrefError(f"run {run_dir} failed; end of {log}:\n"
                                          + "\n".join(tail))
        scores = json.loads(tmp.read_text())
        scores["seconds"] = round(time.perf_counter() - start, 1)
        tmp.write_text(json.dumps(scores), encoding="utf8")
        commands_path.write_text(json.dumps(recorded), encoding="utf8")
    return scores


def summarize(runs: List[dict]) -> List[dict]:
    """Mean and sample standard deviation per (config, fraction)."""
    groups: Dict[tuple, List[dict]] = {}
    for run in runs:
        groups.setdefault((run["config"], run["fraction"]), []).append(run)
    rows = []
    for (config, fraction), members in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        scores = [m["score"] for m in members]
        mean, std = statistics.mean(scores), statistics.stdev(scores) if len(scores) > 1 else 0.0
        rows.append({"config": config, "fraction": fraction, "tokens": members[0]["tokens"],
                     "mean": mean, "std": std, "n": len(members),
                     "seeds": [m["seed"] for m in members]})
    return rows


def table_rows(summary: List[dict]) -> tuple:
    """``(header, rows)``: fractions as rows, one ``mean ± std`` column per
    config and, for two configs, their difference (first − second)."""
    configs = list(dict.fromkeys(r["config"] for r in summary))
    by_key = {(r["config"], r["fraction"]): r for r in summary}
    fractions = sorted({r["fraction"] for r in summary})
    header = ["fraction", "tokens", *configs] + (["difference"] if len(configs) == 2 else [])
    data = []
    for f in fractions:
        cells = [by_key.get((c, f)) for c in configs]
        tokens = next(r["tokens"] for r in cells if r)
        row = [f"{f:g}", f"{tokens:,}"]
        row += [f"{r['mean']:.2f} ± {r['std']:.2f} (n={r['n']})" if r else "-" for r in cells]
        if len(configs) == 2:
            row.append(f"{cells[0]['mean'] - cells[1]['mean']:+.2f}" if all(cells) else "-")
        data.append(row)
    return header, data


def table(summary: List[dict], metric: str) -> str:
    """:func:`table_rows` as a wasabi table, titled with the metric."""
    from wasabi import table as wasabi_table

    header, data = table_rows(summary)
    return f"{metric} (× 100)\n" + wasabi_table(data, header=header, divider=True)


def draw(summary: List[dict], metric: str, output: Path) -> Path:
    """Mean ± std against training tokens (log scale), one line per config."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for config in dict.fromkeys(r["config"] for r in summary):
        rows = [r for r in summary if r["config"] == config]
        x = [r["tokens"] for r in rows]
        y = [r["mean"] for r in rows]
        err = [r["std"] for r in rows]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=config)
    ax.set_xscale("log")
    ax.set_xlabel("training tokens")
    ax.set_ylabel(f"test {metric} (× 100)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_file(output) as tmp:
        fig.savefig(tmp, dpi=150)
    plt.close(fig)
    return output


# a row of spacy train's console table: epoch, step, then losses and scores
TRAINING_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+[-+\d.]")


def training_limits(config: Path, overrides: Sequence[str] = ()) -> Tuple[int, int]:
    """``(max_epochs, max_steps)`` of ``spacy train config`` with ``overrides``
    (``--training.max_epochs 10`` or ``--training.max_epochs=10``)."""
    from spacy.util import load_config

    training = load_config(config, interpolate=False)["training"]
    limits = {"max_epochs": int(training.get("max_epochs", 0)), "max_steps": int(training.get("max_steps", 0))}
    args = list(overrides)
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        key = name[len("--training."):] if name.startswith("--training.") else None
        if key in limits:
            value = value if value else (args[i + 1] if i + 1 < len(args) else "")
            try:
                limits[key] = int(value)
            except ValueError:
                raise StructPrefError(f"{name} must be a whole number, got {value!r}") from None
    return limits["max_epochs"], limits["max_steps"]


def logged_fraction(log: Path, max_epochs: int, max_steps: int) -> float:
    """How far a running ``spacy train`` is, from the last row of the table it
    prints at each dev evaluation (``log``): epochs finished of ``max_epochs``
    or steps of ``max_steps`` (0: no limit), whichever is further; 0 before
    the first row."""
    try:
        lines = Path(log).read_text(encoding="utf8", errors="replace").splitlines()
    except OSError:
        return 0.0
    rows = [m for m in map(TRAINING_ROW.match, lines) if m]
    if not rows:
        return 0.0
    epoch, step = int(rows[-1].group(1)), int(rows[-1].group(2))
    parts = ([epoch / max_epochs] if max_epochs > 0 else []) + ([(step + 1) / (max_steps + 1)] if max_steps > 0 else [])
    return min(1.0, max(parts, default=0.0))


class TokenProgress:
    """What the progress bar counts: the training tokens of the finished runs
    plus, for each running run, half the tokens it would have trained on so
    far at the per-run token rate of the finished runs (half its size at
    most), or, where it says more, the share of its tokens its training log
    shows done (``fraction``: from the first logged epoch, before any run
    has finished). Runs go ``n_jobs`` at a time and the first ones end together:
    counting finished runs alone, the first run's end shows one run's tokens
    for ``n_jobs`` runs' work and the ETA comes out 1.7-1.8× the time left.
    Crediting running runs in full overshoots instead, since runs of one size
    differ by ±20 % (the SSVM's take longer than DISTRO's; later seeds meet a
    busier machine): a run counts as done while it still runs, and the ETA
    fell to a third of the time left during the last run of the TREC curve.
    Half the credit kept the ETA within 0.92-1.49× (PTB curve, 17 min) and
    0.76-1.40× (TREC curve, 8 min) of the time left, every 5 s while a tenth
    of the run was left, replaying both runs' measured times (finished runs
    only: up to 2.5× and 2.9×). Thread-safe: runs start in the pool's threads."""

    def __init__(self, tokens: Dict[tuple, int], fraction: Optional[Callable[[tuple], float]] = None):
        self.tokens, self.fraction = tokens, fraction
        self.started: Dict[tuple, float] = {}
        self.done_tokens, self.done_seconds = 0, 0.0
        self._lock = threading.Lock()

    def start(self, job, now: float) -> None:
        with self._lock:
            self.started[job] = now

    def finish(self, job, now: float) -> None:
        with self._lock:
            self.done_tokens += self.tokens[job]
            self.done_seconds += now - self.started.pop(job)

    def count(self, now: float) -> float:
        with self._lock:
            rate = self.done_tokens / self.done_seconds if self.done_seconds else 0.0  # tokens/s of one run
            running = 0.0
            for job, t in self.started.items():
                timed = min(self.tokens[job], (now - t) * rate) / 2
                logged = self.tokens[job] * self.fraction(job) if self.fraction else 0.0
                running += max(timed, logged)
            return self.done_tokens + running


def _run_all(jobs: list, plans: list, one: Callable, tokens: Dict[tuple, int], n_jobs: int,
             progress: bool, refresh: float = 5.0, fraction: Optional[Callable[[tuple], float]] = None) -> List[dict]:
    """``one(job, plan)`` for every job, ``n_jobs`` at a time, in order;
    results in job order. The progress bar counts training tokens (runs
    resumed from an earlier call start it; running runs count as
    :class:`TokenProgress` estimates), redrawn every ``refresh`` seconds, and
    its ETA is the mean rate of that count since the start (``smoothing=0``);
    see :func:`job_order` for why that rate holds; ``fraction(job)``: how
    far a running job's training is (:func:`logged_fraction`). Not on a
    terminal, the bar is a status line every half minute. The first failure
    cancels the runs not started yet."""
    from ..progress import progress_bar

    resumed = {job for job, plan in zip(jobs, plans) if _finished(plan["run_dir"], plan["recorded"]) is not None}
    counted = TokenProgress({job: tokens[job] for job in jobs if job not in resumed}, fraction)
    initial = sum(tokens[job] for job in resumed)

    def timed_one(job, plan):
        if job in counted.tokens:
            counted.start(job, time.perf_counter())
        return one(job, plan)

    with ThreadPoolExecutor(max_workers=n_jobs) as pool, \
            progress_bar(total=sum(tokens.values()), initial=initial, desc="learning curve",
                         unit="tok", unit_scale=True, smoothing=0, disable=not progress) as bar:
        futures = {pool.submit(timed_one, job, plan): job for job, plan in zip(jobs, plans)}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=refresh, return_when=FIRST_COMPLETED)
                now = time.perf_counter()
                for future in done:
                    future.result()
                    if futures[future] in counted.tokens:
                        counted.finish(futures[future], now)
                bar.n = initial + counted.count(now)
                bar.refresh()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return [future.result() for future in futures]


def job_order(configs: Sequence[Path], fractions: Sequence[float], seeds: Sequence[int]) -> List[tuple]:
    """(config, fraction, seed) runs seed by seed, each seed's pass from the
    largest training set down. Each pass completes a whole curve, so one
    stands after a third of the time with three seeds. And the progress
    bar's token rate holds: a run's time grows with its training tokens but
    far less than in proportion (fixed costs of starting, evaluating and
    saving; patience stops the large runs early: on the PTB sample an eighth
    of train takes ~90 s, all of it ~150-200 s, not 8× as long), so a rate
    measured on small runs first would promise 2-4× too long; measured on
    the large runs first, with the running runs counted (:class:`TokenProgress`),
    it holds to within 50 % of the time left."""
    return [(config, fraction, seed) for seed in seeds for fraction in sorted(set(fractions), reverse=True)
            for config in configs]


def learning_curve(configs: Sequence[Path], output_dir: Path, *, train_path: Path,
                   test_path: Path, fractions: Sequence[float] = (0.125, 0.25, 0.5, 1.0),
                   seeds: Sequence[int] = (0, 1, 2), n_jobs: int = 1,
                   overrides: Sequence[str] = (), metric: Optional[str] = None,
                   gold_preproc: bool = True, plot: Optional[Path] = None,
                   progress: bool = True) -> dict:
    """Train every config on every fraction with every seed (resuming finished
    runs), evaluate on ``test_path`` and write ``learning_curve.json`` (runs
    and summary) plus a plot (``plot``, default ``learning_curve.png``) into
    ``output_dir``. ``overrides`` are extra ``spacy train`` arguments
    (``--training.max_epochs 10``). Returns the JSON content."""
    configs = [Path(c) for c in configs]
    output_dir = Path(output_dir)
    plot = Path(plot) if plot else output_dir / "learning_curve.png"
    _check_inputs(configs, Path(train_path), Path(test_path), fractions, seeds, n_jobs, plot)
    metric = metric or main_metric(configs[0])
    subsets = write_subsets(Path(train_path), fractions, output_dir / "data")
    jobs = job_order(configs, sorted(subsets), seeds)
    fingerprints = {str(p): md5(p) for p in [*configs, Path(test_path)]}
    plans = [_plan(config, subsets[fraction], Path(test_path), seed,
                   output_dir / "runs" / config.stem / f"fraction_{fraction:g}_seed_{seed}",
                   overrides, gold_preproc, fingerprints) for config, fraction, seed in jobs]

    def one(job, plan):
        config, fraction, seed = job
        run_dir = plan["run_dir"]
        scores = _run(**plan)
        if scores.get(metric) is None:
            raise StructPrefError(f"{run_dir}: the evaluation has no score {metric!r} "
                                  f"(it has {sorted(scores)})")
        return {"config": config.stem, "fraction": fraction, "seed": seed,
                "tokens": subsets[fraction]["tokens"], "score": 100.0 * scores[metric],
                "seconds": scores.get("seconds")}

    limits = {config: training_limits(config, overrides) for config in configs}
    logs = {job: plan["run_dir"] / "run.log" for job, plan in zip(jobs, plans)}
    runs = _run_all(jobs, plans, one, {job: subsets[job[1]]["tokens"] for job in jobs}, n_jobs, progress,
                    fraction=lambda job: logged_fraction(logs[job], *limits[job[0]]))
    summary = summarize(runs)
    result = {"metric": metric, "test": str(test_path), "train": str(train_path),
              "overrides": list(overrides), "runs": runs, "summary": summary}
    with atomic_file(output_dir / "learning_curve.json") as tmp:
        tmp.write_text(json.dumps(result, indent=2), encoding="utf8")
    result["plot"] = str(draw(summary, metric, plot))
    result["table"] = table(summary, metric)
    return result

import json
import re
import statistics
import time
from pathlib import Path

import pytest
from spacy.tokens import DocBin

from spacy_structpref.cli.convert import convert
from spacy_structpref import progress as progress_module
from spacy_structpref.cli.learning_curve import (TokenProgress, _run_all, job_order, learning_curve, logged_fraction,
                                                 summarize, table, training_limits, write_subsets)
from spacy_structpref.errors import StructPrefError

from tests.helpers.paths import CONFIGS


@pytest.fixture(scope="module")
def tiny_ptb(tmp_path_factory):
    out = tmp_path_factory.mktemp("ptb")
    convert("ptb", out, limit=12)
    return out


def test_subsets_are_nested_and_sized(tiny_ptb, tmp_path, nlp):
    subsets = write_subsets(tiny_ptb / "train.spacy", [1.0, 0.25, 0.5], tmp_path)
    docs = {f: list(DocBin().from_disk(s["path"]).get_docs(nlp.vocab)) for f, s in subsets.items()}
    texts = {f: [d.text for d in ds] for f, ds in docs.items()}
    assert [len(texts[f]) for f in (0.25, 0.5, 1.0)] == [3, 6, 12]
    assert texts[1.0][:6] == texts[0.5] and texts[0.5][:3] == texts[0.25]
    assert all(s["tokens"] == sum(len(d) for d in docs[f]) for f, s in subsets.items())


def test_summary_and_table_by_hand():
    runs = [{"config": c, "fraction": f, "seed": s, "tokens": int(1000 * f), "score": v}
            for c, f, s, v in [("distro", 0.5, 0, 90.0), ("distro", 0.5, 1, 91.0),
                               ("ssvm", 0.5, 0, 89.0), ("ssvm", 0.5, 1, 89.5),
                               ("distro", 1.0, 0, 95.0), ("ssvm", 1.0, 0, 96.0)]]
    summary = summarize(runs)
    distro_half = next(r for r in summary if r["config"] == "distro" and r["fraction"] == 0.5)
    assert distro_half["mean"] == pytest.approx(90.5)
    assert distro_half["std"] == pytest.approx(statistics.stdev([90.0, 91.0]))
    text = table(summary, "tag_acc")
    assert "90.50 ± 0.71 (n=2)" in text and "+1.25" in text and "-1.00" in text


@pytest.mark.parametrize("kwargs,message", [
    ({"fractions": [0.0, 1.0]}, "fractions must lie"),
    ({"seeds": []}, "at least one seed"),
    ({"n_jobs": 0}, "n_jobs"),
    ({"plot": Path("curve.jpg")}, ".png or .svg"),
])
def test_bad_arguments(tiny_ptb, tmp_path, kwargs, message):
    with pytest.raises(StructPrefError, match=message):
        learning_curve([CONFIGS / "distro_sparse.cfg"], tmp_path, train_path=tiny_ptb / "train.spacy",
                       test_path=tiny_ptb / "test.spacy", **kwargs)


def test_configs_must_have_distinct_names(tiny_ptb, tmp_path):
    with pytest.raises(StructPrefError, match="must differ"):
        learning_curve([CONFIGS / "distro_sparse.cfg"] * 2, tmp_path,
                       train_path=tiny_ptb / "train.spacy", test_path=tiny_ptb / "test.spacy")


def test_curve_trains_evaluates_draws_and_resumes(tiny_ptb, tmp_path):
    args = dict(train_path=tiny_ptb / "train.spacy", test_path=tiny_ptb / "test.spacy",
                fractions=[0.5, 1.0], seeds=[0, 1], n_jobs=2, progress=False,
                overrides=["--paths.dev", str(tiny_ptb / "dev.spacy"), "--training.max_steps", "3",
                           "--training.eval_frequency", "3"])
    result = learning_curve([CONFIGS / "ssvm_baseline.cfg"], tmp_path, **args)
    saved = json.loads((tmp_path / "learning_curve.json").read_text())
    assert saved["metric"] == "tag_acc" and len(saved["runs"]) == 4
    assert [(r["fraction"], r["n"]) for r in saved["summary"]] == [(0.5, 2), (1.0, 2)]
    assert all(0 <= r["score"] <= 100 for r in saved["runs"])
    assert Path(result["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    scores = sorted(tmp_path.glob("runs/ssvm_baseline/*/scores.json"))
    assert len(scores) == 4
    before = [p.stat().st_mtime_ns for p in scores]
    again = learning_curve([CONFIGS / "ssvm_baseline.cfg"], tmp_path, **args)  # resumes: no new run
    assert [p.stat().st_mtime_ns for p in scores] == before
    assert again["summary"] == saved["summary"]
    args["fractions"], args["seeds"] = [1.0], [0]
    args["overrides"] = args["overrides"][:-1] + ["2"]  # another eval_frequency: redone
    learning_curve([CONFIGS / "ssvm_baseline.cfg"], tmp_path, **args)
    redone = tmp_path / "runs/ssvm_baseline/fraction_1_seed_0/scores.json"
    assert redone.stat().st_mtime_ns > before[scores.index(redone)]
    edited = tmp_path / "ssvm_baseline.cfg"  # same name, other contents: redone too
    edited.write_text((CONFIGS / "ssvm_baseline.cfg").read_text() + "\n# edited\n")
    stamp = redone.stat().st_mtime_ns
    learning_curve([edited], tmp_path, **args)
    assert redone.stat().st_mtime_ns > stamp


def test_failed_run_reports_its_log(tiny_ptb, tmp_path):
    with pytest.raises(StructPrefError, match="failed; end of"):
        learning_curve([CONFIGS / "ssvm_baseline.cfg"], tmp_path, train_path=tiny_ptb / "train.spacy",
                       test_path=tiny_ptb / "test.spacy", fractions=[1.0], seeds=[0], progress=False,
                       overrides=["--components.distro_tagger.w_steps", "0"])
    assert not list(tmp_path.glob("runs/*/*/scores*.json"))  # no partial scores left behind


def _plans(tmp_path, names):
    return [{"run_dir": tmp_path / name, "train_cmd": [], "eval_cmd": [], "recorded": {"run": name}}
            for name in names]


def test_progress_counts_training_tokens(tmp_path, capsys):
    """The bar advances by each run's training tokens (a run of 8× the data
    takes about 8× the time), and runs resumed from an earlier call start it."""
    jobs, tokens = ["small", "large"], {"small": 1000, "large": 8000}
    plans = _plans(tmp_path, jobs)
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "scores.json").write_text('{"tag_acc": 0.5}')
    (tmp_path / "small" / "commands.json").write_text(json.dumps(plans[0]["recorded"]))
    runs = _run_all(jobs, plans, lambda job, plan: {"job": job}, tokens, n_jobs=2, progress=True)
    assert runs == [{"job": "small"}, {"job": "large"}]  # in job order
    bar = capsys.readouterr().err
    assert "1.00k/9.00k" in bar and "9.00k/9.00k" in bar and "tok" in bar


def test_first_failure_cancels_the_runs_not_started(tmp_path):
    started = []

    def one(job, plan):
        started.append(job)
        if job == "a":
            raise StructPrefError(f"run {job} failed")
        time.sleep(0.5)  # "b" may start before the failure is seen; "c" must not

    jobs = ["a", "b", "c"]
    with pytest.raises(StructPrefError, match="run a failed"):
        _run_all(jobs, _plans(tmp_path, jobs), one, dict.fromkeys(jobs, 1), n_jobs=1, progress=False)
    assert started[0] == "a" and "c" not in started


def test_runs_go_seed_by_seed_largest_first():
    """Each seed's pass completes a curve, and the large runs come first so that
    the token rate the progress bar's ETA uses is not measured on the small
    runs, whose fixed costs make them slow per token."""
    order = job_order(["distro", "ssvm"], [0.25, 1.0, 0.5], [0, 1])
    assert order[:6] == [("distro", 1.0, 0), ("ssvm", 1.0, 0), ("distro", 0.5, 0), ("ssvm", 0.5, 0),
                         ("distro", 0.25, 0), ("ssvm", 0.25, 0)]
    assert [seed for _, _, seed in order[6:]] == [1] * 6 and len(set(order)) == 12


def test_running_runs_count_half_at_the_finished_runs_rate():
    """Two runs start together; when the first ends, the second counts for
    half of what it would have done at the first one's rate (half its size
    at most)."""
    progress = TokenProgress({"a": 1000, "b": 1000, "c": 4000})
    assert progress.count(5.0) == 0  # no rate before a run ends
    progress.start("a", 0.0)
    progress.start("b", 0.0)
    progress.finish("a", 10.0)  # 100 tokens per second of one run
    assert progress.count(10.0) == 1000 + 1000 / 2  # b: min(1000, 10 s × 100) / 2
    progress.finish("b", 30.0)  # 2000 tokens in 40 run-seconds: 50 a second
    progress.start("c", 30.0)
    assert progress.count(40.0) == pytest.approx(2000 + 10 * 50 / 2)
    assert progress.count(1000.0) == 2000 + 4000 / 2  # never more than half the running run


SPACY_TRAIN_LOG = """$ python -m spacy train configs/distro_sparse.cfg --output run/model
\u2139 Pipeline: ['distro_tagger']
E    #       LOSS DISTRO...  TAG_ACC  SCORE
---  ------  --------------  -------  ------
  0       0          123.45    45.67    0.46
  1     150         2345.60    93.10    0.93
"""


def test_a_running_run_counts_from_its_first_logged_epoch(tmp_path):
    """Before any run ends there is no rate to go by: a running run counts
    the share of its epochs (or steps) its training table shows done, so
    that the bar has an ETA from its first logged evaluation on."""
    log = tmp_path / "run.log"
    assert logged_fraction(log, 15, 0) == 0.0  # no log yet
    log.write_text(SPACY_TRAIN_LOG.split("  1 ")[0])
    assert logged_fraction(log, 15, 0) == 0.0 and logged_fraction(log, 15, 49) == 1 / 50  # step 0 of 0-49
    log.write_text(SPACY_TRAIN_LOG)
    assert logged_fraction(log, 15, 0) == 1 / 15 and logged_fraction(log, 4, 301) == 0.5  # steps 0-150 of 0-301
    progress = TokenProgress({"a": 3000, "b": 1500}, fraction=lambda job: logged_fraction(log, 15, 0))
    progress.start("a", 0.0)
    progress.start("b", 0.0)
    assert progress.count(5.0) == pytest.approx((3000 + 1500) / 15)
    progress.finish("a", 10.0)  # 300 tokens a second: b's 10 s count for min(1500, 3000) / 2, more than its log
    assert progress.count(10.0) == 3000 + 750


def test_training_limits_read_the_config_and_its_overrides():
    config = CONFIGS / "distro_sparse.cfg"
    assert training_limits(config) == (15, 0)
    assert training_limits(config, ["--training.max_epochs", "3", "--training.max_steps=50", "--x", "1"]) == (3, 50)
    with pytest.raises(StructPrefError, match="--training.max_steps must be a whole number"):
        training_limits(config, ["--training.max_steps", "many"])


def test_bar_shows_running_runs_before_they_end(tmp_path, capsys, monkeypatch):
    """With two workers, the first run's end also counts what the longer
    run beside it has probably done: the bar passes the first run's tokens
    before the second run ends."""
    monkeypatch.setattr(progress_module, "LOG_INTERVAL", 0.0)  # every status a line
    jobs, tokens = ["first", "longer"], {"first": 1000, "longer": 4000}

    def one(job, plan):
        time.sleep(0.3 if job == "first" else 1.5)

    _run_all(jobs, _plans(tmp_path, jobs), one, tokens, n_jobs=2, progress=True, refresh=0.05)
    shown = [float(x) for x in re.findall(r"([\d.]+)k/5\.00k", capsys.readouterr().err)]
    assert any(1.0 < x < 5.0 for x in shown), shown
    assert shown[-1] == 5.0

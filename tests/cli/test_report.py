"""The results page (cli/report.py): built from small metrics files of every
form and real pictures, each table with the command that made its file, the
missing outputs named with theirs; opened in headless Chromium, it renders
with every picture loaded, no error, and a long tree readable at its width."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from spacy_structpref.cli.learning_curve import draw, summarize
from spacy_structpref.cli.project_steps import record
from spacy_structpref.cli.report import build_report
from spacy_structpref.experiments.attachment_tables import CLASSES
from spacy_structpref.experiments.reranking_tables import table_row
from spacy_structpref.scoring import evalb
from spacy_structpref.trees.brackets import parse_bracketed
from spacy_structpref.trees.draw import tree_to_svg

from tests.helpers.paths import ROOT
from tests.trees.test_draw import LONG

GOLD = ["(TOP (S (NP (DT The) (NN cat)) (VP (VBZ sits) (PP (IN on) (NP (DT the) (NN mat))))))",
        "(TOP (S (NP (PRP It)) (VP (VBD rained))))"]
TEST = ["(TOP (S (NP (DT The) (NN cat)) (VP (VBZ sits)) (PP (IN on) (NP (DT the) (NN mat)))))",
        "(TOP (S (NP (PRP It)) (VP (VBD rained))))"]
WINDOW = (1280, 900)


def _parseval(gold, test):
    return evalb([parse_bracketed(g) for g in gold], [parse_bracketed(t) for t in test])


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project directory (this project.yml) with a few metrics files of every
    form, a broken one, a new one, real pictures, and some outputs missing."""
    root = tmp_path_factory.mktemp("project")
    shutil.copy(ROOT / "project.yml", root / "project.yml")
    metrics, plots = root / "metrics", root / "plots"
    metrics.mkdir()
    plots.mkdir()
    (metrics / "distro_sparse.json").write_text(json.dumps({"tag_acc": 0.9512, "speed": 12345.6}))
    (metrics / "ssvm_baseline.json").write_text(json.dumps({"tag_acc": 0.9401, "speed": 23456.7}))
    (metrics / "qc_textcat.json").write_text(json.dumps({  # a textcat evaluation: per-label scores
        "cats_score": 0.81, "cats_macro_f": 0.79, "speed": 999.0,
        "cats_f_per_type": {"LOC": {"p": 0.9, "r": 0.8, "f": 0.847}, "NUM": {"p": 0.7, "r": 0.75, "f": 0.724}}}))
    result = _parseval(GOLD, TEST)
    (metrics / "forest_parser.json").write_text(json.dumps(
        {"all": result.all.as_dict(), f"len<={result.cutoff}": result.short.as_dict()}))
    rows = [table_row("PCFG 1-best", result), table_row("VP (composite)", _parseval(GOLD, GOLD)),
            table_row("oracle", _parseval(GOLD, GOLD))]
    (metrics / "reranker_table.json").write_text(json.dumps({"rows": rows}))
    (metrics / "attachment_tables.json").write_text(json.dumps({
        "settings": {"split": "test", "eval_sentences": 5, "eval_sets": 60, "train_sentences": 3068,
                     "cp_types": 1234, "tables": [1]},
        "table1": {"classes": CLASSES, "class_sizes": {c: 100 / len(CLASSES) for c in CLASSES},
                   "rows": [{"learner": name, "sentences": 10, "L1": l1, "L1_by_class": {c: l1 for c in CLASSES}}
                            for name, l1 in (("VP", 31.5), ("RNN", 29.25))]},
        "seconds": 12.0}))
    (metrics / "attachment_predictor.json").write_text(json.dumps({  # bench/incremental_parser.py's rows
        "sentences": 30, "L": {"1": 16.86, "2": 7.5},
        "rows": [{"tags": "gold", "search": search, "beam_width": width, "f1": f1, "f1_40": f1 + 1, "fallbacks": 0}
                 for search, width, f1 in (("greedy", 1, 65.24), ("beam", 4, 67.14))]}))
    (metrics / "incremental_new.json").write_text(json.dumps({  # a form the page does not know
        "model": "x", "L": {"1": 25.0, "2": 12.5}, "rows": [{"search": "greedy", "F1": 70.1}]}))
    (metrics / "textcat.json").write_text(json.dumps({  # bench/textcat.py's form: systems × granularities
        "results": {"tree kernel": {"coarse": {"accuracy": 88.4, "per_class": {"LOC": {"f": 90.0}}},
                                    "fine": {"accuracy": 80.2}}},
        "timings": ["tree kernel: Gram matrix in 12.0 s"], "settings": {"train_size": 5452}}))
    (metrics / "broken.json").write_text("{")
    record("convert-ptb", "python -m spacy_structpref convert ptb corpus/ptb", 12.3, 0, 1.7e9,
           metrics / "step_times.json")
    curve_dir = root / "training" / "learning_curve"
    curve_dir.mkdir(parents=True)
    runs = [{"config": c, "fraction": f, "seed": s, "tokens": int(8000 * f), "score": 90 + 4 * f + s - (c == "b")}
            for c in ("distro_sparse", "ssvm_baseline") for f in (0.5, 1.0) for s in (0, 1)]
    summary = summarize(runs)
    (curve_dir / "learning_curve.json").write_text(json.dumps({"metric": "tag_acc", "runs": runs,
                                                               "summary": summary}))
    draw(summary, "tag_acc", plots / "learning_curve_ptb.png")
    draw(summary, "tag_acc", plots / "curve.svg")
    (plots / "tree_long.svg").write_text(tree_to_svg(parse_bracketed(LONG)))
    (plots / "notes.txt").write_text("not a picture")
    output = root / "reports" / "index.html"
    info = build_report(metrics, plots, output, root)
    return root, info, output.read_text(encoding="utf8")


def _section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, re.S)
    assert match, f"no section {name}"
    return match.group(1)


def test_every_table_with_its_command(project):
    root, info, page = project
    tagging = _section(page, "tagging")
    assert "95.12" in tagging and "94.01" in tagging and "12,346" in tagging
    assert "corpus/ptb/test.spacy" in tagging  # the evaluation data, from the command
    assert "python -m spacy project run evaluate-taggers" in tagging
    assert "python -m spacy evaluate training/distro_sparse/model-best" in tagging
    assert "cats_f_per_type" in tagging and "LOC" in tagging and "81.00" in tagging
    parseval = _section(page, "parseval")
    for head in ("LR", "LP", "F1", "CB", "0CB", "≤2CB", "≤ 40 words", "all sentences"):
        assert f">{head}" in parseval
    assert "python -m spacy project run evaluate-forest-parser" in parseval
    # forest_parser: 7 gold brackets... recall and precision as EVALB counts them
    assert f"{_parseval(GOLD, TEST).all.recall:.2f}" in parseval
    reranker = _section(page, "reranker")
    assert "VP (composite)" in reranker and "F1 gain" in reranker
    assert "python -m spacy project run rerank-table" in reranker
    attachment = _section(page, "attachment")
    assert "Table 1. L_1 (%)" in attachment and "29.2" in attachment  # format_tables' text
    curve = _section(page, "curve")
    assert "± " in curve and "python -m spacy project run tagger-learning-curve" in curve
    incremental = _section(page, "incremental")
    assert "66.24" in incremental and "beam" in incremental and "16.86" in incremental
    assert "python -m spacy project run evaluate-attachment-predictor" in incremental
    steps = _section(page, "steps")
    assert "convert-ptb" in steps and "12 s" in steps and "not timed" in steps
    other = _section(page, "other")
    assert "incremental_new.json" in other and "greedy" in other
    assert "Could not show" in other and "broken.json" in other
    assert ">coarse.accuracy<" in other and "88.4" in other and "coarse.per_class" in other  # nested: left out
    assert "Gram matrix in 12.0 s" in other
    assert [p.name for p, _ in info["failed"]] == ["broken.json"]


def test_missing_outputs_name_their_command_and_pictures_are_embedded(project):
    root, info, page = project
    missing = _section(page, "missing")
    assert "metrics/parse_reranker.json" in missing and "run evaluate-parse-reranker" in missing
    assert "plots/label_map_ptb.png" in missing and "run label-map" in missing
    assert "metrics/forest_parser.json" not in missing
    assert ("metrics/parse_reranker.json", "evaluate-parse-reranker") in info["missing"]
    pictures = _section(page, "pictures")
    assert pictures.count("<img ") == 3 and "notes.txt" in pictures
    assert "python -m spacy project run tagger-learning-curve" in pictures
    assert "not an output of any command" in pictures  # tree_long.svg
    # self-contained: every source is a data URI, nothing is fetched
    assert all(src.startswith("data:") for src in re.findall(r'src="([^"]*)"', page))
    assert not re.search(r'(href|src)="(https?:|file:|/)', page)


def test_report_cli_on_an_empty_project(tmp_path):
    from typer.testing import CliRunner

    from spacy_structpref.cli import app

    shutil.copy(ROOT / "project.yml", tmp_path / "project.yml")
    out = tmp_path / "r" / "index.html"
    result = CliRunner().invoke(app, ["report", "--metrics", str(tmp_path / "metrics"), "--plots",
                                      str(tmp_path / "plots"), "--output", str(out), "--project", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "0 metrics files, 0 pictures" in result.output
    page = out.read_text(encoding="utf8")
    assert "run evaluate-forest-parser" in _section(page, "missing")


# ------------------------------------------------------------------ Chromium
def chromium() -> str:
    """The headless browser: $CHROMIUM, else chromium (Debian's package) or Chrome on PATH."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    pytest.skip("no headless Chromium found (apt-get install -y chromium, or set $CHROMIUM): .ci/run installs it")


# records errors and checks every picture, then writes the verdict into the page
CHECK = """
<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || (e.target && e.target.src) || e)), true);
const consoleError = console.error;
console.error = (...args) => { window.__errors.push(args.join(' ')); consoleError(...args); };
window.addEventListener('load', () => {
  const images = [...document.images].map(img => ({
    alt: img.alt, ok: img.complete && img.naturalWidth > 0, natural: img.naturalWidth, shown: img.clientWidth}));
  const verdict = document.createElement('pre');
  verdict.id = 'verdict';
  verdict.textContent = JSON.stringify({errors: window.__errors, images: images,
                                        page: document.documentElement.scrollWidth, window: window.innerWidth});
  document.body.appendChild(verdict);
});
</script>
"""


def _run(args, cwd):
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                           "--virtual-time-budget=5000", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def _verdict(html_path: Path) -> dict:
    res = _run(["--dump-dom", html_path.as_uri()], html_path.parent)
    match = re.search(r'<pre id="verdict">(.*?)</pre>', res.stdout, re.S)
    assert match, f"no verdict in the dumped page; chromium said:\n{res.stderr[-2000:]}"
    verdict = json.loads(match.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                         .replace("&amp;", "&"))
    verdict["console"] = [line for line in res.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return verdict


def test_page_renders_in_headless_chromium(project, tmp_path):
    root, info, page = project
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("</body>", CHECK + "</body>"), encoding="utf8")
    verdict = _verdict(checked)
    assert verdict["errors"] == [] and verdict["console"] == [], verdict
    assert len(verdict["images"]) == 3
    bad = [img["alt"] for img in verdict["images"] if not img["ok"]]
    assert not bad, f"pictures that did not load: {bad}"
    assert verdict["page"] <= verdict["window"]  # nothing wider than the window: pictures scale down
    tree = next(img for img in verdict["images"] if img["alt"] == "tree_long.svg")
    # the 33-word tree at the page's width: its 13 px text at least 10 px high
    assert tree["shown"] <= verdict["window"] and tree["shown"] / tree["natural"] >= 10 / 13, tree

    shot = tmp_path / "page.png"
    res = _run([f"--screenshot={shot}", (root / "reports" / "index.html").as_uri()], tmp_path)
    assert shot.is_file(), res.stderr[-2000:]
    from PIL import Image

    pixels = Image.open(shot).convert("L")
    assert pixels.size == WINDOW
    low, high = pixels.getextrema()
    histogram = pixels.histogram()
    assert high - low > 100 and max(histogram) < 0.98 * sum(histogram), "a blank screenshot"


MEASURE = """
<script>
window.addEventListener('load', () => {
  const rows = {};
  for (const t of document.querySelectorAll('text')) {
    const b = t.getBBox();
    (rows[t.getAttribute('y')] = rows[t.getAttribute('y')] || []).push([b.x, b.x + b.width]);
  }
  const svg = document.querySelector('svg');
  const verdict = document.createElement('pre');
  verdict.id = 'verdict';
  verdict.textContent = JSON.stringify({rows: rows, width: svg.width.baseVal.value});
  document.body.appendChild(verdict);
});
</script>
"""


def test_long_tree_text_as_the_browser_draws_it(tmp_path):
    """The widths the layout measured against the browser's own: no two texts
    of a row overlap, and the words fill the picture (no blank third)."""
    page = tmp_path / "tree.html"
    page.write_text(f"<!DOCTYPE html><html><body>{tree_to_svg(parse_bracketed(LONG))}{MEASURE}</body></html>",
                    encoding="utf8")
    res = _run(["--dump-dom", page.as_uri()], tmp_path)
    match = re.search(r'<pre id="verdict">(.*?)</pre>', res.stdout, re.S)
    assert match, res.stderr[-2000:]
    verdict = json.loads(match.group(1).replace("&quot;", '"'))
    rows = {float(y): sorted(spans) for y, spans in verdict["rows"].items()}
    for spans in rows.values():
        for (_, right), (left, _) in zip(spans, spans[1:]):
            assert right <= left + 0.5, spans
    words = rows[max(rows)]
    assert len(words) == 33
    inked = sum(right - left for left, right in words)
    assert inked >= 0.7 * verdict["width"], (inked, verdict["width"])


def test_per_run_figures_are_one_cell():
    """A dict of figures with per-run lists (CPU seconds of 3 runs) is one
    table row, each list a cell, not a JSON dump."""
    from spacy_structpref.cli.report import generic_html

    html = generic_html({"parse": {"speedup": 1.97, "cpu_s": [236.2, 255.4, 242.4], "same": True}})
    assert "<pre>" not in html and "<caption>parse</caption>" in html
    assert "<td>236.2 / 255.4 / 242.4</td>" in html and "1.97" in html

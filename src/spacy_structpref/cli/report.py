"""One self-contained results page of the spaCy project (``python -m
spacy_structpref report``, the step ``report`` of ``spacy project run all``):
``reports/index.html`` with every metrics table found under ``metrics/`` and
every picture under ``plots/`` (embedded, so that the page travels alone),
each with the command that made it, read from the outputs ``project.yml``
declares.

The tables take the forms the project's own commands print, built by the
same code: tag accuracy per tagger (``spacy evaluate``), the learning curve
(:func:`.learning_curve.table_rows`), PARSEVAL's LR / LP / F1 / CB / 0CB /
≤2CB for sentences of ≤ 40 words and for all, as Menchetti et al. (2005),
Table 3 (:func:`~spacy_structpref.experiments.reranking_tables.table_blocks`), the
reranking table with each scorer's gain, the first-pass attachment Tables
1, 2, 4 and 5 of Menchetti et al. (2005)
(:func:`~spacy_structpref.experiments.attachment_tables.format_tables`), the step times
(:func:`.project_steps.summary_rows`); a metrics file of another form is
shown as its scalars and lists of rows. A declared output not made yet is
a line naming the command that makes it.
"""
import base64
import html
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Tuple

import typer

from ..errors import StructPrefError
from ..saving import atomic_file
from .common import command
from .project_steps import TIMINGS, json_form
from .score_names import SCORE_NAMES, format_score

PICTURES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
            ".gif": "image/gif"}
# what `timed` puts before a script line's own command
TIMED = re.compile(r"^python -m spacy_structpref timed \S+ -- ")
SECTIONS = (("tagging", "Tagging and classification"), ("curve", "Learning curves"), ("parseval", "Parsing: PARSEVAL"),
            ("reranker", "Reranking"), ("incremental", "Incremental parsing"),
            ("attachment", "First-pass attachment"), ("other", "Other results"), ("pictures", "Pictures"),
            ("steps", "Step times"), ("missing", "Not made yet"))
# metrics forms (json_form) -> section
FORM_SECTION = {"spacy_scores": "tagging", "learning_curve": "curve", "parseval": "parseval",
                "reranker": "reranker", "incremental": "incremental", "attachment_tables": "attachment",
                "parser_selection": "parseval", "setting_grid": "tagging", "other": "other"}
STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1400px;padding:0 1.5em 3em;
color:#222;line-height:1.4}
h1{margin:.8em 0 .2em}h2{border-bottom:2px solid #ccc;margin-top:1.8em;padding-bottom:.2em}h3{margin:1.4em 0 .4em}
table{border-collapse:collapse;margin:.4em 0 .8em;font-size:.92em}
th,td{border:1px solid #ccc;padding:.25em .6em;vertical-align:top;white-space:nowrap}th{background:#f2f4f8}
td:last-child{white-space:normal}
td.n{text-align:right;font-variant-numeric:tabular-nums}caption{text-align:left;font-weight:600;padding:.3em 0}
pre{background:#f7f7f7;border:1px solid #ddd;padding:.6em;overflow-x:auto;font-size:.85em}
code{background:#f2f2f2;padding:0 .25em;font-size:.9em}
.made{color:#555;font-size:.88em;margin:.2em 0 .6em}.made code{white-space:pre-wrap;word-break:break-all}
.warn{color:#a33}figure{margin:1em 0;border:1px solid #ddd;padding:.5em;background:#fff}
figure img{display:block;max-width:100%;height:auto;margin:0 auto}figcaption{font-size:.88em;color:#444;margin-top:.4em}
nav ul{columns:2;padding-left:1.2em}
"""


@dataclass
class Producer:
    """A project command and its script lines (the timing wrapper left out)."""

    name: str
    lines: List[str] = field(default_factory=list)


@dataclass
class Project:
    """What the page needs of ``project.yml``: which command makes each
    declared output (paths as written there, variables filled in with their
    defaults), and the directory paths are relative to."""

    root: Path
    producers: Dict[str, Producer]
    found: bool
    workflows: Dict[str, List[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> "Project":
        root = Path(root)
        if not (root / "project.yml").exists():
            return cls(root, {}, False)
        from weasel.util import load_project_config

        config = load_project_config(root)
        producers = {}
        for cmd in config.get("commands", []):
            producer = Producer(cmd["name"], [TIMED.sub("", line) for line in cmd.get("script", [])])
            for output in cmd.get("outputs", []):
                producers.setdefault(_key(output), producer)
        return cls(root, producers, True, dict(config.get("workflows", {})))

    def key(self, path: Path) -> str:
        """``path`` as project.yml names it: relative to the project directory."""
        try:
            return _key(Path(path).resolve().relative_to(self.root.resolve()))
        except ValueError:
            return _key(path)

    def made_by(self, paths: Sequence[Path]) -> str:
        """HTML: the command that made each of ``paths`` (the script lines
        that name the file, else all of its command's lines)."""
        items = []
        for path in paths:
            key = self.key(path)
            producer = self.producers.get(key)
            if producer is None:
                how = ("written by every <code>python -m spacy_structpref timed</code> line of the workflows "
                       "<code>all</code> and <code>paper</code>" if Path(path).name == TIMINGS.name else
                       "not an output of any command in project.yml" if self.found else
                       f"no project.yml in {_e(str(self.root))} to say which command made it")
                items.append(f"<code>{_e(key)}</code>: {how}")
                continue
            lines = [line for line in producer.lines if key in line] or producer.lines
            items.append(f"<code>{_e(key)}</code>: <code>python -m spacy project run {_e(producer.name)}</code>, "
                         "which runs " + "; ".join(f"<code>{_e(line)}</code>" for line in lines))
        return '<div class="made">Made by ' + "<br>".join(items) + "</div>" if items else ""

    def missing(self, dirs: Sequence[Path]) -> List[Tuple[str, str]]:
        """``(output, command)`` of every declared output inside ``dirs`` that does not exist."""
        prefixes = [self.key(d).rstrip("/") + "/" for d in dirs]
        return [(key, producer.name) for key, producer in self.producers.items()
                if any(key.startswith(p) for p in prefixes) and not (self.root / key).exists()]


def _key(path) -> str:
    return Path(path).as_posix()


def _e(text) -> str:
    return html.escape(str(text), quote=True)


# ----------------------------------------------------------------- HTML pieces
def _cell(value) -> Tuple[str, bool]:
    """A cell's text and whether it is a number (right-aligned)."""
    if isinstance(value, bool) or value is None:
        return ("-" if value is None else str(value)), False
    if isinstance(value, int):
        return f"{value:,}", True
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:,.0f}", True
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)[:200], False
    text = str(value)
    number = r"[-+]?[\d.,]+( ± [\d.,]+)?( \(n=\d+\))?( ?%| s)?"
    duration = r"\d+ (s|min \d\d s|h \d\d min)"  # project_steps.duration
    return text, bool(re.fullmatch(f"{number}|{duration}", text.strip()))


def html_table(header: Sequence, rows: Iterable[Sequence], caption: str = "") -> str:
    """An HTML table; numbers (and ``mean ± std`` texts) right-aligned."""
    out = ["<table>"] + ([f"<caption>{_e(caption)}</caption>"] if caption else [])
    out.append("<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = [_cell(v) for v in row]
        out.append("<tr>" + "".join(f'<td class="n">{_e(t)}</td>' if num else f"<td>{_e(t)}</td>"
                                    for t, num in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _pre(text: str) -> str:
    return f"<pre>{_e(text)}</pre>"


def _flat(row: dict, depth: int = 2, prefix: str = "") -> Tuple[Dict[str, object], List[str]]:
    """A row's scalars, nested dicts' as ``outer.inner`` down to ``depth``
    levels, and the names of the fields left out (deeper or lists)."""
    flat, left_out = {}, []
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and depth > 1:
            inner, dropped = _flat(value, depth - 1, f"{name}.")
            flat.update(inner)
            left_out += dropped
        elif isinstance(value, (dict, list)):
            left_out.append(name)
        else:
            flat[name] = value
    return flat, left_out


def _rows_table(rows: List[Tuple[str, dict]], caption: str, first: str = "") -> str:
    flat = [(name, *_flat(row)) for name, row in rows]
    columns = list(dict.fromkeys(c for _, cells, _ in flat for c in cells))
    left_out = sorted({c for _, _, dropped in flat for c in dropped})
    table = html_table(((first,) if first is not None else ()) + tuple(columns),
                       [([name] if first is not None else []) + [cells.get(c) for c in columns]
                        for name, cells, _ in flat], caption=caption)
    return table + (f"<p class=\"made\">Left out of this table (nested): {_e(', '.join(left_out))}</p>"
                    if left_out else "")


def _scalar_or_scalars(value) -> bool:
    """A scalar, or a list of scalars (one table cell: per-run figures such as CPU seconds)."""
    if isinstance(value, list):
        return not any(isinstance(v, (dict, list)) for v in value)
    return not isinstance(value, dict)


def generic_html(data, title: str = "") -> str:
    """A metrics file of no known form: its scalars as one table, each list
    of rows (dicts) and each dict of rows as a table (nested figures as
    ``outer.inner`` columns), lists of texts line by line, anything else as
    JSON."""
    if isinstance(data, list):
        data = {"rows": data}
    if not isinstance(data, dict):
        return _pre(json.dumps(data, indent=2, ensure_ascii=False)[:4000])
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, (dict, list))]
    out = [html_table(("field", "value"), scalars, caption=title)] if scalars else []
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            out.append(_rows_table([("", r) for r in value], key, first=None))
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            out.append(_rows_table(list(value.items()), key))
        elif isinstance(value, dict) and value and all(_scalar_or_scalars(v) for v in value.values()):
            cells = [" / ".join(_cell(x)[0] for x in v) if isinstance(v, list) else v for v in value.values()]
            out.append(html_table(tuple(value), [tuple(cells)], caption=key))
        elif isinstance(value, list) and value and not any(isinstance(v, (dict, list)) for v in value):
            out.append(f"<h4>{_e(key)}</h4>" + _pre("\n".join(str(v) for v in value)))
        elif isinstance(value, (dict, list)):
            text = json.dumps(value, indent=1, ensure_ascii=False)
            out.append(f"<h4>{_e(key)}</h4>" + _pre(text[:4000] + ("\n…" if len(text) > 4000 else "")))
    return "\n".join(out)


# ------------------------------------------------------------- the sections
def _spacy_scores_html(files: List[Tuple[Path, dict]], project: Project) -> str:
    """``spacy evaluate`` JSON files as one table, a row per pipeline: our
    scores and spaCy's (× 100), the evaluation data and the speed; each
    file's per-label scores below it."""
    keys = [k for k in SCORE_NAMES if any(isinstance(d.get(k), float) for _, d in files)]
    keys += sorted({k for _, d in files for k, v in d.items()
                    if isinstance(v, float) and k not in SCORE_NAMES and k != "speed"})
    rows = []
    for path, data in files:
        producer = project.producers.get(project.key(path))
        lines = [line for line in producer.lines if project.key(path) in line] if producer else []
        test = next((w for line in lines for w in line.split() if w.endswith(".spacy")), "-")
        rows.append([path.stem, test, *(format_score(data.get(k)) for k in keys),
                     f"{data['speed']:,.0f}" if isinstance(data.get("speed"), (int, float)) else "-"])
    out = [html_table(("pipeline", "evaluated on", *(SCORE_NAMES.get(k, k) for k in keys), "words/s"), rows,
                      caption="Test-set scores (× 100), spacy evaluate")]
    for path, data in files:
        for key, value in data.items():
            if isinstance(value, dict) and value:
                out.append(generic_html({key: value}).replace(f"<caption>{_e(key)}</caption>",
                                                              f"<caption>{_e(path.stem)}: {_e(key)}</caption>"))
    return "\n".join(out) + project.made_by([p for p, _ in files])


def _parseval_html(files: List[Tuple[Path, dict]], project: Project) -> str:
    """evaluate-parse JSON files as one table in the form of Menchetti et al.
    (2005), Table 3, a row per pipeline."""
    from ..experiments.reranking_tables import parseval_figures

    rows = [{"name": path.stem, "<=40": parseval_figures(data["len<=40"]), "all": parseval_figures(data["all"])}
            for path, data in files]
    return _blocks_html(rows) + project.made_by([p for p, _ in files])


def _blocks_html(rows) -> str:
    from ..experiments.reranking_tables import table_blocks

    return "\n".join(html_table(header, data, caption=title) for title, header, data in table_blocks(rows))


def _reranker_html(path: Path, data: dict, project: Project) -> str:
    from ..experiments.reranking_tables import base_parser_row, format_gains, read_rows

    rows = read_rows(path)
    base = base_parser_row(rows)
    gains = format_gains(rows, base) if base else ""
    return (f"<h3>{_e(project.key(path))}</h3>" + _blocks_html(rows)
            + (f"<p>F1 gain (≤ 40 words) over the {_e(base)}:</p>{_pre(gains)}" if gains else "")
            + project.made_by([path]))


def _curve_html(path: Path, data: dict, project: Project) -> str:
    from .learning_curve import table_rows

    header, rows = table_rows(data["summary"])
    return (f"<h3>{_e(project.key(path))}</h3>"
            + html_table(header, rows, caption=f"test {data['metric']} (× 100), mean ± std over seeds")
            + project.made_by([path]))


def _attachment_html(path: Path, data: dict, project: Project) -> str:
    from ..experiments.attachment_tables import format_tables

    return f"<h3>{_e(project.key(path))}</h3>" + _pre(format_tables(data)) + project.made_by([path])


def _generic_file_html(path: Path, data, project: Project) -> str:
    return f"<h3>{_e(project.key(path))}</h3>" + generic_html(data) + project.made_by([path])


# the workflows whose step times the page shows (`all` always, the others once a step of theirs ran)
STEP_WORKFLOWS = ("all", "paper")


def _steps_html(path: Path, project: Project) -> str:
    from .project_steps import SUMMARY_HEADER, summary_rows

    if not project.found:
        return generic_html(json.loads(path.read_text(encoding="utf8"))) + project.made_by([path])
    tables = []
    for workflow in (w for w in STEP_WORKFLOWS if w in project.workflows):
        rows = summary_rows(project.root, workflow, path.resolve())
        if workflow == "all" or any(row[3] != "not timed" for row in rows[:-1]):
            tables.append(html_table(SUMMARY_HEADER, rows, caption=(
                f"python -m spacy project run {workflow}: every step's time (an old 'finished': a step "
                "skipped, nothing having changed) and key figure")))
    return "\n".join(tables) + project.made_by([path])


def _svg_with_viewbox(data: bytes) -> bytes:
    """An SVG whose root has a width and height but no viewBox gets one, so
    that the page can scale it (``max-width: 100%``) instead of cropping it."""
    text = data.decode("utf8", errors="replace")
    match = re.search(r"<svg\b[^>]*>", text)
    if not match or "viewBox" in match.group(0):
        return data
    size = re.search(r'\bwidth="([\d.]+)(?:px)?"[^>]*?\bheight="([\d.]+)(?:px)?"', match.group(0))
    if not size:
        return data
    tag = match.group(0).replace("<svg", f'<svg viewBox="0 0 {size.group(1)} {size.group(2)}"', 1)
    return (text[:match.start()] + tag + text[match.end():]).encode("utf8")


def picture_html(path: Path, project: Project) -> str:
    """A picture embedded as a data URI, with its name and command."""
    data = path.read_bytes()
    if path.suffix.lower() == ".svg":
        data = _svg_with_viewbox(data)
    uri = f"data:{PICTURES[path.suffix.lower()]};base64,{base64.b64encode(data).decode('ascii')}"
    return (f'<figure id="{_e(_anchor(project.key(path)))}"><img src="{uri}" alt="{_e(path.name)}">'
            f"<figcaption><b>{_e(project.key(path))}</b>{project.made_by([path])}</figcaption></figure>")


def _anchor(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError) as err:
        raise StructPrefError(f"not valid JSON ({err})") from None


def _files(folder: Path, suffixes: Iterable[str]) -> List[Path]:
    suffixes = set(suffixes)
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in suffixes) \
        if folder.is_dir() else []


def build_report(metrics: Path = Path("metrics"), plots: Path = Path("plots"),
                 output: Path = Path("reports") / "index.html", project_dir: Path = Path(".")) -> dict:
    """Write the results page and return what it holds: ``tables`` and
    ``pictures`` (paths shown), ``missing`` (declared outputs not made yet,
    with their commands) and ``failed`` (files that could not be shown,
    with the reason, also said on the page)."""
    project = Project.load(project_dir)
    metrics, plots = Path(metrics), Path(plots)
    sections: Dict[str, List[str]] = {key: [] for key, _ in SECTIONS}
    shown_tables: List[Path] = []
    failed: List[Tuple[Path, str]] = []
    by_form: Dict[str, List[Tuple[Path, dict]]] = {}
    timings = metrics / TIMINGS.name
    for path in _files(metrics, [".json"]):
        try:
            if path == timings:
                sections["steps"].append(_steps_html(path, project))
                shown_tables.append(path)
            else:
                data = _read_json(path)
                by_form.setdefault(json_form(data), []).append((path, data))
        except (StructPrefError, KeyError, TypeError, ValueError) as err:
            failed.append((path, f"{type(err).__name__}: {err}"))
    # metrics declared outside the metrics folder (learning_curve.json), not other JSON outputs (shard indexes)
    for key in project.producers:
        path = project.root / key
        if key.endswith(".json") and path.is_file() and not path.resolve().is_relative_to(metrics.resolve()):
            try:
                data = _read_json(path)
            except StructPrefError as err:
                failed.append((path, str(err)))
                continue
            if json_form(data) != "other":
                by_form.setdefault(json_form(data), []).append((path, data))
    together = {"spacy_scores": _spacy_scores_html, "parseval": _parseval_html}  # one table for all files
    # a file at a time: these forms have a table of their own, every other form the generic one
    apart = {"learning_curve": _curve_html, "reranker": _reranker_html, "attachment_tables": _attachment_html}
    for form, files in by_form.items():
        if form in together:
            groups = [(files, together[form])]
        else:
            render_file = apart.get(form, _generic_file_html)
            groups = [([item], lambda members, project, render=render_file: render(*members[0], project))
                      for item in files]
        for members, render in groups:
            try:
                sections[FORM_SECTION[form]].append(render(members, project))
                shown_tables.extend(p for p, _ in members)
            except (StructPrefError, KeyError, TypeError, ValueError) as err:
                failed.extend((p, f"{type(err).__name__}: {err}") for p, _ in members)
    pictures = _files(plots, PICTURES)
    for path in pictures:
        sections["pictures"].append(picture_html(path, project))
    others = sorted(p for p in plots.rglob("*") if p.is_file() and p.suffix.lower() not in PICTURES) \
        if plots.is_dir() else []
    if others:
        sections["pictures"].append("<p>Not shown (not a picture a browser draws): "
                                    + ", ".join(f"<code>{_e(project.key(p))}</code>" for p in others) + "</p>")
    missing = project.missing([metrics, plots])
    if missing:
        sections["missing"].append("<ul>" + "".join(
            f"<li><code>{_e(key)}</code>: made by <code>python -m spacy project run {_e(name)}</code></li>"
            for key, name in missing) + "</ul>")
    if failed:
        sections["other"].append("".join(f'<p class="warn">Could not show <code>{_e(project.key(p))}</code>: '
                                         f"{_e(reason)}</p>" for p, reason in failed))
    page = _page(sections, project, metrics, plots)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(output) as tmp:
        tmp.write_text(page, encoding="utf8")
    return {"output": output, "tables": shown_tables, "pictures": pictures, "missing": missing, "failed": failed}


def _page(sections: Dict[str, List[str]], project: Project, metrics: Path, plots: Path) -> str:
    filled = [(key, title) for key, title in SECTIONS if sections[key]]
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    head = (f"<h1>spacy-structpref: results</h1><p>Every table under <code>{_e(project.key(metrics))}/</code> and "
            f"every picture under <code>{_e(project.key(plots))}/</code>, {when}. Made by "
            "<code>python -m spacy_structpref report</code> (the step <code>report</code> of "
            "<code>python -m spacy project run all</code> and <code>paper</code>). Commands are project.yml's, its variables at their "
            "defaults (a run with <code>--vars.…</code> overrides used those).</p>")
    nav = "<nav><ul>" + "".join(f'<li><a href="#{key}">{_e(title)}</a></li>' for key, title in filled) + "</ul></nav>"
    body = "".join(f'<section id="{key}"><h2>{_e(title)}</h2>' + "\n".join(sections[key]) + "</section>"
                   for key, title in filled)
    if not filled:
        body = "<p>Nothing to show yet: run <code>python -m spacy project run all</code>.</p>"
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,"><title>spacy-structpref results</title>'
            f"<style>{STYLE}</style></head><body>{head}{nav}{body}</body></html>\n")


@command("report")
def report_cli(
    metrics: Path = typer.Option(Path("metrics"), "--metrics", help="Folder of metrics JSON files"),
    plots: Path = typer.Option(Path("plots"), "--plots", help="Folder of pictures (.png, .svg)"),
    output: Path = typer.Option(Path("reports") / "index.html", "--output", "-o", help="The page to write"),
    project_dir: Path = typer.Option(Path("."), "--project", help="Directory of project.yml (which command made what)"),
):
    """Write one self-contained HTML page with every metrics table and every
    picture of the project, each with the command that made it."""
    result = build_report(metrics, plots, output, project_dir)
    typer.echo(f"wrote {result['output']}: {len(result['tables'])} metrics files, {len(result['pictures'])} "
               f"pictures; {len(result['missing'])} declared outputs not made yet"
               + (f"; could not show {len(result['failed'])}: "
                  + ", ".join(str(p) for p, _ in result["failed"]) if result["failed"] else ""))

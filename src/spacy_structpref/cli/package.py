"""The two project steps around ``spacy assemble`` and ``spacy package``
that make the main job's pipeline package (``spacy project run package``).

``select-parser`` keeps the trained parser with the higher dev PARSEVAL F1,
read from each pipeline's ``meta.json`` (``spacy train`` writes there the
dev scores of the evaluation that made ``model-best``), and copies it to a
fixed path that ``configs/package.cfg`` sources, so that the assemble
config stays a plain spaCy config. ``package-meta`` writes the meta.json
``spacy package --meta`` takes: the package's name and version, the
requirement on this library, which parser was selected and why, and as its
``performance`` the scores ``spacy evaluate`` measured on the assembled
pipeline.
"""
import json
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import typer

from ..about import __title__, __version__
from ..errors import StructPrefError
from ..saving import atomic_file, replaced_directory
from .common import command

# the dev score the parsers are compared by (what the parseval scorer reports)
SELECT_BY = "parseval_f"


def read_performance(model: Path) -> Dict[str, float]:
    """The scores in a trained pipeline's ``meta.json`` (``performance``)."""
    meta = Path(model) / "meta.json"
    if not meta.is_file():
        raise StructPrefError(f"{model} is not a trained pipeline: it has no meta.json")
    try:
        performance = json.loads(meta.read_text(encoding="utf8")).get("performance")
    except ValueError as err:
        raise StructPrefError(f"{meta} is not valid JSON ({err})") from None
    if not isinstance(performance, dict) or not isinstance(performance.get(SELECT_BY), (int, float)):
        raise StructPrefError(f"{meta} has no dev score {SELECT_BY!r} under 'performance': was {model} "
                              "trained by spacy train with a dev evaluation of a parser?")
    return performance


def select_parser(models: Sequence[Path], output: Path, copy_to: Optional[Path] = None) -> dict:
    """The model of ``models`` with the highest dev ``parseval_f`` (the first
    of equals); writes ``output`` (JSON: ``selected``, ``model``, ``metric``,
    and every candidate's dev scores) and copies the selected pipeline to
    ``copy_to`` (replacing what is there). Returns what ``output`` holds."""
    if not models:
        raise StructPrefError("give at least one trained parser")
    candidates = [{"model": str(m), "dev": read_performance(Path(m))} for m in models]
    best = max(candidates, key=lambda c: c["dev"][SELECT_BY])  # max keeps the first of equals
    result = {"selected": best["model"], "metric": SELECT_BY, "candidates": candidates}
    if copy_to is not None:
        with replaced_directory(copy_to) as staging:
            shutil.copytree(best["model"], staging)
        result["copied_to"] = str(copy_to)
    with atomic_file(output) as tmp:
        tmp.write_text(json.dumps(result, indent=2), encoding="utf8")
    return result


def requirement(version: str = __version__) -> str:
    """This library as a package requirement: ``spacy-structpref>=X.Y.Z,<X.(Y+1).0``."""
    from spacy.util import get_minor_version_range

    return f"{__title__}{get_minor_version_range(version)}"


def package_meta(scores: Path, name: str, version: str, selection: Optional[Path] = None) -> dict:
    """The meta.json of the package: ``performance`` the float scores of
    ``scores`` (``spacy evaluate``'s JSON of the assembled pipeline, test
    split), the requirement on this library, and the parser selection
    (``select_parser``'s JSON) in the description and ``sources``."""
    try:
        measured = json.loads(Path(scores).read_text(encoding="utf8"))
    except (OSError, ValueError) as err:
        raise StructPrefError(f"cannot read the scores {scores} ({err})") from None
    performance = {k: v for k, v in measured.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if not performance:
        raise StructPrefError(f"{scores} holds no scores (expected spacy evaluate's JSON)")
    description = ("distro_tagger, attachment_predictor, forest_parser and parse_reranker of "
                   "spacy-structpref trained on the NLTK sample of the Penn Treebank; "
                   f"performance: the PTB-sample test split ({scores})")
    sources: List[dict] = [{"name": "Penn Treebank sample distributed with NLTK (treebank)",
                            "url": "https://www.nltk.org/nltk_data/"}]
    if selection is not None:
        chosen = json.loads(Path(selection).read_text(encoding="utf8"))
        dev = ", ".join(f"{c['model']} {100 * c['dev'][chosen['metric']]:.2f}" for c in chosen["candidates"])
        description += f"; parser: {chosen['selected']} (dev {chosen['metric']}: {dev})"
    return {"name": name, "version": version, "description": description, "license": "MIT",
            "requirements": [requirement()], "performance": performance, "sources": sources}


@command("select-parser")
def select_parser_cli(
    models: List[Path] = typer.Argument(..., help="Trained pipelines with a forest_parser (their meta.json)"),
    output: Path = typer.Option(..., "--output", "-o", help="Where the selection is written (JSON)"),
    copy_to: Optional[Path] = typer.Option(None, "--copy-to", help="Copy the selected pipeline here"),
):
    """Keep the parser with the higher dev PARSEVAL F1 (from each pipeline's meta.json)."""
    result = select_parser(models, output, copy_to)
    for c in result["candidates"]:
        typer.echo(f"{c['model']}: dev {result['metric']} {100 * c['dev'][result['metric']]:.2f}")
    typer.echo(f"selected {result['selected']}" + (f", copied to {copy_to}" if copy_to else "")
               + f"; wrote {output}")


@command("package-meta")
def package_meta_cli(
    model: Path = typer.Argument(..., help="The assembled pipeline (its meta.json is the base)"),
    output: Path = typer.Argument(..., help="The meta.json to write, for spacy package --meta"),
    scores: Path = typer.Option(..., "--scores", help="spacy evaluate's JSON of the pipeline"),
    name: str = typer.Option(..., "--name", help="Package name without the language (en_NAME)"),
    version: str = typer.Option(..., "--version", help="Package version"),
    selection: Optional[Path] = typer.Option(None, "--selection", help="select-parser's JSON"),
):
    """Write the meta.json of the pipeline package: name, version, the
    requirement on spacy-structpref, and the measured scores as its performance."""
    base = json.loads((model / "meta.json").read_text(encoding="utf8")) if (model / "meta.json").is_file() else {}
    meta = {**base, **package_meta(scores, name, version, selection)}
    with atomic_file(output) as tmp:
        tmp.write_text(json.dumps(meta, indent=2), encoding="utf8")
    typer.echo(f"wrote {output}: {meta.get('lang', 'en')}_{name} {version}, requires {meta['requirements'][0]}")

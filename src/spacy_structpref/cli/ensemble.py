"""``ensemble-span-parser``: one pipeline whose ``forest_parser`` averages
the span scores of several trained span-CRF pipelines
(``spacy_structpref.SpanCRFEnsemble.v1``), for instance the whole-train
parser and the jackknife folds trained for the reranker's lists.

The first pipeline is the base: its other components, vectors and settings
are kept, its span labels and tags are the ensemble's, and its
``forest_parser`` block becomes the ensemble's, with each member's own
model block under ``[components.forest_parser.model.*.member_M]``, so that
``spacy.load`` rebuilds it from the saved config.
"""
from pathlib import Path
from typing import List, Optional, Sequence

import typer

from ..errors import StructPrefError
from ..saving import replaced_directory
from .common import command, output_directory, parse_numbers


def ensemble_span_parser(models: Sequence[Path], output: Path, weights: Optional[Sequence[float]] = None,
                         name: str = "forest_parser", dev: Optional[Path] = None) -> Path:
    """Assemble the span-CRF ensemble of the pipelines ``models`` (the first
    the base) and save it to ``output`` (written beside it, then moved in
    place, :func:`~..saving.replaced_directory`: a failed run leaves
    ``output`` as it was). Its ``meta.json``
    names the members and weights; its ``performance`` is the ensemble's
    scores on the ``.spacy`` corpus ``dev`` (as ``spacy train`` records a
    model's dev scores, which ``select-parser`` compares), or absent: the
    base's scores are not the ensemble's."""
    import spacy

    from ..components.forest_parser import ENSEMBLE_ARCH, SPAN_CRF_ARCH
    from ..parsing.span_parser import SpanParser

    models = [Path(m) for m in models]
    if len(models) < 2:
        raise StructPrefError(f"an ensemble needs at least two trained pipelines, got {len(models)}")
    nlp = spacy.load(models[0])
    pipelines = [nlp] + [spacy.load(m) for m in models[1:]]
    blocks = []
    for path, pipeline in zip(models, pipelines):
        if name not in pipeline.pipe_names:
            raise StructPrefError(f"{path} has no {name} component (it has {', '.join(pipeline.pipe_names)})")
        block = pipeline.config["components"][name]
        if block["model"].get("@architectures") != SPAN_CRF_ARCH:
            raise StructPrefError(f"{path}'s {name} runs {block['model'].get('@architectures')}: an ensemble's "
                                  f"members are {SPAN_CRF_ARCH} models")
        blocks.append(block)
    parser = SpanParser.ensemble([p.get_pipe(name).parser for p in pipelines], weights)
    settings = {key: value for key, value in blocks[0].items() if key not in ("factory", "model")}
    settings["model"] = {"@architectures": ENSEMBLE_ARCH, "weights": parser.model.attrs["weights"],
                         "*": {f"member_{m}": block["model"] for m, block in enumerate(blocks)}}
    nlp.replace_pipe(name, "forest_parser", config=settings)
    nlp.get_pipe(name).use_span_parser(parser)
    nlp.meta.pop("performance", None)
    nlp.meta["ensemble"] = {"members": [str(m) for m in models], "weights": parser.model.attrs["weights"]}
    if dev is not None:
        from spacy.training import Corpus

        nlp.meta["performance"] = {key: value for key, value in nlp.evaluate(Corpus(dev)(nlp)).items()
                                   if key != "speed"}
    output = Path(output)
    output_directory(output.parent, "output's directory")
    with replaced_directory(output) as staging:
        nlp.to_disk(staging)
    return output


@command("ensemble-span-parser")
def ensemble_span_parser_cli(
    output: Path = typer.Argument(..., help="Where the ensemble pipeline goes"),
    models: List[Path] = typer.Argument(..., help="Trained span-CRF pipelines, the first the base"),
    weights: Optional[str] = typer.Option(None, "--weights", help="One weight per pipeline, e.g. 2,1,1,1,1 "
                                          "(default: all 1)"),
    name: str = typer.Option("forest_parser", "--component", help="The parser component's name"),
    dev: Optional[Path] = typer.Option(None, "--dev", help=".spacy corpus whose scores go to meta.json's "
                                       "performance (what select-parser compares)"),
):
    """Average the span scores of trained span-CRF pipelines in one pipeline
    (a product of experts: usually a better parser than any member)."""
    out = ensemble_span_parser(models, output, None if weights is None else parse_numbers(weights, float, "--weights"),
                               name, dev)
    typer.echo(f"span CRF ensemble of {len(models)} pipelines saved to {out}")

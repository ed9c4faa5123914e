"""Command line: ``python -m spacy_structpref COMMAND`` (also ``spacy-structpref``
and, through the ``spacy_cli`` entry point, ``python -m spacy structpref-COMMAND``)."""
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(name="spacy_structpref", no_args_is_help=True, add_completion=False,
                  help="spacy-structpref: data preparation, evaluation and inspection commands.")

DATA_HELP = "NLTK data root to read corpora from (default: $NLTK_DATA)"


def _data_root(data: Optional[Path]) -> None:
    if data is not None:
        from ..corpora import use_nltk_data

        use_nltk_data(data.resolve())


@app.command("fetch-data")
def fetch_data_cli(
    dest: Path = typer.Argument(..., help="Directory that becomes an NLTK data root"),
    offline: bool = typer.Option(False, "--offline", help="Never download; copy from $NLTK_DATA only"),
):
    """Copy (from $NLTK_DATA) or download the corpus zips, checksum-verified."""
    from ..corpora.assets import fetch_nltk_data

    for line in fetch_nltk_data(dest, offline=offline):
        typer.echo(line)


@app.command("convert")
def convert_cli(
    corpus: str = typer.Argument(..., help="ptb, basque or brown"),
    output_dir: Path = typer.Argument(..., help="Where train/dev/test .spacy files go"),
    data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N sentences of each split"),
):
    """Convert a corpus to train/dev/test .spacy files and print a summary table."""
    from .convert import convert

    _data_root(data)
    convert(corpus, output_dir, limit=limit)


@app.command("evaluate-parse")
def evaluate_parse_cli(
    model: str = typer.Argument(..., help="Pipeline name or path that writes constituents"),
    data_path: Path = typer.Argument(..., help=".spacy file with gold constituents"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON"),
    batch_size: int = typer.Option(32, "--batch-size"),
):
    """Parse the gold Docs' words and print the EVALB (PARSEVAL) table."""
    from .evaluate import evaluate_parse

    evaluate_parse(model, data_path, output=output, batch_size=batch_size)


@app.command("draw-tree")
def draw_tree_cli(
    source: str = typer.Argument(..., help="A bracketed tree, or a .spacy file with constituents"),
    output: Path = typer.Argument(..., help="SVG file to write"),
    index: int = typer.Option(0, "--index", "-i", help="Which Doc of a .spacy file"),
):
    """Draw a constituency tree as SVG."""
    from ..trees.brackets import parse_bracketed
    from ..trees.draw import tree_to_svg

    if source.endswith(".spacy"):
        import spacy
        from spacy.tokens import DocBin

        from ..errors import StructPrefError

        docs = list(DocBin().from_disk(source).get_docs(spacy.blank("xx").vocab))
        if not 0 <= index < len(docs) or docs[index]._.parse is None:
            raise StructPrefError(f"{source} has no Doc {index} with constituents ({len(docs)} Docs)")
        tree = docs[index]._.parse
    else:
        tree = parse_bracketed(source)
    output.write_text(tree_to_svg(tree), encoding="utf8")
    typer.echo(f"wrote {output}")


@app.command("label-map")
def label_map_cli(
    model: Path = typer.Argument(..., help="Trained pipeline with a distro_tagger"),
    output: Path = typer.Argument(..., help="Picture to write (.png or .svg)"),
):
    """Draw the label similarity map of a trained distro_tagger."""
    from .label_map import draw_label_map

    typer.echo(f"wrote {draw_label_map(model, output)}")


def main() -> None:
    from ..errors import StructPrefError

    try:
        app()
    except StructPrefError as err:
        typer.echo(f"error: {err}", err=True)
        raise SystemExit(1)

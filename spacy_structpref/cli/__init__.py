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


def main() -> None:
    from ..errors import StructPrefError

    try:
        app()
    except StructPrefError as err:
        typer.echo(f"error: {err}", err=True)
        raise SystemExit(1)

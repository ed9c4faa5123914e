"""What every command module shares: the typer app, the decorator that
registers a command with clean failures, and the options' helpers."""
import functools
from pathlib import Path
from typing import Callable, Optional

import typer
from wasabi.util import locale_escape

from ..errors import StructPrefError

app = typer.Typer(name="spacy_structpref", no_args_is_help=True, add_completion=False,
                  help="spacy-structpref: data preparation, evaluation and inspection commands.")


def failure_line(message: str) -> str:
    """wasabi's failure line (``✘``, red on a terminal) left unwrapped: one line however long."""
    return typer.style(locale_escape(f"\u2718 {message}"), fg="red")


def command(name: str, **settings) -> Callable[[Callable], Callable]:
    """``app.command(name)`` for a command that reports a StructPrefError (bad
    input) as one failure line on stderr and exit status 1, not a traceback.
    The spaCy CLI registers the same callbacks, so it reports them alike."""
    def register(func: Callable) -> Callable:
        @functools.wraps(func)
        def run(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except StructPrefError as err:
                typer.echo(failure_line(str(err)), err=True)  # colour dropped when not a terminal
                raise typer.Exit(1)

        return app.command(name, **settings)(run)

    return register


DATA_HELP = "NLTK data root to read corpora from (default: $NLTK_DATA)"
MAX_ERRORS_HELP = "Stop after this many error sentences and one more, as EVALB's -e (negative: never)"


def data_root(data: Optional[Path]) -> None:
    """Read corpora from the NLTK data root ``data`` when one is given."""
    if data is not None:
        from ..corpora import use_nltk_data

        use_nltk_data(data.resolve())


def parse_numbers(text: str, kind, what: str) -> list:
    """The comma-separated numbers of ``text`` as ``kind``; ``what`` names the option in the error."""
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise StructPrefError(f"{what} must be a comma-separated list of numbers, got {text!r}")

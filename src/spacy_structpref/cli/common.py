"""What every command module shares: the typer app, the decorator that
registers a command with clean failures, and the options' helpers."""
import functools
import os
from pathlib import Path
from typing import Callable, Dict, Optional

import typer
from wasabi import Printer, color
from wasabi.util import locale_escape

from ..errors import StructPrefError

app = typer.Typer(name="spacy_structpref", no_args_is_help=True, add_completion=False,
                  help="spacy-structpref: data preparation, evaluation and inspection commands.")
_failure = Printer(no_print=True)  # wasabi's settings of a failure line; typer.echo puts it on stderr


def fail(message: str) -> None:
    """End the command with one failure line on stderr (wasabi's ``✘``,
    coloured as its ``fail``, but never wrapped) and exit status 1."""
    line = message.replace("\n", " ")
    if _failure.pretty:
        line = locale_escape(f"{_failure.icons['fail']} {line}")
        if _failure.show_color:
            line = color(line, fg=_failure.colors["fail"])
    typer.echo(line, err=True)
    raise typer.Exit(1)


def reporting_errors(func: Callable, os_errors: bool = True) -> Callable:
    """``func`` with a StructPrefError (bad input), and with ``os_errors`` an
    OSError (a path that cannot be read or written, a pipeline spaCy cannot
    find), reported by :func:`fail` instead of a traceback."""
    caught = (StructPrefError, OSError) if os_errors else StructPrefError

    @functools.wraps(func)
    def run(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except caught as err:
            named = isinstance(err, OSError) and err.filename is not None
            fail(f"{err.filename}: {err.strerror or err}" if named else str(err))

    return run


def command(name: str, **settings) -> Callable[[Callable], Callable]:
    """``app.command(name)`` for a command that reports bad input (a
    StructPrefError, an OSError) as one failure line on stderr and exit
    status 1, not a traceback. The spaCy CLI registers the same callbacks,
    so it reports them alike."""
    def register(func: Callable) -> Callable:
        return app.command(name, **settings)(reporting_errors(func))

    return register


def output_file(path: Path, option: str = "output") -> Path:
    """``path`` checked as a file a command will write, before any work: not
    a directory, in a directory that exists and that it may write to."""
    path = Path(path)
    if path.is_dir():
        raise StructPrefError(f"{option} {path} is a directory: give the file to write")
    folder = path.parent
    if not folder.is_dir():
        raise StructPrefError(f"cannot write {option} {path}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise StructPrefError(f"cannot write {option} {path}: permission denied")
    return path


def output_directory(path: Path, option: str = "output directory") -> Path:
    """``path`` as a directory a command will write files into, made when
    missing: not a file, and writable."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise StructPrefError(f"{option} {path} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StructPrefError(f"cannot make {option} {path}: {err.strerror or err}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise StructPrefError(f"cannot write into {option} {path}: permission denied")
    return path


DATA_HELP = "NLTK data root to read corpora from (default: $NLTK_DATA)"
MAX_ERRORS_HELP = ("Stop at the error after this many and one more, as EVALB's -e (a negative number: at the "
                   "first error)")
SCORE_ALL_HELP = "Never stop at errors: score the valid sentences and count the others"


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


# numerical libraries' thread counts, one each in a job run beside others
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded_environment() -> Dict[str, str]:
    """This process's environment with one thread per numerical library
    where the user has not chosen a number: for jobs run side by side,
    whose BLAS threads would otherwise compete for the same cores."""
    env = dict(os.environ)
    for name in THREAD_VARIABLES:
        env.setdefault(name, "1")
    return env

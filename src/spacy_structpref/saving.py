"""Saving safely: a save is written to a temporary sibling and moved into
place, so an interrupted save never leaves a half-written model or file
(:func:`atomic_directory` for pipeline components and learners,
:func:`atomic_file` for the command line's outputs); a marker file names what
a directory holds (the component factory or learner class), so loading it
into the wrong thing fails with a clear error."""
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import srsly
from spacy.util import ensure_path

from .errors import StructPrefError

MARKER = "structpref_component.json"


@contextmanager
def atomic_directory(path, factory: str) -> Iterator[Path]:
    """Yield a temporary directory to write into; on success it replaces ``path``."""
    path = ensure_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        srsly.write_json(tmp / MARKER, {"factory": factory})
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            os.replace(path, old / "x")
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def partial_path(path) -> Path:
    """The temporary sibling :func:`atomic_file` writes ``path`` to:
    ``name.part.ext``, so that the extension still tells the file's format."""
    path = ensure_path(path)
    return path.with_name(f"{path.stem}.part{path.suffix}")


@contextmanager
def atomic_file(path) -> Iterator[Path]:
    """Yield :func:`partial_path` of ``path`` to write into; on success it
    replaces ``path`` (``os.replace``, atomic on one file system), on an
    exception it is removed and ``path`` is left as it was."""
    path = ensure_path(path)
    tmp = partial_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def check_saved(path, factory: str) -> Path:
    """Raise a clear error unless ``path`` holds a saved ``factory``."""
    path = ensure_path(path)
    marker = path / MARKER
    if not marker.exists():
        raise StructPrefError(f"{path} does not hold a saved {factory} (no {MARKER})")
    saved = srsly.read_json(marker).get("factory")
    if saved != factory:
        raise StructPrefError(f"{path} holds a saved {saved}, not a {factory}: it was loaded "
                              "into the wrong pipeline component or learner")
    return path

"""The public NLTK data packages the project uses, with their checksums, and a
fetcher that copies them from a local NLTK data root (offline) or downloads
them from NLTK's public data repository."""
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Dict, Iterable, List, Optional

import nltk

from ..errors import CorpusError
from ..saving import file_digest

NLTK_DATA_URL = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/{name}.zip"
# md5 of each corpus zip (the same values are listed in project.yml's assets).
PACKAGES: Dict[str, str] = {
    "treebank": "78c24a97940c2504d0ad35dd3f8a560b",
    "conll2007": "b9015928e35c41f0695525289df5208f",
    "brown": "a0a8630959d3d937873b1265b0a05497",
    "qc": "afd4145ac31cb8d7db715974b9b8b57a",
}


def md5(path: Path) -> str:
    return file_digest(path, "md5")


def local_copy(name: str) -> Optional[Path]:
    """The first ``corpora/NAME.zip`` in NLTK's data roots, or None."""
    for root in nltk.data.path:
        candidate = Path(root) / "corpora" / f"{name}.zip"
        if candidate.is_file():
            return candidate
    return None


def _roots() -> str:
    """NLTK_DATA as set, or that it is not."""
    value = os.environ.get("NLTK_DATA")
    return f"NLTK_DATA={value}" if value else "NLTK_DATA is not set"


def _download(url: str, dest: Path, name: str) -> None:
    """``url`` into ``dest``; no connection is a CorpusError saying where the file could come from instead."""
    try:
        urllib.request.urlretrieve(url, dest)
    except OSError as err:  # URLError, a refused or dropped connection, a timeout
        reason = getattr(err, "reason", None) or err
        raise CorpusError(f"corpora/{name}.zip is in no NLTK data root ({_roots()}) and downloading it from "
                          f"{url} failed ({reason}): set NLTK_DATA to a folder holding corpora/{name}.zip, "
                          "or connect to the internet") from None


def fetch_nltk_data(dest: Path, names: Iterable[str] = PACKAGES, offline: bool = False) -> List[str]:
    """Put each corpus zip under ``dest/corpora/``, checksum-verified.

    Prefers a copy found in the current NLTK data roots (``NLTK_DATA``); falls
    back to downloading. Writes to a temporary file first so an interrupted
    fetch never leaves a truncated zip. Returns one line per package."""
    target = Path(dest) / "corpora"
    target.mkdir(parents=True, exist_ok=True)
    report = []
    for name in names:
        if name not in PACKAGES:
            raise CorpusError(f"unknown NLTK package {name!r}; expected one of {', '.join(PACKAGES)}")
        out = target / f"{name}.zip"
        if out.is_file() and md5(out) == PACKAGES[name]:
            report.append(f"{name}: already present")
            continue
        source = local_copy(name)
        if source is not None and source.resolve() != out.resolve():
            how = f"copied from {source}"
        elif offline:
            raise CorpusError(f"corpora/{name}.zip is in no NLTK data root ({_roots()}) and --offline forbids "
                              f"downloading it: set NLTK_DATA to a folder holding corpora/{name}.zip")
        else:
            how = f"downloaded from {NLTK_DATA_URL.format(name=name)}"
        fd, tmp = tempfile.mkstemp(dir=target, suffix=".part")
        os.close(fd)
        try:
            if source is not None:
                shutil.copyfile(source, tmp)
            else:
                _download(NLTK_DATA_URL.format(name=name), Path(tmp), name)
            got = md5(Path(tmp))
            if got != PACKAGES[name]:
                raise CorpusError(f"{name}.zip checksum mismatch: expected {PACKAGES[name]}, got {got}")
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        report.append(f"{name}: {how}")
    return report

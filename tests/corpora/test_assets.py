"""Fetching the corpus zips: without a local copy and without a connection,
``fetch-data`` fails with one line that names NLTK_DATA and the missing
file, not a traceback."""
import os
import subprocess
import sys
import urllib.error

import nltk
import pytest

from spacy_structpref.corpora import assets
from spacy_structpref.errors import CorpusError


def test_no_copy_and_no_connection_names_nltk_data_and_the_file(tmp_path, monkeypatch):
    def refused(url, dest):
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty")])
    monkeypatch.setattr(assets.urllib.request, "urlretrieve", refused)
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "empty"))
    with pytest.raises(CorpusError, match=r"corpora/qc\.zip is in no NLTK data root \(NLTK_DATA=.*empty\) "
                                          r"and downloading it from https://\S+/qc\.zip failed \(.*refused"):
        assets.fetch_nltk_data(tmp_path / "out", ["qc"])
    monkeypatch.delenv("NLTK_DATA")
    with pytest.raises(CorpusError, match="NLTK_DATA is not set.*--offline forbids"):
        assets.fetch_nltk_data(tmp_path / "out", ["qc"], offline=True)
    assert not list((tmp_path / "out" / "corpora").iterdir())  # no partial file left


def test_fetch_data_offline_without_corpora_is_one_failure_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    # NLTK also looks in a few fixed folders: the test needs them without the corpus
    from_env = os.environ.get("NLTK_DATA", "").split(os.pathsep)
    if any(os.path.isfile(os.path.join(root, "corpora", "treebank.zip")) for root in nltk.data.path
           if root not in from_env):
        pytest.skip("a default NLTK data folder holds the corpora")
    closed_proxy = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused
    env = {**os.environ, "NLTK_DATA": str(empty), "HOME": str(tmp_path), "https_proxy": closed_proxy,
           "HTTPS_PROXY": closed_proxy, "no_proxy": "", "NO_PROXY": ""}
    out = subprocess.run([sys.executable, "-m", "spacy_structpref", "fetch-data", str(tmp_path / "data")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 1 and "Traceback" not in out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("✘") and f"NLTK_DATA={empty}" in lines[0]
    assert "corpora/treebank.zip" in lines[0]

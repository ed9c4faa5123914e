import subprocess
import sys

import pytest
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_structpref.cli import app
from spacy_structpref.cli.convert import convert
from spacy_structpref.corpora.assets import PACKAGES, fetch_nltk_data, md5
from spacy_structpref.errors import CorpusError


def test_convert_ptb_writes_splits(tmp_path, nlp):
    rows = convert("ptb", tmp_path, limit=5)
    assert [r["split"] for r in rows] == ["train", "dev", "test"]
    docs = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(nlp.vocab))
    assert len(docs) == 5 and docs[0]._.parse is not None
    assert not list(tmp_path.glob("*.part"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.spacy", "test.spacy", "train.spacy"]


def test_convert_unknown_corpus(tmp_path):
    with pytest.raises(CorpusError, match="unknown corpus"):
        convert("penn", tmp_path)


def test_module_cli_reports_errors_cleanly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "spacy_structpref", "convert", "penn", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "unknown corpus 'penn'" in out.stderr
    assert "Traceback" not in out.stderr


def test_spacy_cli_reports_errors_cleanly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "spacy", "structpref-convert", "penn", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "unknown corpus 'penn'" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


@pytest.mark.parametrize("args,message", [
    (["learning-curve", "out", "-c", "a.cfg", "--train", "t", "--test", "t", "--fractions", "a,b"],
     "--fractions must be a comma-separated list of numbers, got 'a,b'"),
    (["label-map", "no-such-model", "map.png"], "no trained pipeline at 'no-such-model'"),
    (["draw-tree", "(S (NP", "t.svg"], ""),
])
def test_structpref_errors_are_one_failure_line(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output


def test_fetch_copies_and_verifies(tmp_path):
    report = fetch_nltk_data(tmp_path, ["treebank"], offline=True)
    assert "copied" in report[0]
    assert md5(tmp_path / "corpora" / "treebank.zip") == PACKAGES["treebank"]
    assert "already present" in fetch_nltk_data(tmp_path, ["treebank"], offline=True)[0]


def test_spacy_cli_has_our_commands():
    out = subprocess.run([sys.executable, "-m", "spacy", "--help"], capture_output=True, text=True)
    assert "structpref-convert" in out.stdout


def test_draw_tree_svg(tmp_path):
    import xml.etree.ElementTree as ET

    out = tmp_path / "t.svg"
    res = subprocess.run([sys.executable, "-m", "spacy_structpref", "draw-tree",
                          "(TOP (S (NP (DT The) (NN cat)) (VP (VBZ sits))))", str(out)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    texts = [e.text for e in ET.parse(out).getroot() if e.tag.endswith("text")]
    assert sorted(texts) == sorted(["TOP", "S", "NP", "DT", "NN", "VP", "VBZ", "The", "cat", "sits"])


def test_evaluate_parse_refuses_a_pipeline_without_parser(tmp_path, nlp):
    from spacy_structpref.cli.evaluate import evaluate_parse
    from spacy_structpref.errors import StructPrefError

    convert("ptb", tmp_path / "corpus", limit=3)
    nlp.to_disk(tmp_path / "blank")
    with pytest.raises(StructPrefError, match="no component that writes constituents"):
        evaluate_parse(str(tmp_path / "blank"), tmp_path / "corpus" / "test.spacy", output=tmp_path / "scores.json")
    assert not (tmp_path / "scores.json").exists()

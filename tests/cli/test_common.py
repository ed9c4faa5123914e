"""Every command ends bad input in one ``✘`` line on stderr and exit status
1, never a traceback (``cli.common``: the error-reporting decorator and the
checks of the paths a command writes), and spaCy's own commands report our
errors the same way."""
import subprocess
import sys

import pytest
import spacy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_structpref.cli import app

GOLD = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))"


def one_failure(result, *needles):
    """The command failed with exit status 1 and one ✘ line holding every needle."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, (KeyError, TypeError))
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("✘"), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def files(tmp_path):
    """A directory, a file that is no DocBin, a DocBin of two gold trees and
    a pipeline without a parser, one with an (untrained) forest_parser."""
    from spacy_structpref.trees import parse_bracketed, tree_to_doc

    nlp = spacy.blank("en")
    (tmp_path / "adir").mkdir()
    (tmp_path / "junk.spacy").write_text("not a DocBin")
    (tmp_path / "plain.txt").write_text("a file")
    DocBin(docs=[tree_to_doc(nlp.vocab, parse_bracketed(GOLD))] * 2).to_disk(tmp_path / "gold.spacy")
    nlp.to_disk(tmp_path / "blank")
    parser = spacy.blank("en")
    parser.add_pipe("forest_parser")
    parser.to_disk(tmp_path / "parser")
    (tmp_path / "trees.txt").write_text(GOLD + "\n" + GOLD + "\n")
    return tmp_path


def test_draw_tree_bad_inputs(files):
    one_failure(run("draw-tree", GOLD, files / "adir"), "is a directory")
    one_failure(run("draw-tree", files / "missing.spacy", files / "t.svg"), "no .spacy file", "missing.spacy")
    one_failure(run("draw-tree", files / "junk.spacy", files / "t.svg"), "is not a DocBin")
    one_failure(run("draw-tree", GOLD, files / "plain.txt" / "t.svg"), "is not a directory")
    one_failure(run("draw-tree", "(S (NP", files / "t.svg"))
    deep = "(TOP " + "(S " * 1000 + "(NN w)" + ")" * 1001
    result = run("draw-tree", deep, files / "deep.svg")
    assert result.exit_code == 0 and (files / "deep.svg").read_text().count("<text") == 1003


def test_convert_bad_inputs(files):
    one_failure(run("convert", "ptb", files / "plain.txt", "--limit", 2), "is a file, not a directory")
    one_failure(run("convert", "ptb", files / "plain.txt" / "out", "--limit", 2), "cannot make")
    one_failure(run("convert", "ptb", files / "out", "--limit", -5), "limit")
    one_failure(run("convert", "penn", files / "out"), "unknown corpus")
    assert not (files / "out").exists()


def test_evaluate_parse_bad_inputs(files):
    gold = files / "gold.spacy"
    one_failure(run("evaluate-parse", files / "no-model", gold))
    one_failure(run("evaluate-parse", files / "blank", gold), "no component that writes constituents")
    one_failure(run("evaluate-parse", files / "parser", files / "missing.spacy"), "no .spacy file")
    one_failure(run("evaluate-parse", files / "parser", files / "junk.spacy"), "is not a DocBin")
    one_failure(run("evaluate-parse", files / "parser", gold, "--output", files / "adir"), "is a directory")
    one_failure(run("evaluate-parse", files / "parser", gold), "not trained")


def test_gram_bad_inputs(files):
    one_failure(run("gram", files / "trees.txt", files / "adir", "--n-workers", 0), "is a directory")
    one_failure(run("gram", files / "missing.txt", files / "k.npy", "--n-workers", 0), "no tree file")
    one_failure(run("gram", files / "trees.txt", files / "k.npy", "--n-workers", 0, "--lam", 0), "λ")
    assert not (files / "k.npy").exists()


def test_evalb_bad_inputs(files):
    one_failure(run("evalb", files / "missing.txt", files / "trees.txt"), "cannot read", "missing.txt")
    one_failure(run("evalb", files / "adir", files / "trees.txt"), "cannot read")


def test_evalb_stops_as_evalb_at_its_12th_error(tmp_path):
    """EVALB prints each error, then exits at error MAX_ERROR + 2 with what it
    printed so far: the header and the lines of the sentences before."""
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text((GOLD + "\n") * 16)
    test.write_text((GOLD + "\n") * 3 + (GOLD.replace("cat", "dog") + "\n") * 13)
    result = run("evalb", gold, test)
    assert result.exit_code == 1
    errors = result.stderr.splitlines()
    assert errors == [f"{i} : Words unmatch (cat|dog)" for i in range(4, 16)]
    lines = result.stdout.splitlines()
    assert len(lines) == 3 + 14 and lines[0].startswith("  Sent.") and "Summary" not in result.stdout
    first = run("evalb", gold, test, "-e", -1)  # EVALB: stops at the first error
    assert first.exit_code == 1 and first.stderr.splitlines() == ["4 : Words unmatch (cat|dog)"]
    assert len(first.stdout.splitlines()) == 3 + 3
    every = run("evalb", gold, test, "--score-all")
    assert every.exit_code == 0 and len(every.stderr.splitlines()) == 13 and "Summary" in every.stdout


def test_spacy_train_reports_our_errors_in_one_line(files):
    """A StructPrefError inside ``spacy train`` (here a setting refused when
    the pipeline is built) is one ✘ line, as in our commands."""
    from tests.helpers.paths import CONFIGS

    gold = files / "gold.spacy"
    out = subprocess.run([sys.executable, "-m", "spacy", "train", str(CONFIGS / "attachment_predictor.cfg"),
                          "--paths.train", str(gold), "--paths.dev", str(gold),
                          "--components.attachment_predictor.beam_width", "1000000"],
                         capture_output=True, text=True, cwd=files)
    assert out.returncode == 1 and "Traceback" not in out.stderr + out.stdout
    assert out.stderr.strip().splitlines() == [
        "✘ attachment_predictor: beam_width must be an integer from 1 to 100, got 1000000"]


@pytest.mark.fuzz
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=st.one_of(st.text(alphabet="()SNP ab\t", max_size=30), st.binary(max_size=60)),
       as_file=st.booleans())
def test_fuzz_draw_tree_draws_or_fails_in_one_line(tmp_path, source, as_file):
    """Any bracket text, or any bytes as a .spacy file: a picture, or one ✘ line."""
    if isinstance(source, bytes) or as_file:
        path = tmp_path / "input.spacy"
        path.write_bytes(source if isinstance(source, bytes) else source.encode())
        source = path
    result = run("draw-tree", source, tmp_path / "out.svg")
    if result.exit_code == 0:
        assert (tmp_path / "out.svg").read_text().startswith("<svg")
    else:
        one_failure(result)

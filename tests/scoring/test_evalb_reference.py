"""Our scorer against the original EVALB (Sekine & Collins 1997, run as
``evalb -p COLLINS.prm GOLD TEST``) on the reference outputs in
``../shared/evalb``: the PTB-sample test parses and one-sentence edge cases.

Each reference holds EVALB's standard output with its standard error lines
(the errors) inserted where the two streams met; the test requires the
reference to be exactly our :meth:`ParsevalResult.report` with our error
messages inserted, each whole and in order: every per-sentence line, the
totals, both summary blocks (error and skip counts included) and every error
line must match character for character."""

import pytest

from spacy_structpref.scoring.parseval import evalb, evalb_files, read_lines
from spacy_structpref.trees import parse_bracketed
from tests.helpers.paths import SHARED

EVALB_DIR = SHARED / "evalb"
pytestmark = pytest.mark.skipif(not EVALB_DIR.is_dir(), reason=f"no EVALB reference outputs at {EVALB_DIR} "
                                "(../shared/evalb beside the checkout)")


def _pairs():
    if not EVALB_DIR.is_dir():
        return []
    pairs = [("ptb_test", EVALB_DIR / "ptb_test.gold", EVALB_DIR / "ptb_test.parsed")]
    pairs += [(p.stem, p, p.with_suffix(".test")) for p in sorted((EVALB_DIR / "cases").glob("*.gold"))]
    return pairs


def assert_same_as_evalb(result, reference: str) -> None:
    """``reference`` is ``result.report()`` with each message line inserted whole, in order."""
    out = result.report()
    at_out = at_ref = 0
    for _, message in result.messages:
        where = reference.find(message + "\n", at_ref)
        assert where >= 0, f"EVALB does not report {message!r}"
        chunk = reference[at_ref:where]
        assert out.startswith(chunk, at_out), f"stdout differs before {message!r}"
        at_out, at_ref = at_out + len(chunk), where + len(message) + 1
    assert reference[at_ref:] == out[at_out:]


@pytest.mark.parametrize("name,gold,test", _pairs(), ids=lambda x: x if isinstance(x, str) else "")
def test_scorer_equals_evalb(name, gold, test):
    reference = gold.with_suffix(".evalb").read_text(encoding="utf-8")
    assert_same_as_evalb(evalb_files(gold, test), reference)
    # the same sentences as trees (an empty line: no parse) give the same output
    trees = evalb([parse_bracketed(line) for line in read_lines(gold)],
                  [parse_bracketed(line) if line.strip() else None for line in read_lines(test)])
    assert_same_as_evalb(trees, reference)


def test_reference_set_is_complete():
    names = {name for name, _, _ in _pairs()}
    assert "ptb_test" in names and len(names) >= 30


def test_ptb_test_figures():
    """The figures the README quotes: EVALB excludes the two "Length unmatch" sentences."""
    r = evalb_files(EVALB_DIR / "ptb_test.gold", EVALB_DIR / "ptb_test.parsed")
    assert (r.all.sentences, r.all.errors, r.all.skipped) == (413, 2, 0)
    assert (f"{r.all.f1:.2f}", f"{r.short.f1:.2f}") == ("76.57", "77.50")


def test_evalb_command_prints_evalb_output():
    from typer.testing import CliRunner

    from spacy_structpref.cli import app

    case = EVALB_DIR / "cases" / "word_mismatch"
    res = CliRunner().invoke(app, ["evalb", str(case.with_suffix(".gold")), str(case.with_suffix(".test"))])
    assert res.exit_code == 0, res.output
    assert res.stderr == "1 : Words unmatch (He|She)\n"
    assert res.stdout + res.stderr == case.with_suffix(".evalb").read_text(encoding="utf-8")


def test_the_docs_route_scores_as_evalb():
    """The reference parses put on Docs and scored through spaCy's scorer
    (what ``nlp.evaluate`` and ``spacy train`` report) give EVALB's figures:
    its two length-error sentences left out and counted, not scored."""
    import spacy
    from spacy.training import Example

    from spacy_structpref.scoring.parseval import score_parseval
    from spacy_structpref.trees import tree_to_doc

    vocab = spacy.blank("en").vocab
    examples = [Example(tree_to_doc(vocab, parse_bracketed(test)), tree_to_doc(vocab, parse_bracketed(gold)))
                for gold, test in zip(read_lines(EVALB_DIR / "ptb_test.gold"),
                                      read_lines(EVALB_DIR / "ptb_test.parsed"))]
    scores = score_parseval(examples)
    assert scores["parseval_errors"] == 2 and scores["parseval_skipped"] == 0
    assert (f"{100 * scores['parseval_f']:.2f}", f"{100 * scores['parseval_f_40']:.2f}") == ("76.57", "77.50")

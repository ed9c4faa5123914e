"""Adds our commands to spaCy's CLI as ``python -m spacy structpref-COMMAND``,
our components' scores to the table of ``python -m spacy evaluate``, and
one-line failures to spaCy's own commands: a StructPrefError our code raises
inside ``spacy train`` (a bad setting, a bad corpus, a damaged save) ends the
command in one ``✘`` line and exit status 1, as in our commands, instead of
a traceback; every other error reaches spaCy as before.

Loaded through the ``spacy_cli`` entry point, which spaCy imports when its CLI
starts; importing the module is what registers the commands.

spaCy's ``evaluate`` (and ``benchmark accuracy``) prints a fixed list of
scores (``TOK``, ``TAG``, ``UAS``, ``NER F`` …), so a pipeline's PARSEVAL
scores would reach only its ``--output`` JSON. Its last step,
``handle_scores_per_type`` (the per-label tables), is wrapped here to print
a second table with the scores our factories declare in
``default_score_weights`` (:data:`.score_names.SCORE_NAMES`), and to leave out of the JSON
the ``token_*`` scores that are null when the evaluation does not tokenise
(``--gold-preproc``)."""
import importlib
from typing import Any, Dict

from spacy.cli._util import app as spacy_app
from wasabi import Printer

from .common import reporting_errors
from .score_names import SCORE_NAMES, format_score
from . import app as structpref_app


def _report_our_errors(typer_app) -> None:
    """Wrap the callbacks of ``typer_app``'s commands, and of its groups', in
    :func:`~.common.reporting_errors` for StructPrefErrors (once)."""
    for info in typer_app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "reports_our_errors", False):
            info.callback = reporting_errors(info.callback, os_errors=False)
            info.callback.reports_our_errors = True
    for group in typer_app.registered_groups:
        _report_our_errors(group.typer_instance)


_report_our_errors(spacy_app)
for command in structpref_app.registered_commands:
    spacy_app.command(f"structpref-{command.name}", help=command.callback.__doc__,
                      context_settings=command.context_settings)(command.callback)

register = structpref_app

# spaCy's own table prints these (tag_acc as TAG)
SPACY_ROWS = ("tag_acc",)
NULL_WHEN_NOT_TOKENISING = ("token_acc", "token_p", "token_r", "token_f")


def score_rows(scores: Dict[str, Any]) -> Dict[str, str]:
    """{row name: formatted value} of our scores (:data:`.score_names.SCORE_NAMES`)
    present in ``scores`` that spaCy's table does not print."""
    return {name: format_score(scores[key]) for key, name in SCORE_NAMES.items()
            if key in scores and key not in SPACY_ROWS}


def handle_scores_per_type(scores: Dict[str, Any], data: Dict[str, Any] = {}, *, spans_key: str = "sc",
                           silent: bool = False) -> Dict[str, Any]:
    """spaCy's per-type tables, then our scores' table; returns the scores
    ``evaluate`` writes to its JSON, without null ``token_*`` fields."""
    scores = _spacy_handle_scores_per_type(scores, data, spans_key=spans_key, silent=silent)
    rows = score_rows(scores)
    if rows:
        Printer(no_print=silent, pretty=not silent).table(rows, title="Results (spacy-structpref)")
    for key in NULL_WHEN_NOT_TOKENISING:
        if key in scores and scores[key] is None:
            del scores[key]
    return scores


# the module (``spacy.cli.evaluate`` as an attribute is the function of that name)
_spacy_evaluate = importlib.import_module("spacy.cli.evaluate")
_spacy_handle_scores_per_type = getattr(_spacy_evaluate.handle_scores_per_type, "__wrapped__",
                                        _spacy_evaluate.handle_scores_per_type)  # wrapped once
handle_scores_per_type.__wrapped__ = _spacy_handle_scores_per_type
_spacy_evaluate.handle_scores_per_type = handle_scores_per_type

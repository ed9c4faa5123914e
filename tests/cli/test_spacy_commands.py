"""spaCy's own commands show our scores: the components declare them
(``default_score_weights``: the columns of ``spacy train``'s table), and
``spacy evaluate`` prints PARSEVAL F1 (all and ≤ 40 words) in a table of its
own, with no null ``token_*`` fields in its JSON when it does not tokenise."""
import importlib
import json
import subprocess
import sys

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import load_config

from spacy_structpref.cli.score_names import SCORE_NAMES
from spacy_structpref.cli.spacy_commands import score_rows
from spacy_structpref.corpora import corpus_docs

from tests.helpers.fixtures import slow_fixture
from tests.helpers.paths import CONFIGS, TRAINING_CONFIGS

PARSERS = ("forest_parser", "parse_reranker", "attachment_predictor")


@pytest.mark.parametrize("factory", ["distro_tagger", *PARSERS])
def test_factories_declare_scores_spacy_shows(factory):
    importlib.import_module("spacy_structpref.components.factories")  # registers the factories
    weights = Language.get_factory_meta(factory).default_score_weights
    assert set(weights) <= set(SCORE_NAMES), set(weights) - set(SCORE_NAMES)
    train_columns = {key for key, weight in weights.items() if weight is not None}
    wanted = {"tag_acc"} if factory == "distro_tagger" else {"parseval_f", "parseval_f_40"}
    assert wanted <= train_columns


@pytest.mark.parametrize("config", TRAINING_CONFIGS)
def test_configs_train_tables_show_the_main_scores(config):
    cfg = load_config(CONFIGS / config, interpolate=False)
    columns = {k for k, v in cfg["training"]["score_weights"].items() if v is not None}
    pipes = set(cfg["nlp"]["pipeline"])
    if "distro_tagger" in pipes and not pipes & set(PARSERS):
        assert "tag_acc" in columns
    if pipes & {"kernel_textcat", "distro_textcat"}:  # classifiers: a parser before them is a means
        assert any(column.startswith("cats_") for column in columns), columns
    elif pipes & set(PARSERS):
        assert {"parseval_f", "parseval_f_40"} <= columns


def test_score_rows():
    rows = score_rows({"tag_acc": 0.9, "parseval_f": 0.5, "parseval_f_40": 0.51234, "parse_fallbacks": 2,
                       "attach_acc": None, "speed": 10.0})
    assert rows == {"PARSEVAL F": "50.00", "PARSEVAL F ≤40": "51.23", "ATTACH ACC": "-", "PARSE FALLBACKS": "2"}


@slow_fixture
def trained(tmp_path_factory):
    """A tiny trained distro_tagger + forest_parser pipeline and a test corpus."""
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger")
    nlp.add_pipe("forest_parser", config={"set_tags": False, "k": 2})
    gold = corpus_docs("ptb", "train", nlp.vocab, limit=40)
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in gold]
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    out = tmp_path_factory.mktemp("evaluate")
    nlp.to_disk(out / "model")
    DocBin(docs=[d for d in corpus_docs("ptb", "test", nlp.vocab, limit=20) if len(d) <= 25][:6],
           store_user_data=True).to_disk(out / "test.spacy")
    return out


def test_spacy_evaluate_shows_parseval_and_tag(trained):
    result = subprocess.run([sys.executable, "-m", "spacy", "evaluate", str(trained / "model"),
                             str(trained / "test.spacy"), "--output", str(trained / "scores.json"),
                             "--gold-preproc"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    table = result.stdout
    assert "TAG" in table and "Results (spacy-structpref)" in table
    for row in ("PARSEVAL F ", "PARSEVAL F ≤40", "PARSE FALLBACKS"):
        assert row in table
    scores = json.loads((trained / "scores.json").read_text())
    assert {"tag_acc", "parseval_f", "parseval_f_40"} <= set(scores)
    assert not [key for key in scores if key.startswith("token_")]  # gold tokens: no tokenisation scores

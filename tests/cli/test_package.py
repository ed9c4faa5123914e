"""The main job's pipeline package: ``select-parser`` keeps the parser with
the higher dev F1, ``package-meta`` writes the package's meta.json, and the
project's ``package`` step (``spacy assemble configs/package.cfg``, ``spacy
evaluate``, ``package-meta``, ``spacy package``) makes an sdist that pip
installs and ``spacy.load`` loads by name."""
import json
import os
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example

import spacy_structpref
from spacy_structpref.cli.package import package_meta, requirement, select_parser
from spacy_structpref.corpora import corpus_docs, ptb_trees
from spacy_structpref.errors import StructPrefError
from tests.helpers.fixtures import slow_fixture
from tests.helpers.paths import CONFIGS


def _trained(path, performance):
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"lang": "en", "performance": performance}))
    (path / "weights").write_text("w")
    return path


def test_select_parser_keeps_the_higher_dev_f1(tmp_path):
    pcfg = _trained(tmp_path / "pcfg", {"parseval_f": 0.76, "parseval_f_40": 0.77})
    span = _trained(tmp_path / "span", {"parseval_f": 0.86})
    out = tmp_path / "selected"
    out.mkdir()
    (out / "stale").write_text("from an earlier selection")
    result = select_parser([pcfg, span], tmp_path / "selection.json", copy_to=out)
    assert result["selected"] == str(span) and [c["dev"]["parseval_f"] for c in result["candidates"]] == [0.76, 0.86]
    assert json.loads((tmp_path / "selection.json").read_text()) == result
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "weights"]
    assert select_parser([pcfg, _trained(tmp_path / "tie", {"parseval_f": 0.76})],
                         tmp_path / "s.json")["selected"] == str(pcfg)  # the first of equals
    with pytest.raises(StructPrefError, match="no meta.json"):
        select_parser([tmp_path / "missing"], tmp_path / "s.json")
    with pytest.raises(StructPrefError, match="no dev score 'parseval_f'"):
        select_parser([_trained(tmp_path / "tagger", {"tag_acc": 0.96})], tmp_path / "s.json")


def test_package_meta_takes_the_measured_scores(tmp_path):
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({"tag_acc": 0.95, "parseval_f": 0.8, "parse_fallbacks": 0, "speed": 900.0,
                                  "cats_score": None, "tag_per_type": {"NN": {"p": 1.0}}}))
    selection = tmp_path / "selection.json"
    selection.write_text(json.dumps({"selected": "span", "metric": "parseval_f", "candidates": [
        {"model": "pcfg", "dev": {"parseval_f": 0.761}}, {"model": "span", "dev": {"parseval_f": 0.8612}}]}))
    meta = package_meta(scores, "structpref_ptb", "1.2.3", selection)
    assert meta["performance"] == {"tag_acc": 0.95, "parseval_f": 0.8, "parse_fallbacks": 0, "speed": 900.0}
    assert meta["name"] == "structpref_ptb" and meta["version"] == "1.2.3"
    assert meta["requirements"] == [requirement()] and requirement("0.1.0") == "spacy-structpref>=0.1.0,<0.2.0"
    assert "parser: span (dev parseval_f: pcfg 76.10, span 86.12)" in meta["description"]
    scores.write_text("{}")
    with pytest.raises(StructPrefError, match="holds no scores"):
        package_meta(scores, "x", "1")


@slow_fixture
def component_pipelines(tmp_path_factory):
    """Four tiny trained pipelines, one per component of configs/package.cfg,
    and a test corpus of short sentences."""
    out = tmp_path_factory.mktemp("components")
    short = [t for t in ptb_trees("train") if len(t.leaves()) <= 15]
    gold = [d for d in corpus_docs("ptb", "train", spacy.blank("en").vocab, limit=300) if len(d) <= 15][:40]

    def examples(nlp, docs):
        return [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in docs]

    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger")
    train = examples(nlp, gold)
    optimizer = nlp.initialize(lambda: train)
    for _ in range(2):
        nlp.update(train, sgd=optimizer)
    nlp.to_disk(out / "tagger")
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"k": 5})
    nlp.add_pipe("parse_reranker", config={"k": 5, "n_folds": 2, "n_jobs": 1})
    train = examples(nlp, gold[:24])
    nlp.initialize(lambda: train)
    nlp.update(train)
    nlp.to_disk(out / "reranker")
    nlp = spacy.blank("en")
    predictor = nlp.add_pipe("attachment_predictor")
    train = [Example(d, d) for d in gold]
    nlp.initialize(lambda: train)
    predictor.update(train)
    nlp.to_disk(out / "attachment")
    test = [d for d in corpus_docs("ptb", "test", nlp.vocab, limit=40) if len(d) <= 15][:5]
    DocBin(docs=test, store_user_data=True).to_disk(out / "test.spacy")
    return out


def _run(args, cwd, env=None):
    result = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"{args}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def test_the_package_step_makes_a_package_pip_installs_and_spacy_loads(component_pipelines, tmp_path):
    """The project's `package` steps on the tiny pipelines, in this process
    (spacy assemble's and spacy evaluate's functions, package-meta, spacy
    package); pip installs the sdist offline into a folder of its own (the
    test's environment stays as it was), and a fresh interpreter with that
    folder on its path loads the package by name and parses."""
    from spacy.cli.evaluate import evaluate
    from spacy.cli.package import package
    from spacy.util import load_config, load_model_from_config

    src = component_pipelines
    # the parser and its reranker come from one reranking pipeline, as select-parser copies it
    config = load_config(CONFIGS / "package.cfg", overrides={
        "paths.tagger": str(src / "tagger"), "paths.parser": str(src / "reranker"),
        "paths.reranker": str(src / "reranker"), "paths.attachment": str(src / "attachment"),
        "paths.vectors": None})  # the fixture's parser is a PCFG: no static vectors
    load_model_from_config(config, auto_fill=True).to_disk(tmp_path / "pipeline")  # spacy assemble
    scores = evaluate(str(tmp_path / "pipeline"), src / "test.spacy", output=tmp_path / "scores.json",
                      gold_preproc=True)
    meta = package_meta(tmp_path / "scores.json", "structpref_test", "0.0.1")
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "packages").mkdir()
    package(tmp_path / "pipeline", tmp_path / "packages", meta_path=tmp_path / "meta.json", create_sdist=True,
            force=True, silent=True)
    sdist = tmp_path / "packages" / "en_structpref_test-0.0.1" / "dist" / "en_structpref_test-0.0.1.tar.gz"
    assert sdist.is_file()
    _run(["-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
          "--target", str(tmp_path / "site"), str(sdist)], tmp_path)
    assert "Requires-Dist: spacy-structpref" in \
        (tmp_path / "site" / "en_structpref_test-0.0.1.dist-info" / "METADATA").read_text()
    # the package and this library (from wherever the tests import it) on the path, run elsewhere
    library = os.path.dirname(os.path.dirname(spacy_structpref.__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), library])}
    out = _run(["-c", "import json, spacy\n"
                "nlp = spacy.load('en_structpref_test')\n"
                "doc = nlp('The old man saw the boy with the telescope .')\n"
                "print(json.dumps({'pipe_names': nlp.pipe_names, 'parse': str(doc._.parse), "
                "'leaves': doc._.parse.leaves(), 'attachment': doc[6]._.attachment['kind'], "
                "'performance': nlp.meta['performance'], 'requirements': nlp.meta['requirements']}))"],
               tmp_path.parent, env)
    loaded = json.loads(out.strip().splitlines()[-1])
    assert loaded["pipe_names"] == ["distro_tagger", "attachment_predictor", "forest_parser", "parse_reranker"]
    assert loaded["leaves"] == "The old man saw the boy with the telescope .".split()
    assert loaded["parse"].startswith("(TOP") and loaded["attachment"]
    assert loaded["performance"] == pytest.approx(meta["performance"], rel=1e-9)  # meta.json rounds
    assert {"tag_acc", "parseval_f", "attach_acc"} <= set(loaded["performance"]) <= set(scores)
    assert loaded["requirements"][0] == requirement()

"""The first-pass attachment tables of Menchetti et al. 2005 (Tables 1,
2, 4, 5) and pictures (Fig. 2 and a word's alternatives) as commands, run
tiny: a few training sentences, a few evaluation sentences, one RNN epoch."""
import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_structpref.cli import app
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.incremental import CPInventory, extend, preference_sets
from spacy_structpref.experiments.attachment_pictures import (AttachmentModel, alternatives_svg, path_positions,
                                                   principal_plane, read_sentence, word_alternatives)
from spacy_structpref.experiments.attachment_tables import parse_sizes, parse_tables
from spacy_structpref.learners import pairwise_error

from tests.helpers.fixtures import slow_fixture
from tests.helpers.paths import CONFIGS

LEARNERS = CONFIGS / "learners"
runner = CliRunner()


@pytest.fixture(scope="session")
def rnn_config(tmp_path_factory):
    """The RNN config with one epoch."""
    path = tmp_path_factory.mktemp("configs") / "rnn1.cfg"
    path.write_text(re.sub(r"(?m)^epochs = \d+$", "epochs = 1", (LEARNERS / "rnn.cfg").read_text()))
    return path


def test_pairwise_error_counts_pairs_and_ties():
    # set 1: gold 0 beats one of two (one pair wrong); set 2: a tie with gold counts; set 3: no gold, no pairs
    utilities = [[1.0, 2.0, 0.0], [3.0, 3.0], [1.0, 0.0]]
    assert pairwise_error(utilities, [0, 1, None]) == pytest.approx(2 / 3)
    with pytest.raises(StructPrefError):
        pairwise_error([[1.0]], [0])


def test_sizes_and_tables_are_checked():
    assert parse_sizes("100, 500,all") == [100, 500, None]
    assert parse_tables("5,1,2") == [1, 2, 5]
    for bad in ("0", "ten", ""):
        with pytest.raises(StructPrefError):
            parse_sizes(bad)
    with pytest.raises(StructPrefError):
        parse_tables("3")


def test_attachment_tables_tiny(tmp_path, rnn_config):
    out = tmp_path / "tables.json"
    result = runner.invoke(app, ["attachment-tables", str(out), "--sizes", "3,all", "--max-steps", "3",
                                 "--subsets", "2", "--subset-size", "8", "--vp-config", str(LEARNERS / "vp.cfg"),
                                 "--rnn-config", str(rnn_config)])
    assert result.exit_code == 0, result.output
    for head in ("Table 1.", "Table 2.", "Table 4.", "Table 5.", "VP on RNN state", "Size %"):
        assert head in result.output
    data = json.loads(out.read_text())
    settings = data["settings"]
    assert settings["eval_sentences"] == 3 and settings["sizes"] == [3] and settings["subset_size"] == 3
    # the RNN stopped early on the first dev sentences' sets (--max-steps caps them too)
    assert settings["validation_sentences"] == 3 and settings["validation_sets"] > 0
    t1 = data["table1"]
    assert sum(t1["class_sizes"].values()) == pytest.approx(100)
    assert [(r["learner"], r["sentences"]) for r in t1["rows"]] == [("VP", 3), ("RNN", 3)]
    sub = data["subset_tables"]
    assert len(sub["per_subset"]) == 2
    for subset in sub["per_subset"]:
        assert set(subset["models"]) == {"vp-setwise", "vp-pairwise", "rnn-setwise", "rnn-pairwise", "vp-linear"}
        for scores in subset["models"].values():
            assert 0 <= scores["L1"] <= 100 and 0 <= scores["pairwise_error"] <= 100


def test_attachment_tables_one_learner_on_dev(tmp_path, rnn_config):
    """``--learners rnn`` trains the RNN only; a dev evaluation leaves out the
    validation sentences."""
    out = tmp_path / "rnn.json"
    result = runner.invoke(app, ["attachment-tables", str(out), "--tables", "1,2", "--sizes", "4", "--subsets", "2",
                                 "--subset-size", "3", "--split", "dev", "--eval-sentences", "2",
                                 "--validation-sentences", "2", "--learners", "rnn", "--rnn-config", str(rnn_config)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    first = [s for t in ptb_trees("dev")[2:4] for s in preference_sets(t, CPInventory.from_trees(ptb_trees("train")))]
    assert data["settings"]["eval_sets"] == len(first) and data["settings"]["learners"] == ["rnn"]
    assert [r["learner"] for r in data["table1"]["rows"]] == ["RNN"]
    assert all(set(s["models"]) == {"rnn-setwise"} for s in data["subset_tables"]["per_subset"])
    result = runner.invoke(app, ["attachment-tables", str(out), "--tables", "4", "--learners", "vp", "--max-steps", "2"])
    assert result.exit_code == 1 and "Table 4 needs both" in result.output


def test_attachment_tables_bad_input(tmp_path):
    result = runner.invoke(app, ["attachment-tables", str(tmp_path / "t.json"), "--tables", "3"])
    assert result.exit_code == 1 and "tables are numbers" in result.output
    result = runner.invoke(app, ["attachment-tables", str(tmp_path / "t.json"), "--vp-config", str(tmp_path / "no.cfg")])
    assert result.exit_code == 1 and "no learner config" in result.output


@slow_fixture
def rnn_model(rnn_config):
    return AttachmentModel.train(rnn_config, 5)


def test_root_states_give_the_utilities(rnn_model):
    words, tags, tree = read_sentence("ptb:dev", 1)
    alts = word_alternatives(rnn_model, words, tags, 3, tree)
    learner = rnn_model.learner_for(alts.tags[3])
    states = alts.root_states()
    assert states.shape == (len(alts.edits), learner.width)
    with learner._averaged():
        o = learner.model.get_param("o")
    np.testing.assert_allclose(states @ o, alts.utilities, rtol=1e-4, atol=1e-5)
    coords, share = principal_plane(states)
    assert coords.shape == (len(states), 2) and 0 <= share.sum() <= 1 + 1e-9


def test_alternatives_on_gold_and_on_tagged_text(rnn_model):
    words, tags, tree = read_sentence("ptb:dev", 1)
    gold = word_alternatives(rnn_model, words, tags, 4, tree)
    s = preference_sets(tree, rnn_model.inventory)[3]
    assert gold.edits == s.edits and gold.gold == s.gold and gold.from_tree
    text = " ".join(f"{w}/{t}" for w, t in zip(words, tags))
    parsed = word_alternatives(rnn_model, *read_sentence(text)[:2], 4)
    assert parsed.gold is None and not parsed.from_tree and len(parsed.edits) == len(parsed.utilities)
    svg = alternatives_svg(gold, top=2)
    assert svg.startswith("<svg") and svg.count("<svg") == 1 + len({*np.argsort(-gold.utilities, kind="stable")[:2], gold.gold} - {None})
    for bad in (0, len(words)):
        with pytest.raises(StructPrefError, match="word must be"):
            word_alternatives(rnn_model, words, tags, bad, tree)
    with pytest.raises(StructPrefError, match="bracketed tree"):
        read_sentence("no tags here")


def test_path_positions_attach_and_lift():
    """On every gold candidate of a few PTB trees: the path ends at the new
    word's preterminal, its nodes cover the new word (a lift's root and spine
    all the words), and the anchor carries the CP type's anchor label."""
    trees = ptb_trees("dev")[:3]
    inventory = CPInventory.from_trees(trees)
    kinds = set()
    for tree in trees:
        words = tree.leaves()
        for s in preference_sets(tree, inventory):
            cp, depth = s.edits[s.gold]
            cand = extend(s.prefix, cp, depth, words[s.word])
            nodes, anchor = path_positions(cand, cp)
            assert cand[nodes[-1]].label() == cp.foot and cand[nodes[-1]].leaves() == [words[s.word]]
            assert cand[anchor].label() == cp.anchor and anchor not in nodes
            assert [cand[p].label() for p in nodes[-len(cp.chain):]] == list(cp.chain)
            if cp.kind == "lift":
                assert [cand[p].label() for p in nodes[:len(cp.spine)]] == list(cp.spine)
            kinds.add(cp.kind)
    assert kinds == {"attach", "lift"}


def test_picture_commands(tmp_path, rnn_config):
    png, svg = tmp_path / "fig2.png", tmp_path / "alts.svg"
    common = ["--index", "2", "--train-sentences", "4"]
    result = runner.invoke(app, ["attachment-pca", "ptb:dev", "3", str(png), "--config", str(rnn_config), *common])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = runner.invoke(app, ["attachment-alternatives", "ptb:dev", "3", str(svg), "--config",
                                 str(LEARNERS / "vp.cfg"), "--top", "3", *common])
    assert result.exit_code == 0, result.output
    assert svg.read_text().startswith("<svg") and "gold" in svg.read_text()
    # Fig. 2 needs the recursive net
    result = runner.invoke(app, ["attachment-pca", "ptb:dev", "3", str(tmp_path / "x.png"), "--config",
                                 str(LEARNERS / "vp.cfg"), *common])
    assert result.exit_code == 1 and "root states" in result.output
    result = runner.invoke(app, ["attachment-pca", "ptb:dev", "3", str(tmp_path / "x.gif"), "--config",
                                 str(rnn_config), *common])
    assert result.exit_code == 1 and ".png or .svg" in result.output


def test_random_sampling_nests_sizes_and_keeps_subsets_disjoint(rnn_config):
    """As the paper drew its training data: a seeded permutation of train;
    sizes are its prefixes (nested), subsets its blocks (disjoint); "first"
    keeps corpus order."""
    from spacy_structpref.experiments.attachment_tables import AttachmentExperiments

    def experiments(**kwargs):
        return AttachmentExperiments(LEARNERS / "vp.cfg", rnn_config, eval_sentences=1, validation_sentences=1,
                                     **kwargs)

    random, again, other = experiments(), experiments(), experiments(sample_seed=1)
    assert sorted(random.order) == list(range(len(random.train))) and random.order == again.order
    assert random.order != other.order and random.order[:10] != list(range(10))
    first = experiments(sampling="first")
    assert first.order == list(range(len(first.train)))
    a, b = random.training_sets(0, 3), random.training_sets(3, 6)
    expected = [s for i in random.order[:3] for s in preference_sets(random.train[i], random.inventory)]
    assert [(s.token, s.gold) for s in a] == [(s.token, s.gold) for s in expected]
    assert {id(t) for t in (random.train[i] for i in random.order[:3])}.isdisjoint(
        {id(t) for t in (random.train[i] for i in random.order[3:6])}) and b
    with pytest.raises(StructPrefError, match="sampling is one of"):
        experiments(sampling="shuffled")


def test_validation_may_take_all_of_dev_only_for_a_test_evaluation(rnn_config):
    """A test evaluation stops the RNN early on every dev sentence (by
    default); a dev evaluation on the first 200, and must keep some dev
    sentences to evaluate on; more than dev has is an error either way."""
    from spacy_structpref.corpora import ptb_trees
    from spacy_structpref.experiments.attachment_tables import AttachmentExperiments

    n_dev = len(ptb_trees("dev"))
    whole = AttachmentExperiments(LEARNERS / "vp.cfg", rnn_config, eval_sentences=1)  # by default on test
    assert whole.validation_sentences == n_dev and whole.eval_sentences == 1
    assert len(whole.validation) > 9000  # every dev sentence's preference sets
    on_dev = AttachmentExperiments(LEARNERS / "vp.cfg", rnn_config, split="dev")
    assert on_dev.validation_sentences == 200 and on_dev.eval_sentences == n_dev - 200
    # a VP never stops early: the same dev evaluation, no validation sets built
    vp_only = AttachmentExperiments(LEARNERS / "vp.cfg", rnn_config, split="dev", learners=["vp"], eval_sentences=1)
    assert vp_only.validation_sentences == 200 and vp_only.validation == []
    first = [(s.token, len(s)) for s in vp_only.eval_sets]
    assert first == [(s.token, len(s)) for s in on_dev.eval_sets[:len(first)]]
    with pytest.raises(StructPrefError, match="between 0 and the"):
        AttachmentExperiments(LEARNERS / "vp.cfg", rnn_config, split="dev", validation_sentences=n_dev)
    with pytest.raises(StructPrefError, match="between 0 and the"):
        AttachmentExperiments(LEARNERS / "vp.cfg", rnn_config, validation_sentences=n_dev + 1)


def test_validation_count():
    """The rule ``attachment-tables`` and ``bench/attachment.py`` share:
    all of dev for test, the first 200 for dev (leaving some to score)."""
    from spacy_structpref.experiments.attachment_tables import validation_count

    assert validation_count(None, "test", 433) == 433 and validation_count(None, "dev", 433) == 200
    assert validation_count(0, "dev", 433) == 0 and validation_count(432, "dev", 433) == 432
    for bad, split in ((-1, "test"), (434, "test"), (433, "dev")):
        with pytest.raises(StructPrefError, match="between 0 and the 433"):
            validation_count(bad, split, 433)


def test_rnn_ensembles_in_the_tables(tmp_path, rnn_config):
    """``--rnn-members N``: each RNN an ensemble of N nets (each stopping
    early on its own); Table 4 reads one net's states, so it refuses them."""
    out = tmp_path / "tables.json"
    result = runner.invoke(app, ["attachment-tables", str(out), "--tables", "1", "--sizes", "3", "--max-steps", "3",
                                 "--learners", "rnn", "--rnn-members", "2", "--rnn-config", str(rnn_config)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["settings"]["rnn_members"] == 2 and [r["learner"] for r in data["table1"]["rows"]] == ["RNN"]
    assert "each RNN the mean of 2 nets" in result.output
    # each foot class's best epochs are listed per member
    assert re.search(r"best validation epochs: \{'\w+': \[\[\d, 2\], \[\d, 2\]\]", result.output)
    result = runner.invoke(app, ["attachment-tables", str(out), "--tables", "4", "--max-steps", "3",
                                 "--rnn-members", "2", "--rnn-config", str(rnn_config)])
    assert result.exit_code == 1 and "rnn_members must be 1" in result.output
    result = runner.invoke(app, ["attachment-tables", str(out), "--rnn-members", "0"])
    assert result.exit_code == 1 and "--rnn-members is at least 1" in result.output

"""Loading refuses what it cannot trust: damaged, crafted or inconsistent
model files of the forest parser, the DISTRO tagger and textcat and the
learners give a StructPrefError naming the problem, never a crash and never a
silent load, and a refused load leaves the object as it was. Ends with a
bounded fuzz of model loading."""
import hashlib
import json
import shutil
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import spacy
import srsly
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.training import Example
from thinc.api import Adam

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.errors import GrammarError, SavedModelError, StructPrefError, TaggerError
from spacy_structpref.learners import (KernelPerceptron, LinearKernel, RecursiveNetLearner, Schedule,
                                       SpecialisedLearner, TreeKernel, fit)
from spacy_structpref.parsing.grammar import Grammar
from spacy_structpref.saving import MARKER
from spacy_structpref.trees import parse_bracketed, tree_to_doc

TREES = ["(TOP (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .)))",
         "(TOP (S (NP (DT A) (NN cat)) (VP (VBZ sleeps) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))"]
SETS = [[parse_bracketed(t) for t in TREES], [parse_bracketed(TREES[1]), parse_bracketed(TREES[0])]]


def _pipeline():
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger")
    nlp.add_pipe("forest_parser")
    golds = [tree_to_doc(nlp.vocab, parse_bracketed(t)) for t in TREES]
    nlp.initialize(lambda: [Example(nlp.make_doc(g.text), g) for g in golds])
    return nlp


def _rnn():
    return RecursiveNetLearner(width=4, max_children=3)


@lru_cache(maxsize=None)
def _nlp():
    """One Language to make components with (spacy.blank per load is slow)."""
    return spacy.blank("en")


# an empty object of each kind, to load into
MAKERS = {
    "forest_parser": lambda: _nlp().create_pipe("forest_parser"),
    "distro_tagger": lambda: _nlp().create_pipe("distro_tagger"),
    "perceptron": lambda: KernelPerceptron(TreeKernel()),
    "linear": lambda: KernelPerceptron(LinearKernel()),
    "rnn": _rnn,
    "specialised": lambda: SpecialisedLearner(KernelPerceptron(TreeKernel())),
}


def load(name: str, path: Path):
    return MAKERS[name]().from_disk(path)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    """A small trained thing of each kind, saved once: name -> directory."""
    root = tmp_path_factory.mktemp("saved")
    nlp = _pipeline()
    nlp.get_pipe("forest_parser").to_disk(root / "forest_parser")
    nlp.get_pipe("distro_tagger").to_disk(root / "distro_tagger")
    fit(KernelPerceptron(TreeKernel()), SETS, [0, 0]).to_disk(root / "perceptron")
    fit(KernelPerceptron(LinearKernel()), [np.eye(3), np.eye(3)[::-1]], [0, 1]).to_disk(root / "linear")
    fit(_rnn(), SETS, [0, 0], schedule=Schedule(epochs=2, optimizer=Adam(0.01))).to_disk(root / "rnn")
    spec = fit(SpecialisedLearner(KernelPerceptron(TreeKernel())), SETS * 2, [0, 0, 1, 1], ["a", "a", "b", "b"])
    spec.to_disk(root / "specialised")
    return {name: root / name for name in MAKERS}


@pytest.fixture
def copy(saved, tmp_path):
    """A fresh copy of a saved directory, to damage."""
    def make(name: str) -> Path:
        return Path(shutil.copytree(saved[name], tmp_path / name))
    return make


def resign(path: Path) -> None:
    """Recompute the marker's checksums: a crafted file, consistent with its
    marker, so that what is tested is the loader's own checks."""
    marker = json.loads((path / MARKER).read_text())
    marker["files"] = {name: hashlib.sha256((path / name).read_bytes()).hexdigest() for name in marker["files"]}
    (path / MARKER).write_text(json.dumps(marker))


def edit_msgpack(path: Path, edit) -> None:
    data = srsly.read_msgpack(path)
    edit(data)
    srsly.write_msgpack(path, data)


def test_everything_saved_loads(saved):
    for name in MAKERS:
        load(name, saved[name])


# -- grammars with ids out of range or inconsistent tables ----------------------------------------
@pytest.mark.parametrize("column, offset", [(0, 1000), (1, 1000), (2, 1), (0, 0)])
def test_grammar_rule_past_the_states_is_refused(copy, column, offset):
    path = copy("forest_parser")

    def edit(g):
        g["binary"][0][column] = len(g["states"]) + offset

    edit_msgpack(path / "grammar.msgpack", edit)
    resign(path)
    with pytest.raises(GrammarError, match=r"binary rule 0 refers to state \d+, but the grammar has \d+ states"):
        load("forest_parser", path)


@pytest.mark.parametrize("edit, match", [
    (lambda g: g["chains"][0][0].__setitem__(0, -1), "chain rule 0 refers to state -1"),
    (lambda g: g["tag_prior"].pop(next(iter(g["tag_prior"]))), "tag_word refers to tag state .* no tag_prior"),
    (lambda g: g["tag_sig"].pop(""), "rare-word distribution"),
    (lambda g: g["binary"][0].__setitem__(3, float("nan")), "binary rule probability nan"),
    (lambda g: g["word_count"].pop("dog"), "word_count and tag_word must list the same words"),
    (lambda g: g["states"].__setitem__(1, "TOP"), "distinct strings"),
])
def test_inconsistent_grammar_is_refused(copy, edit, match):
    path = copy("forest_parser")
    edit_msgpack(path / "grammar.msgpack", edit)
    resign(path)
    with pytest.raises(GrammarError, match=match):
        load("forest_parser", path)


def test_malformed_grammar_data_is_a_clear_error(copy):
    path = copy("forest_parser")
    edit_msgpack(path / "grammar.msgpack", lambda g: g.pop("binary"))
    resign(path)
    with pytest.raises(SavedModelError, match="cannot load a grammar: the saved data is malformed"):
        load("forest_parser", path)


@pytest.mark.fuzz
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_grammar_id_out_of_range_is_a_grammar_error(saved, data):
    g = srsly.read_msgpack(saved["forest_parser"] / "grammar.msgpack")
    S = len(g["states"])
    bad = data.draw(st.one_of(st.integers(-2**63, -1), st.integers(S, 2**63 - 1)))
    where = data.draw(st.sampled_from(["binary", "chains", "tag_prior", "tag_word", "tag_sig"]))
    if where == "binary":
        g["binary"][data.draw(st.integers(0, len(g["binary"]) - 1))][data.draw(st.integers(0, 2))] = bad
    elif where == "chains":
        chain = g["chains"][data.draw(st.integers(0, len(g["chains"]) - 1))][0]
        chain[data.draw(st.integers(0, len(chain) - 1))] = bad
    else:
        table = g[where] if where == "tag_prior" else g[where][data.draw(st.sampled_from(sorted(g[where])))]
        table[str(bad)] = 0.5
    with pytest.raises(GrammarError):
        Grammar.from_dict(g)


# -- files that do not match their marker, their kind or each other ------------------------------
@pytest.mark.parametrize("name, file", [("distro_tagger", "model"), ("rnn", "model.msgpack"),
                                        ("perceptron", "support.msgpack"), ("forest_parser", "grammar.msgpack")])
def test_a_byte_flipped_file_is_refused(copy, name, file):
    path = copy(name)
    data = bytearray((path / file).read_bytes())
    data[len(data) // 2] ^= 0x01
    (path / file).write_bytes(bytes(data))
    with pytest.raises(SavedModelError, match=f"{file} does not match the checksum saved with it"):
        load(name, path)


@pytest.mark.parametrize("entry", ["../outside_model", "/tmp", "learner0/../../x", "", "."])
def test_a_learner_index_entry_leaving_the_directory_is_refused(copy, tmp_path, entry):
    path = copy("specialised")
    shutil.copytree(path / "learner0", tmp_path / "outside_model")
    index = srsly.read_json(path / "learners.json")
    index[0][1] = entry
    srsly.write_json(path / "learners.json", index)
    resign(path)
    with pytest.raises(SavedModelError, match="not a name inside the directory|leads outside"):
        load("specialised", path)


def test_a_malformed_learner_index_is_refused(copy):
    path = copy("specialised")
    srsly.write_json(path / "learners.json", [["a", "learner0"], ["a", "learner1"]])
    resign(path)
    with pytest.raises(SavedModelError, match="distinct \\[key, directory\\] pairs"):
        load("specialised", path)


@pytest.mark.parametrize("part, match", [("alpha", "alpha of shape"), ("tau", "tau of shape"),
                                         ("items", "alpha of shape")])
def test_a_shortened_support_array_is_refused(copy, part, match):
    path = copy("perceptron")
    edit_msgpack(path / "support.msgpack", lambda s: s[part].pop())
    resign(path)
    with pytest.raises(SavedModelError, match=match):
        load("perceptron", path)


def test_a_failed_support_load_leaves_the_learner_as_it_was(copy, saved):
    learner = load("perceptron", saved["perceptron"])
    before = learner.utilities(SETS[0])
    path = copy("perceptron")
    edit_msgpack(path / "support.msgpack", lambda s: s["alpha"].pop())
    resign(path)
    with pytest.raises(SavedModelError):
        learner.from_disk(path)
    np.testing.assert_array_equal(learner.utilities(SETS[0]), before)


def test_ragged_linear_support_is_refused(copy):
    path = copy("linear")
    edit_msgpack(path / "support.msgpack", lambda s: s["items"][0].pop())
    resign(path)
    with pytest.raises(SavedModelError, match="rows of one length"):
        load("linear", path)


def test_rnn_weights_of_other_shapes_are_refused(copy):
    path = copy("rnn")
    weights = srsly.msgpack_loads(srsly.read_msgpack(path / "model.msgpack"))  # thinc's message, as bytes
    weights["params"][0]["E"] = weights["params"][0]["E"][:-1]
    srsly.write_msgpack(path / "model.msgpack", srsly.msgpack_dumps(weights))
    resign(path)
    with pytest.raises(SavedModelError, match="saved weights have the shapes"):
        load("rnn", path)


def test_rnn_cfg_and_weights_from_different_saves_are_refused(copy):
    path = copy("rnn")
    edit_msgpack(path / "cfg.msgpack", lambda c: c["vocab"].pop(sorted(c["vocab"], key=c["vocab"].get)[-1]))
    resign(path)
    with pytest.raises(SavedModelError, match="cannot load RecursiveNetLearner.*dimension 'nV'"):
        load("rnn", path)


@pytest.mark.parametrize("exclude", [(), ("cfg",)])
def test_a_refused_rnn_load_leaves_the_learner_as_it_was(copy, saved, exclude):
    """Weights of other shapes: the cfg they came with was adopted first
    (another label vocabulary), and the weights were loaded into the network
    itself, which the refusal then replaced by a fresh one."""
    learner = load("rnn", saved["rnn"])
    before = learner.vocab, learner.log.losses, learner.utilities(SETS[0])
    path = copy("rnn")
    if exclude:
        weights = srsly.msgpack_loads(srsly.read_msgpack(path / "model.msgpack"))
        weights["params"][0]["E"] = weights["params"][0]["E"][:-1]
        srsly.write_msgpack(path / "model.msgpack", srsly.msgpack_dumps(weights))
    else:
        edit_msgpack(path / "cfg.msgpack", lambda c: c["vocab"].pop(sorted(c["vocab"], key=c["vocab"].get)[-1]))
    resign(path)
    with pytest.raises(SavedModelError):
        learner.from_disk(path, exclude=exclude)
    assert (learner.vocab, learner.log.losses) == before[:2]
    np.testing.assert_array_equal(learner.utilities(SETS[0]), before[2])

def test_rnn_vocabulary_with_bad_ids_is_refused(copy):
    path = copy("rnn")
    edit_msgpack(path / "cfg.msgpack", lambda c: c["vocab"].update({next(iter(c["vocab"])): 10**6}))
    resign(path)
    with pytest.raises(SavedModelError, match="label vocabulary"):
        load("rnn", path)


def _nan_weight(data: bytes) -> bytes:
    """Thinc's message ``data`` with its first weight set to NaN."""
    msg = srsly.msgpack_loads(data)
    values = next(p for p in msg["params"] if p)
    name = next(iter(values))
    values[name] = np.array(values[name], copy=True)
    values[name].flat[0] = np.nan
    return srsly.msgpack_dumps(msg)


@pytest.mark.parametrize("name, file, nested", [("distro_tagger", "model", False),
                                                ("rnn", "model.msgpack", True)])
def test_nan_weights_in_a_checksum_consistent_save_are_refused(copy, saved, name, file, nested):
    """A save whose files match their marker but whose weights hold a NaN
    (a diverged training, or crafted) is refused at load, and the object
    loaded into stays as it was."""
    path = copy(name)
    data = (path / file).read_bytes()
    if nested:  # the learner writes thinc's bytes as one msgpack string
        (path / file).write_bytes(srsly.msgpack_dumps(_nan_weight(srsly.msgpack_loads(data))))
    else:
        (path / file).write_bytes(_nan_weight(data))
    resign(path)
    target = load(name, saved[name])
    with pytest.raises(SavedModelError, match="NaN or infinite"):
        target.from_disk(path)
    load(name, saved[name])  # the good save still loads


def test_nan_weights_in_a_span_crf_forest_parser_save_are_refused(tmp_path):
    from tests.parsing.test_span_parser import SMALL

    nlp = spacy.blank("en")
    parser = nlp.add_pipe("forest_parser", config={"model": {"@architectures": "spacy_structpref.SpanCRF.v1",
                                                             **SMALL}})
    parser.initialize_from_trees([parse_bracketed(t) for t in TREES])
    parser.to_disk(tmp_path / "span")
    model = tmp_path / "span" / "model.msgpack"
    model.write_bytes(srsly.msgpack_dumps(_nan_weight(srsly.msgpack_loads(model.read_bytes()))))
    resign(tmp_path / "span")
    fresh = nlp.create_pipe("forest_parser", config={"model": {"@architectures": "spacy_structpref.SpanCRF.v1",
                                                              **SMALL}})
    with pytest.raises(SavedModelError, match="NaN or infinite"):
        fresh.from_disk(tmp_path / "span")
    assert fresh._parser is None


def test_duplicate_labels_in_a_kernel_classifier_save_are_refused(tmp_path):
    from spacy_structpref.classification.classifier import KernelClassifier
    from spacy_structpref.classification.kernels import BowDocKernel

    nlp = spacy.blank("en")
    docs = [nlp.make_doc(t) for t in ("a b c", "b c d", "x y z", "y z w")]
    classifier = KernelClassifier(BowDocKernel()).fit(docs, ["P", "P", "Q", "Q"], progress=False)
    state = classifier.state()
    state["labels"] = ["P", "P"]
    with pytest.raises(SavedModelError, match="labels must be distinct"):
        KernelClassifier(BowDocKernel()).load_state(state, classifier.arrays())


def test_a_parser_k_below_the_rerankers_is_refused_at_load(tmp_path):
    """A save whose forest_parser keeps fewer candidates than the reranker
    takes (a crafted cfg, consistent with its marker) is refused at load."""
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"k": 10})
    nlp.add_pipe("parse_reranker", config={"k": 5})
    nlp.to_disk(tmp_path / "pipeline")
    assert spacy.load(tmp_path / "pipeline").get_pipe("parse_reranker").cfg["k"] == 5
    cfg = tmp_path / "pipeline" / "forest_parser" / "cfg.json"
    cfg.write_text(cfg.read_text().replace('"k":10', '"k":3'))
    resign(tmp_path / "pipeline" / "forest_parser")
    resign(tmp_path / "pipeline")  # the whole pipeline's marker covers the component's files too
    with pytest.raises(StructPrefError, match="forest_parser keeps 3-best lists, but parse_reranker reranks 5"):
        spacy.load(tmp_path / "pipeline")


def test_loading_into_the_wrong_kind_of_learner_names_both(saved):
    with pytest.raises(SavedModelError, match="holds a saved KernelPerceptron, not a RecursiveNetLearner"):
        load("rnn", saved["perceptron"])


# -- errors that say what is wrong and how to fix it ---------------------------------------------
def test_bad_tag_id_in_a_grammar_is_not_spacy_e109(copy):
    """A tag id outside the grammar is refused at load, naming the table,
    rather than met at parse time as a KeyError that spaCy reports as E109
    ("forgot to call initialize?")."""
    path = copy("forest_parser")
    edit_msgpack(path / "grammar.msgpack",
                 lambda g: next(iter(g["tag_word"].values())).update({str(len(g["states"]) + 3): 1.0}))
    resign(path)
    with pytest.raises(GrammarError, match="tag_word refers to tag state"):
        load("forest_parser", path)


def test_missing_distro_tagger_cfg(copy, saved, tmp_path):
    path = copy("distro_tagger")
    (path / "cfg").unlink()
    with pytest.raises(SavedModelError, match="cfg is missing from the saved distro_tagger"):
        load("distro_tagger", path)
    tagger = load("distro_tagger", saved["distro_tagger"])
    tagger.to_disk(tmp_path / "no_cfg", exclude=["cfg"])
    with pytest.raises(TaggerError, match="0 labels but its model scores"):
        load("distro_tagger", tmp_path / "no_cfg")


def test_a_refused_distro_tagger_load_leaves_it_as_it_was(saved):
    """The labels are checked before the cfg is adopted or the model loaded
    in place: a refused save leaves both as they were."""
    tagger = load("distro_tagger", saved["distro_tagger"])
    cfg, A = json.loads(json.dumps(tagger.cfg)), tagger.label_matrix
    msg = srsly.msgpack_loads(tagger.to_bytes())
    labels = cfg["labels"]

    def model(n_out=len(labels)):  # thinc's message of the model: A changed, the label count n_out
        weights = srsly.msgpack_loads(msg["model"])
        node = next(i for i, params in enumerate(weights["params"]) if "A" in params)
        weights["params"][node]["A"] = weights["params"][node]["A"] + 1
        weights["nodes"][0]["dims"]["nO"] = n_out
        return srsly.msgpack_dumps(weights)

    for bad, weights, match in (({"labels": labels[:1] * len(labels)}, model(), "distinct strings"),
                                ({"labels": labels[:-1]}, model(), "labels but its model scores"),
                                ({"tag_dictionary": {"x": 1}}, model(), "tag dictionary"),
                                ({"labels": labels + ["XX"]}, model(len(labels) + 1), "has nO")):
        with pytest.raises(StructPrefError, match=match):
            tagger.from_bytes(srsly.msgpack_dumps({**msg, "cfg": srsly.json_dumps({**cfg, **bad}), "model": weights}))
        assert tagger.cfg == cfg
        np.testing.assert_array_equal(tagger.label_matrix, A)


def test_a_refused_distro_textcat_cfg_is_not_adopted():
    textcat = _nlp().create_pipe("distro_textcat")
    cfg = dict(textcat.cfg)
    with pytest.raises(TaggerError, match="distinct strings"):
        textcat.from_bytes(srsly.msgpack_dumps({"cfg": srsly.json_dumps({**cfg, "labels": ["A", "A"]})}))
    assert textcat.cfg == cfg


def test_perceptron_cfg_without_a_kernel(copy):
    path = copy("perceptron")
    srsly.write_msgpack(path / "cfg.msgpack", {"learner": "perceptron"})
    resign(path)
    with pytest.raises(SavedModelError, match="names no kernel"):
        load("perceptron", path)
    srsly.write_msgpack(path / "cfg.msgpack", {"kernel": {"kind": "mystery"}})
    resign(path)
    with pytest.raises(StructPrefError, match="trained with the kernel {'kind': 'mystery'}"):
        load("perceptron", path)


def test_unknown_saved_parser_setting(copy):
    path = copy("forest_parser")
    cfg = srsly.read_json(path / "cfg.json")
    srsly.write_json(path / "cfg.json", {**cfg, "beam_size": 3})
    resign(path)
    with pytest.raises(SavedModelError, match=r"unknown saved setting\(s\) \['beam_size'\]"):
        load("forest_parser", path)


# -- the bounded fuzz: every damaged save is refused ------------------------------------------------
FUZZED = ("forest_parser", "distro_tagger", "perceptron")


@lru_cache(maxsize=None)
def _targets() -> dict:
    """One object per kind to load into: a refused load changes nothing, so
    the fuzz need not build a fresh one each time."""
    return {name: MAKERS[name]() for name in FUZZED}


@pytest.fixture(scope="module")
def scratch(saved, tmp_path_factory) -> dict:
    """Copies of the saves for the fuzz to damage in place (and restore)."""
    root = tmp_path_factory.mktemp("scratch")
    return {name: Path(shutil.copytree(saved[name], root / name)) for name in FUZZED}


def _damage(data, path: Path) -> None:
    """Flip a byte of, or truncate, one file of the saved directory."""
    file = data.draw(st.sampled_from(sorted(p for p in path.rglob("*") if p.is_file())))
    raw = bytearray(file.read_bytes())
    if raw and data.draw(st.booleans()):
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    else:
        del raw[data.draw(st.integers(0, max(len(raw) - 1, 0))):]
    file.write_bytes(bytes(raw))


def _restore(saved: Path, scratch: Path) -> None:
    shutil.rmtree(scratch)
    shutil.copytree(saved, scratch)


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_damaged_saves_are_always_refused(saved, scratch, data):
    name = data.draw(st.sampled_from(FUZZED))
    _damage(data, scratch[name])
    try:
        with pytest.raises(StructPrefError):
            _targets()[name].from_disk(scratch[name])
    finally:
        _restore(saved[name], scratch[name])


@pytest.mark.fuzz
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_crafted_grammar_and_support_never_crash(saved, scratch, data):
    """Damage re-signed into the marker (a crafted file): the loaders' own
    checks answer, with a StructPrefError or a model that then works."""
    name = data.draw(st.sampled_from(["forest_parser", "perceptron"]))
    file = {"forest_parser": "grammar.msgpack", "perceptron": "support.msgpack"}[name]
    raw = bytearray((scratch[name] / file).read_bytes())
    raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    (scratch[name] / file).write_bytes(bytes(raw))
    resign(scratch[name])
    try:
        loaded = load(name, scratch[name])
        if name == "forest_parser":
            loaded.parser.parse("The dog barks .".split())
        else:
            loaded.utilities(SETS[0])
    except StructPrefError:
        pass
    finally:
        _restore(saved[name], scratch[name])

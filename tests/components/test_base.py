"""components.base: every component saves its parts in spaCy's idiom
(``exclude`` honoured for each, bytes and disk), a refused load changes
nothing, the learner components' ``model`` is the learner's Thinc networks,
and components are found by factory."""
import subprocess
import sys

import pytest
import spacy
import srsly
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.components.base import find_pipe, preceding_pipe
from spacy_structpref.components.distro import DistroPipe
from spacy_structpref.components.distro_tagger import DistroTaggerComponent
from spacy_structpref.components.distro_textcat import DistroTextcat
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.errors import StructPrefError
from spacy_structpref.saving import MARKER

FACTORIES = ("distro_tagger", "distro_textcat", "forest_parser", "parse_reranker", "attachment_predictor",
             "kernel_textcat")
# the saved parts of each component, in loading order, and their names in a saved directory
PARTS = {"distro_tagger": {"cfg": "cfg", "vocab": "vocab", "model": "model"},
         "distro_textcat": {"cfg": "cfg", "vocab": "vocab", "model": "model"},
         "forest_parser": {"cfg": "cfg.json", "grammar": "grammar.msgpack"},
         "parse_reranker": {"cfg": "cfg.json", "learner": "learner", "trained_on": "trained_on.json"},
         "attachment_predictor": {"cfg": "cfg.json", "trained_on": "trained_on.json", "inventory": "inventory.json",
                                  "learner": "learner"},
         "kernel_textcat": {"cfg": "cfg.json", "model": "model", "trained_on": "trained_on.json"}}
RNN = {"@misc": "spacy_structpref.RecursiveNetLearner.v1", "width": 4}


@pytest.fixture(scope="module")
def trained():
    """A tagger, a parser and an attachment predictor trained on a few Docs: every part has content."""
    nlp = spacy.blank("en")
    for factory in ("distro_tagger", "forest_parser", "attachment_predictor"):
        nlp.add_pipe(factory)
    docs = corpus_docs("ptb", "train", nlp.vocab, limit=4)
    nlp.initialize(lambda: [Example(d, d) for d in docs])
    return nlp


@pytest.mark.parametrize("factory", FACTORIES)
def test_bytes_hold_the_parts_and_exclude_any(factory):
    pipe = spacy.blank("en").add_pipe(factory)
    assert list(srsly.msgpack_loads(pipe.to_bytes())) == list(PARTS[factory])
    for part in PARTS[factory]:
        assert list(srsly.msgpack_loads(pipe.to_bytes(exclude=[part]))) == [
            p for p in PARTS[factory] if p != part]


@pytest.mark.parametrize("factory", ["distro_tagger", "forest_parser", "attachment_predictor"])
def test_disk_holds_the_parts_and_exclude_any(trained, factory, tmp_path):
    pipe = trained.get_pipe(factory)
    pipe.to_disk(tmp_path / "all")
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == sorted([*PARTS[factory].values(), MARKER])
    for part, file in PARTS[factory].items():
        pipe.to_disk(tmp_path / part, exclude=[part])
        assert not (tmp_path / part / file).exists()
        # the part left out keeps its state; the others load
        assert pipe.from_disk(tmp_path / part) is pipe


def _changed_cfg(pipe) -> dict:
    """A valid cfg that differs from the component's."""
    key = {"distro_tagger": "cost", "distro_textcat": "cost", "forest_parser": "k", "parse_reranker": "k",
           "attachment_predictor": "beam_width", "kernel_textcat": "dev_every"}[pipe.factory]
    return {**pipe.cfg, key: pipe.cfg[key] + 1}


@pytest.mark.parametrize("factory", FACTORIES)
def test_a_refused_last_part_leaves_the_component_as_it_was(factory):
    """A save whose cfg is fine and whose last part is not: the cfg read
    first is not adopted."""
    pipe = spacy.blank("en").add_pipe(factory)
    before = srsly.json_dumps(pipe.cfg, sort_keys=True)
    cfg = _changed_cfg(pipe)
    if isinstance(pipe, DistroPipe):
        cfg = srsly.json_dumps(cfg)  # spaCy's trainable pipes save their cfg as JSON text
    last = list(PARTS[factory])[-1]
    with pytest.raises(StructPrefError):
        pipe.from_bytes(srsly.msgpack_dumps({"cfg": cfg, last: {"not": "saved data"}}))
    assert srsly.json_dumps(pipe.cfg, sort_keys=True) == before


def test_the_distro_components_are_siblings():
    assert issubclass(DistroTaggerComponent, DistroPipe) and issubclass(DistroTextcat, DistroPipe)
    assert not issubclass(DistroTextcat, DistroTaggerComponent)


def test_learner_model_is_its_networks():
    nlp = spacy.blank("en")
    perceptron = nlp.add_pipe("attachment_predictor", name="vp")
    single = nlp.add_pipe("attachment_predictor", name="rnn", config={"learner": RNN, "specialise": False})
    per_class = nlp.add_pipe("attachment_predictor", name="rnns", config={"learner": RNN})
    docs = corpus_docs("ptb", "train", nlp.vocab, limit=4)
    nlp.initialize(lambda: [Example(d, d) for d in docs])
    assert perceptron.model is None  # the perceptron learns in update: nothing for spaCy to step
    assert single.model is single.learner.model
    networks = [learner.model for learner in per_class.learner.learners.values()]
    assert len(networks) > 1 and per_class.model.layers == networks
    with pytest.raises(StructPrefError, match="scores candidates itself"):
        per_class.model.predict(docs)


def test_components_are_found_by_factory():
    nlp = spacy.blank("en")
    with pytest.raises(StructPrefError, match="no attachment_predictor component"):
        find_pipe(nlp, "attachment_predictor")
    nlp.add_pipe("forest_parser", name="first")
    nlp.add_pipe("forest_parser", name="second")
    reranker = nlp.add_pipe("parse_reranker")
    assert preceding_pipe(nlp, reranker.name, "forest_parser", "reranks") == "second"
    assert find_pipe(nlp, "parse_reranker") is reranker
    with pytest.raises(StructPrefError, match="no forest_parser precedes it"):
        preceding_pipe(nlp, "first", "forest_parser", "reranks the k-best lists")


def test_the_factories_module_is_cheap_to_import():
    code = ("import sys\nimport spacy_structpref.components.factories\n"
            "from spacy.language import Language\n"
            f"assert all(Language.has_factory(f) for f in {FACTORIES!r})\n"
            "print(sorted(m for m, mod in sys.modules.items() if m.startswith('spacy_structpref') and\n"
            "             getattr(mod, '__file__', '') and mod.__file__.endswith(('.so', '.pyd'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr or out.stdout

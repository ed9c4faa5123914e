"""Every shipped config builds: its pipeline with validated component
settings, and its [training] block (optimizer, batcher, logger) and corpora
as ``spacy train`` resolves them, so a typo in a config fails here, not an
hour into a project run. A full training by each config evaluates on dev
after step 0 and in its last epoch, so that its ``model-best`` is a
trained model."""
import random

import pytest
import spacy
from nltk.tree import Tree
from spacy import util
from spacy.schemas import ConfigSchemaTraining
from spacy.training.loop import create_train_batches
from spacy.util import load_config, registry

from spacy_structpref.corpora import corpus_items, item_to_doc

from tests.helpers.paths import ASSEMBLE_CONFIGS, CONFIGS, TRAINING_CONFIGS


def _factory_defaults(config):
    for component, block in config["components"].items():
        if "source" in block:  # a trained pipeline's component: its own factory's defaults stand in
            config["components"][component] = {"factory": block.get("component", component)}
    return config


@pytest.mark.parametrize("name", TRAINING_CONFIGS)
def test_config_builds(name):
    config = _factory_defaults(load_config(CONFIGS / name, interpolate=False))
    nlp = util.load_model_from_config(config, auto_fill=True, validate=True)
    assert nlp.pipe_names == config["nlp"]["pipeline"]
    resolved = nlp.config.interpolate()
    training = registry.resolve(resolved["training"], schema=ConfigSchemaTraining)
    assert training["optimizer"] is not None and callable(training["batcher"])
    corpora = registry.resolve(resolved["corpora"])
    assert {training["train_corpus"], training["dev_corpus"]} <= {f"corpora.{key}" for key in corpora}


@pytest.mark.parametrize("name", ASSEMBLE_CONFIGS)
def test_assemble_config_sources_every_component(name):
    config = load_config(CONFIGS / name, interpolate=False)
    assert "training" not in config
    blocks = config["components"]
    assert list(blocks) == config["nlp"]["pipeline"] and all("source" in block for block in blocks.values())
    nlp = util.load_model_from_config(_factory_defaults(config), auto_fill=True, validate=True)
    assert nlp.pipe_names == config["nlp"]["pipeline"]


def _train_lengths(config) -> list:
    """The token counts of the training Docs of a full run of ``config``
    (the project's corpus its train path names)."""
    train = config["corpora"]["train"]
    if train["@readers"] == "spacy_structpref.ParsedQuestions.v1":
        granularity = config["paths"]["granularity"]
        items = corpus_items(f"qc-{granularity}", "train") + corpus_items(f"qc-{granularity}", "dev")
    else:
        assert train["@readers"] == "spacy.Corpus.v1"
        corpus = config["paths"]["train"].split("/")[1]  # corpus/NAME/train.spacy
        items = corpus_items(corpus.replace("_", "-"), "train")
    vocab = spacy.blank("en").vocab
    return [len(item.leaves()) if isinstance(item, Tree) else len(item) if isinstance(item, list)
            else len(item_to_doc(vocab, item)) for item in items]


class _Sized:
    """A stand-in for an Example to the batchers: its length."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n


@pytest.mark.parametrize("name", TRAINING_CONFIGS)
def test_a_full_training_evaluates_after_step_0_in_its_last_epoch(name):
    """spaCy's loop (``train_while_improving``) takes steps 0, 1, … (up to
    ``max_steps`` included) over the batches of ``max_epochs`` epochs,
    evaluates on dev at every multiple of ``eval_frequency`` (step 0 after
    the first batch) and copies the best evaluation to ``model-best``; the
    steps after the last evaluation reach model-last only. Counted here with
    spaCy's own batch generator and the config's batcher over the lengths of
    the project's training Docs: the last evaluation must come after step 0
    and in the last epoch."""
    config = load_config(CONFIGS / name, interpolate=False)
    training = config["training"]
    batcher = registry.resolve({"batcher": training["batcher"]})["batcher"]
    max_steps, max_epochs, frequency = training["max_steps"], training["max_epochs"], training["eval_frequency"]
    assert max_steps or max_epochs > 0, f"{name}: neither max_steps nor max_epochs bounds the training"
    lengths = _train_lengths(load_config(CONFIGS / name, interpolate=True))
    random.seed(0)
    epochs = []
    for step, (epoch, _) in enumerate(create_train_batches(None, lambda nlp: [_Sized(n) for n in lengths],
                                                           batcher, max_epochs)):
        epochs.append(epoch)
        if max_steps and step >= max_steps:
            break
    last_eval = (len(epochs) - 1) // frequency * frequency
    assert last_eval > 0, (f"{name}: {len(epochs)} steps, evaluated every {frequency}: model-best is the "
                           "step-0 model")
    assert epochs[last_eval] == epochs[-1], (
        f"{name}: the last evaluation (step {last_eval}, epoch {epochs[last_eval]}) is not in the last epoch "
        f"({epochs[-1]}; {len(epochs)} steps)")

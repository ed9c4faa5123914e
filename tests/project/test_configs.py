"""Every shipped config builds: its pipeline with validated component
settings, and its [training] block (optimizer, batcher, logger) and corpora
as ``spacy train`` resolves them, so a typo in a config fails here, not an
hour into a project run."""

import pytest
from spacy import util
from spacy.schemas import ConfigSchemaTraining
from spacy.util import load_config, registry

from tests.helpers.paths import CONFIGS, SHIPPED_CONFIGS


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_config_builds(name):
    config = load_config(CONFIGS / name, interpolate=False)
    for component, block in config["components"].items():
        if "source" in block:  # a trained pipeline's component: its own factory's defaults stand in
            config["components"][component] = {"factory": block.get("component", component)}
    nlp = util.load_model_from_config(config, auto_fill=True, validate=True)
    assert nlp.pipe_names == config["nlp"]["pipeline"]
    resolved = nlp.config.interpolate()
    training = registry.resolve(resolved["training"], schema=ConfigSchemaTraining)
    assert training["optimizer"] is not None and callable(training["batcher"])
    corpora = registry.resolve(resolved["corpora"])
    assert {training["train_corpus"], training["dev_corpus"]} <= {f"corpora.{key}" for key in corpora}

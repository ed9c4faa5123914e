"""The one training loop (``learners.fit``): the update calls it makes against
a loop written out by hand, early stopping on a validation function against
a learner trained for the best epoch's number of epochs, refused settings,
and learner configs whose inert keys are errors."""
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.util import registry
from thinc.api import Adam, Config, ConfigValidationError

from spacy_structpref.errors import StructPrefError
from spacy_structpref.experiments.attachment_tables import learner_from_config
from spacy_structpref.learners import (EnsembleLearner, KernelPerceptron, Learner, LinearKernel, RecursiveNetLearner,
                                       Schedule, SpecialisedLearner, TrainingLog, fit)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


class Recorder(Learner):
    """A learner that learns nothing and records what ``fit`` asks of it."""

    def __init__(self, seed=0, in_order=False):
        self.seed, self.first_pass_in_order = seed, in_order
        self.calls, self.initialized_on, self.finished = [], None, 0
        self.log = TrainingLog()

    @property
    def initialized(self):
        return self.initialized_on is not None

    def initialize(self, sets, gold=None, keys=None):
        self.initialized_on = list(gold)
        return self

    def update(self, sets, gold, keys=None, *, ids=None, sgd=None, losses=None):
        self.calls.append(([sets[i] for i in range(len(sets))], list(gold), list(ids), sgd))
        losses = {} if losses is None else losses
        losses["recorder"] = losses.get("recorder", 0.0) + len(gold)
        return losses

    def finish_training(self):
        self.finished += 1
        return self


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=1, max_size=30),
       st.integers(1, 3), st.integers(1, 7), st.integers(0, 9), st.booleans())
def test_fit_makes_the_update_calls_of_the_loop_by_hand(gold, epochs, batch_size, seed, in_order):
    # set i is "s{i}" with 3 candidates (or 1 when i % 5 == 4: nothing to learn from)
    sets = [[f"s{i}"] * (1 if i % 5 == 4 else 3) for i in range(len(gold))]
    gold = [g if g is None or len(s) > 1 else 0 for g, s in zip(gold, sets)]
    learner = Recorder(seed, in_order)
    sgd = Adam(0.01)
    fit(learner, sets, gold, schedule=Schedule(epochs=epochs, batch_size=batch_size, optimizer=sgd))
    teaching = [i for i, g in enumerate(gold) if g is not None and len(sets[i]) > 1]
    expected, order, rng = [], list(range(len(teaching))), random.Random(seed)
    for epoch in range(epochs):
        if epoch or not in_order:
            rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            batch = [teaching[j] for j in order[start:start + batch_size]]
            expected.append(([sets[i] for i in batch], [gold[i] for i in batch], batch))
    assert [(s, g) for s, g, _, _ in learner.calls] == [(s, g) for s, g, _ in expected]
    assert all(sgd_ is sgd for *_, sgd_ in learner.calls)
    # a set's id is the same whenever it comes again, and no two sets share one
    id_of = {}
    for (_, _, ids, _), (_, _, batch) in zip(learner.calls, expected):
        for i, set_id in zip(batch, ids):
            assert id_of.setdefault(i, set_id) is set_id
    assert len({id(x) for x in id_of.values()}) == len(id_of)
    assert learner.initialized_on == gold and learner.finished == 1
    assert learner.log.losses == [1.0] * epochs if teaching else learner.log.losses == [0.0] * epochs


class SlowPreparer(Recorder):
    """A recorder whose preparation of the sets takes a known time."""

    def prepare(self, sets):
        time.sleep(0.2)
        return sets


def test_training_seconds_include_the_preparation_of_the_sets():
    learner = fit(SlowPreparer(), [["a", "b"], ["c", "d"]], [0, 1], schedule=Schedule(epochs=2, optimizer=Adam(0.01)))
    assert learner.log.seconds[0] >= 0.2 and learner.log.seconds[1] >= learner.log.seconds[0]


def test_a_validation_function_keeps_the_best_epoch_and_patience_stops():
    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(4, 3)) for _ in range(40)]
    gold = [int(np.argmax(X @ [1.0, -1.0, 0.5])) for X in sets]
    errors = iter([3.0, 1.0, 2.0, 2.5, 0.0])
    learner = fit(KernelPerceptron(LinearKernel(), seed=4), sets, gold, validation=lambda learner: next(errors),
                  schedule=Schedule(epochs=5, patience=2))
    # epochs 3 and 4 do not beat epoch 2: training stops, epoch 2's perceptron is kept
    assert learner.log.validation == [3.0, 1.0, 2.0, 2.5] and learner.log.best_epoch == 2
    assert len(learner.log.losses) == len(learner.log.seconds) == 4
    reference = fit(KernelPerceptron(LinearKernel(), seed=4), sets, gold, schedule=Schedule(epochs=2))
    assert (learner.n_examples, learner.n_updates) == (reference.n_examples, reference.n_updates)
    for X in sets[:10]:
        np.testing.assert_allclose(learner.utilities(X), reference.utilities(X), rtol=1e-12, atol=1e-12)
    # validation sets score L_1: a perceptron that learns the rule scores 0 on sets it ranks right
    held = fit(KernelPerceptron(LinearKernel()), sets[:30], gold[:30], validation=(sets[30:], gold[30:]),
               schedule=Schedule(epochs=3, patience=0))
    assert len(held.log.validation) == 3 and min(held.log.validation) < 0.5


def test_refused_settings():
    sets, gold = [np.eye(2)], [0]
    for bad in ({"epochs": 0}, {"batch_size": 0}, {"patience": -1}, {"epochs": 1.5}, {"patience": True}):
        with pytest.raises(StructPrefError):
            Schedule(**bad)
    with pytest.raises(StructPrefError, match="not a LinearKernel"):
        fit(LinearKernel(), sets, gold)
    with pytest.raises(StructPrefError, match="must be a Schedule"):
        fit(KernelPerceptron(LinearKernel()), sets, gold, schedule={"epochs": 2})
    with pytest.raises(StructPrefError, match="validation is"):
        fit(KernelPerceptron(LinearKernel()), sets, gold, validation=(sets,), schedule=Schedule(patience=0))
    with pytest.raises(StructPrefError, match="validation sets need a schedule with patience"):
        fit(KernelPerceptron(LinearKernel()), sets, gold, validation=(sets, gold))
    with pytest.raises(StructPrefError, match="stepped by an optimizer"):
        fit(EnsembleLearner([RecursiveNetLearner()]), sets, gold)
    with pytest.raises(StructPrefError, match="trains its parts one by one"):
        fit(SpecialisedLearner(KernelPerceptron(LinearKernel())), sets, gold, ["a"],
            validation=lambda learner: 0.0, schedule=Schedule(patience=0))
    with pytest.raises(StructPrefError, match="takes no keys"):
        fit(EnsembleLearner([KernelPerceptron(LinearKernel())]), sets, gold, ["a"])


def test_learner_configs_state_only_what_is_used(tmp_path):
    for name, kind in (("vp", KernelPerceptron), ("rnn", RecursiveNetLearner)):
        learner, schedule = learner_from_config(CONFIGS / "learners" / f"{name}.cfg")
        assert isinstance(learner, kind) and isinstance(schedule, Schedule)
    learner, schedule = learner_from_config(CONFIGS / "learners" / "rnn.cfg")
    assert (schedule.epochs, schedule.batch_size, schedule.patience) == (40, 32, 5) and schedule.optimizer
    # a training setting in the learner's block is an error, not a setting ignored
    for key, value in (("epochs", 4), ("progress", False), ("batch_size", 8), ("patience", 2)):
        config = Config().from_disk(CONFIGS / "learners" / "vp.cfg")
        config["learner"][key] = value
        with pytest.raises(ConfigValidationError, match=key):
            registry.resolve(config)
    config = Config().from_disk(CONFIGS / "learners" / "rnn.cfg")
    config["learner"]["optimizer"] = config["schedule"].pop("optimizer")
    with pytest.raises(ConfigValidationError, match="optimizer"):
        registry.resolve(config)
    extra = tmp_path / "extra.cfg"
    extra.write_text((CONFIGS / "learners" / "vp.cfg").read_text() + "\n[training]\nepochs = 3\n")
    with pytest.raises(StructPrefError, match=r"nothing else, not \[learner\], \[schedule\], \[training\]"):
        learner_from_config(extra)
    with pytest.raises(StructPrefError, match="takes no optimizer"):
        fit(learner_from_config(CONFIGS / "learners" / "vp.cfg")[0], [np.eye(2)], [0],
            schedule=replace(schedule, patience=None))

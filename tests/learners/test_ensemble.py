"""The ensemble learner: its utilities are the mean of independently trained
members (checked against nets trained on their own), it saves and loads
them, it goes inside a specialised learner with validation sets, and it
refuses bad settings and saves of another size."""
import numpy as np
import pytest
from spacy.util import registry
from thinc.api import Adam

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import SavedModelError, StructPrefError
from spacy_structpref.learners import (EnsembleLearner, KernelPerceptron, RecursiveNetLearner, Schedule,
                                       SpecialisedLearner, TreeKernel, fit)
from spacy_structpref.trees import SymbolTable

from tests.helpers.attachment_data import candidates_and_gold


@pytest.fixture(scope="module")
def data(ptb_inventory_200):
    inventory = ptb_inventory_200
    symbols = SymbolTable()
    return (candidates_and_gold(ptb_trees("train")[:12], inventory, symbols),
            candidates_and_gold(ptb_trees("dev")[:4], inventory, symbols))


def net(seed):
    return RecursiveNetLearner(width=6, seed=seed)


def schedule(epochs=3):
    return Schedule(epochs=epochs, batch_size=4, optimizer=Adam(0.05), patience=0)


def test_utilities_are_the_mean_of_nets_trained_alone(data, tmp_path):
    (train, gold), (val, val_gold) = data
    ensemble = EnsembleLearner.of_clones(net(3), 3, seed_step=10)
    assert [m.seed for m in ensemble.members] == [3, 13, 23] and ensemble.seed == 3
    fit(ensemble, train, gold, validation=(val, val_gold), schedule=schedule())
    alone = [fit(net(seed), train, gold, validation=(val, val_gold), schedule=schedule()) for seed in (3, 13, 23)]
    assert [m.log.best_epoch for m in ensemble.members] == [a.log.best_epoch for a in alone]
    assert len({tuple(a.utilities(val[0])) for a in alone}) == 3  # the seeds give different nets
    for cands in val[:25]:
        expected = np.mean([a.utilities(cands) for a in alone], axis=0)
        np.testing.assert_allclose(ensemble.utilities(cands), expected, rtol=1e-5, atol=1e-6)
    # saved and loaded, in bytes and on disk, into an ensemble of the same size
    for loaded in (EnsembleLearner.of_clones(net(0), 3).from_bytes(ensemble.to_bytes()),
                   (ensemble.to_disk(tmp_path / "ensemble"),
                    EnsembleLearner.of_clones(net(0), 3).from_disk(tmp_path / "ensemble"))[1]):
        for cands in val[:10]:
            np.testing.assert_allclose(loaded.utilities(cands), ensemble.utilities(cands), rtol=1e-6)
    smaller = EnsembleLearner.of_clones(net(0), 2)
    with pytest.raises(SavedModelError, match="3 members, this one 2"):
        smaller.from_bytes(ensemble.to_bytes())
    assert all(m.model is None for m in smaller.members)  # a refused load leaves it as it was


def test_clones_keep_the_spacing_of_the_seeds():
    ensemble = EnsembleLearner.of_clones(net(5), 2, seed_step=7)
    assert [m.seed for m in ensemble.clone().members] == [5, 12]
    assert [m.seed for m in ensemble.clone(seed=1).members] == [1, 8]
    assert all(m.model is None for m in ensemble.clone().members)


def test_perceptron_members_and_specialisation(data):
    """Any preference learner can be a member; an ensemble is a specialised
    learner's prototype like any other, validation sets included."""
    (train, gold), (val, val_gold) = data
    kernel = TreeKernel(0.4)
    kernel.symbols = train[0].symbols  # the DAGs' own
    perceptrons = fit(EnsembleLearner([KernelPerceptron(kernel, seed=s) for s in (0, 1)]), train, gold)
    alone = [fit(KernelPerceptron(kernel, seed=s), train, gold) for s in (0, 1)]
    for cands in val[:10]:
        np.testing.assert_allclose(perceptrons.utilities(cands),
                                   np.mean([a.utilities(cands) for a in alone], axis=0), rtol=1e-9)
    keys, val_keys = [len(c) % 2 for c in train], [len(c) % 2 for c in val]
    spec = fit(SpecialisedLearner(EnsembleLearner.of_clones(net(0), 2)), train, gold, keys,
               validation=(val, val_gold, val_keys), schedule=schedule(2))
    for learner in spec.learners.values():
        assert isinstance(learner, EnsembleLearner) and [m.seed for m in learner.members] == [0, 1000]
        assert all(len(m.log.validation) == 2 for m in learner.members)
    # perceptrons stop early on validation sets like any learner; an optimizer is refused them
    stopped = fit(perceptrons.clone(), train, gold, validation=(val, val_gold), schedule=Schedule(epochs=2, patience=0))
    assert all(len(m.log.validation) == 2 for m in stopped.members)
    refused = SpecialisedLearner(KernelPerceptron(kernel))
    with pytest.raises(StructPrefError, match="steps by itself: its schedule takes no optimizer"):
        fit(refused, train, gold, keys, validation=(val, val_gold, val_keys), schedule=schedule(1))
    assert not refused.learners


def test_config_and_bad_input():
    config = {"@misc": "spacy_structpref.EnsembleLearner.v1", "n_members": 2, "seed_step": 100,
              "prototype": {"@misc": "spacy_structpref.RecursiveNetLearner.v1", "width": 6, "seed": 4}}
    ensemble = registry.resolve({"learner": config})["learner"]
    assert isinstance(ensemble, EnsembleLearner) and [m.seed for m in ensemble.members] == [4, 104]
    assert ensemble.loss == "setwise"
    with pytest.raises(StructPrefError, match="at least one preference learner"):
        EnsembleLearner([])
    with pytest.raises(StructPrefError, match="at least one preference learner"):
        EnsembleLearner([net(0), "a net"])
    with pytest.raises(StructPrefError, match="n_members must be an integer of at least 1"):
        EnsembleLearner.of_clones(net(0), 0)
    with pytest.raises(StructPrefError, match="must be a preference learner"):
        EnsembleLearner.of_clones("a net", 2)


@pytest.mark.parametrize("prototype", [
    {"@misc": "spacy_structpref.RecursiveNetLearner.v1", "width": 6},
    {"@misc": "spacy_structpref.KernelPerceptron.v1",
     "kernel": {"@misc": "spacy_structpref.TreeKernel.v1", "lam": 0.4}},
])
def test_an_ensemble_in_the_attachment_predictor(prototype, tmp_path):
    """The component takes an ensemble as its learner: trained by spaCy's
    updates, its parses survive a save and load."""
    import spacy
    from spacy.tokens import Doc
    from spacy.training import Example

    from spacy_structpref.corpora import corpus_docs

    nlp = spacy.blank("en")
    nlp.add_pipe("attachment_predictor", config={"learner": {
        "@misc": "spacy_structpref.EnsembleLearner.v1", "n_members": 2, "prototype": prototype}})
    examples = [Example(d, d) for d in corpus_docs("ptb", "train", nlp.vocab, limit=6)]
    sgd = nlp.initialize(lambda: examples)
    for _ in range(2):
        nlp.update(examples, sgd=sgd)
    learner = nlp.get_pipe("attachment_predictor").learner
    assert all(isinstance(m, EnsembleLearner) and len(m.members) == 2 for m in learner.learners.values())
    dev = [([t.text for t in d], [t.tag_ for t in d]) for d in corpus_docs("ptb", "dev", nlp.vocab, limit=3)]

    def parses(pipeline):  # words and tags only, as a tagger hands them over
        return [str(d._.parse) for d in pipeline.pipe(Doc(pipeline.vocab, words=w, tags=t) for w, t in dev)]

    before = parses(nlp)
    assert all(p.startswith("(TOP") for p in before)
    nlp.to_disk(tmp_path / "nlp")
    assert parses(spacy.load(tmp_path / "nlp")) == before

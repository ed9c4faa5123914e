"""Learners as pipeline citizens: built from config blocks,
trained through initialize/update/finish_training (fit is exactly that),
saved the spaCy way (to_bytes/from_bytes, to_disk/from_disk, ``exclude``),
and the composite reranking kernel K_λ + b·log p·log p'."""
import random
import subprocess
import sys
from importlib.metadata import entry_points

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from spacy.util import registry
from thinc.api import Adam, Config

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.incremental import foot_class, preference_sets_of, set_classes
from spacy_structpref.kernels import composite_gram, gram
from spacy_structpref.learners import (CompositeKernel, KernelPerceptron, LinearKernel,
                                       RecursiveNetLearner, Schedule, ScoredTrees, SpecialisedLearner,
                                       TreeKernel, fit)
from spacy_structpref.learners.base import Subsequence
from spacy_structpref.trees import SymbolTable

PERCEPTRON = """
[learner]
@misc = "spacy_structpref.KernelPerceptron.v1"
loss = "setwise"

[learner.kernel]
@misc = "spacy_structpref.TreeKernel.v1"
lam = 0.4
"""

SPECIALISED = """
[learner]
@misc = "spacy_structpref.SpecialisedLearner.v1"

[learner.prototype]
@misc = "spacy_structpref.KernelPerceptron.v1"
loss = "pairwise"

[learner.prototype.kernel]
@misc = "spacy_structpref.TreeKernel.v1"
lam = 0.3
"""

RECURSIVE = """
[learner]
@misc = "spacy_structpref.RecursiveNetLearner.v1"
width = 8
"""
# how fit trains RECURSIVE
RECURSIVE_SCHEDULE = """
[schedule]
@misc = "spacy_structpref.Schedule.v1"
epochs = 2
batch_size = 16

[schedule.optimizer]
@optimizers = "Adam.v1"
learn_rate = 0.01
"""

COMPOSITE = """
[learner]
@misc = "spacy_structpref.KernelPerceptron.v1"

[learner.kernel]
@misc = "spacy_structpref.CompositeKernel.v1"
b = 0.05

[learner.kernel.tree_kernel]
@misc = "spacy_structpref.TreeKernel.v1"
lam = 0.3
"""


def build(config: str, **overrides):
    return registry.resolve(Config().from_str(config, overrides=overrides))["learner"]


def rnn_schedule() -> Schedule:
    return registry.resolve(Config().from_str(RECURSIVE_SCHEDULE))["schedule"]


def batches(n: int, size: int):
    return [list(range(i, min(i + size, n))) for i in range(0, n, size)]


@pytest.fixture(scope="module")
def psets(ptb_inventory_200):
    inventory = ptb_inventory_200
    train = preference_sets_of(ptb_trees("train")[:30], inventory)[:200]
    dev = preference_sets_of(ptb_trees("dev")[:3], inventory)
    return train, dev


def test_perceptron_from_config_updates_and_round_trips(psets, tmp_path):
    train, dev = psets
    learner = build(PERCEPTRON)
    assert isinstance(learner.kernel, TreeKernel) and learner.kernel.lam == 0.4
    symbols = learner.kernel.symbols
    sets, gold = [s.dag(symbols, True) for s in train], [s.gold for s in train]
    learner.initialize(sets, gold)
    losses = {}
    for batch in batches(len(sets), 50):
        learner.update([sets[i] for i in batch], [gold[i] for i in batch], losses=losses)
    assert learner.n_updates == losses["perceptron"] > 0
    expected = [learner.utilities(s.dag(symbols, True)) for s in dev]
    data = learner.to_bytes()  # saving packs the support
    assert len(learner.chunks) == 1
    learner.to_disk(tmp_path / "vp")
    for loaded in (build(PERCEPTRON).from_bytes(data), build(PERCEPTRON).from_disk(tmp_path / "vp")):
        assert loaded.n_support == learner.n_support and loaded.n_examples == learner.n_examples
        for s, u in zip(dev, expected):
            np.testing.assert_allclose(loaded.utilities(s.dag(loaded.kernel.symbols, True)), u,
                                       rtol=1e-12, atol=1e-12)
    # settings that change what the support means are checked, not adopted
    with pytest.raises(StructPrefError, match="trained with the kernel"):
        build(PERCEPTRON, **{"learner.kernel.lam": 0.5}).from_bytes(data)
    with pytest.raises(StructPrefError, match="trained with the kernel"):
        KernelPerceptron(LinearKernel()).from_disk(tmp_path / "vp")


def test_exclude_is_honoured(psets, tmp_path):
    train, dev = psets
    learner = build(PERCEPTRON)
    fit(learner, [s.trees(True) for s in train[:80]], [s.gold for s in train[:80]])
    cands = dev[0].trees(True)
    untrained = np.zeros(len(cands))
    np.testing.assert_array_equal(build(PERCEPTRON).from_bytes(learner.to_bytes(exclude=["support"]))
                                  .utilities(cands), untrained)
    np.testing.assert_array_equal(build(PERCEPTRON).from_bytes(learner.to_bytes(), exclude=["support"])
                                  .utilities(cands), untrained)
    learner.to_disk(tmp_path / "cfg_only", exclude=["support"])
    assert not (tmp_path / "cfg_only" / "support.msgpack").exists()
    np.testing.assert_array_equal(build(PERCEPTRON).from_disk(tmp_path / "cfg_only").utilities(cands),
                                  untrained)
    learner.to_disk(tmp_path / "full")
    assert build(PERCEPTRON).from_disk(tmp_path / "full", exclude=["support"]).n_support == 0
    # without its cfg, a support is loaded unchecked, into this learner's kernel
    other = build(PERCEPTRON, **{"learner.kernel.lam": 0.5})
    other.from_disk(tmp_path / "full", exclude=["cfg"])
    assert other.n_support == learner.n_support and other.kernel.lam == 0.5


@pytest.mark.parametrize("kernel", ["linear", "tree"])
@pytest.mark.parametrize("loss", ["setwise", "pairwise"])
def test_perceptron_fit_is_initialize_updates_finish(psets, kernel, loss):
    if kernel == "linear":
        rng = np.random.default_rng(1)
        sets = [rng.normal(size=(int(rng.integers(1, 6)), 4)) for _ in range(60)]
        gold = [None if i % 7 == 0 else int(rng.integers(0, len(x))) for i, x in enumerate(sets)]

        def make():
            return KernelPerceptron(LinearKernel(), loss=loss, seed=5)
    else:
        train, _ = psets
        sets, gold = [s.trees(True) for s in train[:60]], [s.gold for s in train[:60]]
        shared = TreeKernel(0.4)

        def make():
            return KernelPerceptron(shared, loss=loss, seed=5)
    fitted = fit(make(), sets, gold, schedule=Schedule(epochs=3))
    stepwise = make().initialize(sets, gold)
    order = [i for i, g in enumerate(gold) if g is not None and len(sets[i]) > 1]
    rng = random.Random(5)
    for epoch in range(3):
        if epoch:
            rng.shuffle(order)
        stepwise.update(Subsequence(sets, order), [gold[i] for i in order], ids=order)
    stepwise.finish_training()
    assert (stepwise.n_updates, stepwise.n_support, stepwise.n_examples) == \
        (fitted.n_updates, fitted.n_support, fitted.n_examples)
    for X in sets[:20]:
        np.testing.assert_array_equal(stepwise.utilities(X), fitted.utilities(X))
    # without set ids every call's sets are new: the same utilities, a bigger support
    unpooled = make().initialize(sets, gold)
    for epoch in range(2):
        unpooled.update(sets, gold)
    pooled = make().initialize(sets, gold)
    for epoch in range(2):
        pooled.update(sets, gold, ids=range(len(sets)))
    assert unpooled.n_support > pooled.n_support
    for X in sets[:20]:
        np.testing.assert_allclose(unpooled.utilities(X), pooled.utilities(X), rtol=1e-9, atol=1e-9)
    with pytest.raises(StructPrefError, match="set ids"):
        pooled.update(sets, gold, ids=[0])


def test_specialised_learner_from_config_saves_and_loads(psets, tmp_path):
    train, dev = psets
    spec = build(SPECIALISED)
    assert isinstance(spec, SpecialisedLearner) and spec.prototype.loss == "pairwise"
    symbols = spec.prototype.kernel.symbols
    keys = set_classes(train)
    fit(spec, [s.dag(symbols, True) for s in train], [s.gold for s in train], keys, schedule=Schedule(epochs=2))
    assert len(spec.learners) > 2
    assert all(x.kernel is spec.prototype.kernel and x.loss == "pairwise" for x in spec.learners.values())
    data = spec.to_bytes()
    spec.to_disk(tmp_path / "spec")
    for loaded in (build(SPECIALISED).from_bytes(data), build(SPECIALISED).from_disk(tmp_path / "spec")):
        assert sorted(loaded.learners) == sorted(spec.learners)
        shared = loaded.prototype.kernel.symbols
        for s in dev:
            key = foot_class(s.foot)
            np.testing.assert_allclose(loaded.utilities(s.dag(shared, True), key),
                                       spec.utilities(s.dag(symbols, True), key), rtol=1e-12)
    # exclude reaches every key's learner
    empty = build(SPECIALISED).from_bytes(spec.to_bytes(exclude=["support"]))
    assert sorted(empty.learners) == sorted(spec.learners)
    assert all(x.n_support == 0 for x in empty.learners.values())
    with pytest.raises(StructPrefError, match="preference learner"):
        SpecialisedLearner(TreeKernel())


def test_specialised_learner_initialize_and_update():
    rng = np.random.default_rng(2)
    sets = [rng.normal(size=(4, 2)) for _ in range(80)]
    keys = ["ab"[i % 2] for i in range(80)]
    gold = [int(np.argmax(X[:, 0] if k == "a" else -X[:, 0])) for X, k in zip(sets, keys)]
    spec = SpecialisedLearner(KernelPerceptron(LinearKernel())).initialize(sets[:40], gold[:40], keys[:40])
    losses = spec.update(sets[40:], gold[40:], keys[40:])
    assert sorted(spec.learners) == ["a", "b"] and losses["perceptron"] > 0
    alone = KernelPerceptron(LinearKernel())
    alone.update([X for X, k in zip(sets[40:], keys[40:]) if k == "a"],
                 [g for g, k in zip(gold[40:], keys[40:]) if k == "a"])
    np.testing.assert_allclose(spec.utilities(sets[0], "a"), alone.utilities(sets[0]))


def test_specialised_finish_update_steps_only_the_classes_updated(psets):
    """A class absent from a batch keeps its weights bit for bit: Adam once
    stepped every class, and a zero gradient still moves by momentum."""
    train, _ = psets
    sets, gold = [s.trees(True) for s in train], [s.gold for s in train]
    keys = set_classes(train)
    spec = SpecialisedLearner(build(RECURSIVE)).initialize(sets, gold, keys)
    sgd = Adam(0.01)
    spec.update(sets, gold, keys)
    spec.finish_update(sgd)  # every class has a gradient and momentum now
    present, absent = sorted(spec.learners)[:2]
    batch = [i for i, k in enumerate(keys) if k == present]

    def weights(key):
        model = spec.learners[key].model
        return [node.get_param(name).copy() for node in model.walk() for name in node.param_names
                if node.has_param(name)]

    before = {key: weights(key) for key in (present, absent)}
    spec.update([sets[i] for i in batch], [gold[i] for i in batch], [present] * len(batch))
    spec.finish_update(sgd)
    assert all(np.array_equal(a, b) for a, b in zip(weights(absent), before[absent]))
    assert not all(np.array_equal(a, b) for a, b in zip(weights(present), before[present]))


def test_recursive_net_updates_with_the_callers_optimizer(psets, tmp_path):
    train, dev = psets
    sets, gold = [s.trees(True) for s in train], [s.gold for s in train]
    learner = build(RECURSIVE, **{"learner.seed": 3})
    with pytest.raises(StructPrefError, match="stepped by an optimizer"):
        fit(learner, sets, gold)
    with pytest.raises(StructPrefError, match="initialize first"):
        learner.update(sets, gold, sgd=Adam(0.01))
    # fit: initialize, then per epoch shuffled minibatches of one update each
    fitted = fit(build(RECURSIVE, **{"learner.seed": 3}), sets, gold, schedule=rnn_schedule())
    sgd = Adam(0.01)
    learner.initialize(sets, gold)
    order = [i for i, g in enumerate(gold) if g is not None and len(sets[i]) > 1]
    shuffle = random.Random(3)
    for epoch in range(2):
        shuffle.shuffle(order)
        losses = {}
        for batch in batches(len(order), 16):
            learner.update([sets[order[i]] for i in batch], [gold[order[i]] for i in batch],
                           sgd=sgd, losses=losses)
        assert losses["recursive_net"] / len(order) == pytest.approx(fitted.log.losses[epoch], rel=1e-9)
    raw = [learner.utilities(c) for c in (s.trees(True) for s in dev)]
    with learner.use_params(sgd.averages):  # the averaged network, as spaCy evaluates and saves
        averaged = [learner.utilities(s.trees(True)) for s in dev]
        data = learner.to_bytes()
        learner.to_disk(tmp_path / "rnn")
    assert not np.allclose(np.concatenate(raw), np.concatenate(averaged))
    for loaded in (build(RECURSIVE).from_bytes(data), build(RECURSIVE).from_disk(tmp_path / "rnn")):
        for s, u, v in zip(dev, averaged, (fitted.utilities(s.trees(True)) for s in dev)):
            np.testing.assert_array_equal(loaded.utilities(s.trees(True)), u)
            np.testing.assert_array_equal(u, v)
    # sgd=None accumulates the gradient; finish_update applies it
    one, two = (build(RECURSIVE).initialize(sets, gold) for _ in range(2))
    one.update(sets[:40], gold[:40], sgd=Adam(0.01))
    two.update(sets[:40], gold[:40])
    two.finish_update(Adam(0.01))
    np.testing.assert_array_equal(one.utilities(sets[0]), two.utilities(sets[0]))
    with pytest.raises(StructPrefError, match="width = 8"):
        RecursiveNetLearner(width=25).from_bytes(data)


def test_recursive_net_exclude(psets):
    train, dev = psets
    learner = fit(build(RECURSIVE), [s.trees(True) for s in train[:60]], [s.gold for s in train[:60]],
                  schedule=rnn_schedule())
    cands = dev[0].trees(True)
    fresh = build(RECURSIVE).from_bytes(learner.to_bytes(exclude=["model"]))
    assert fresh.vocab == learner.vocab and fresh.log.losses == learner.log.losses
    np.testing.assert_array_equal(  # the cfg's vocabulary with untrained weights
        fresh.utilities(cands), build(RECURSIVE).initialize([s.trees(True) for s in train[:60]],
                                                            [s.gold for s in train[:60]]).utilities(cands))
    with pytest.raises(StructPrefError, match="load its cfg"):
        build(RECURSIVE).from_bytes(learner.to_bytes(), exclude=["cfg"])


@pytest.fixture(scope="module")
def scored(psets):
    """Attachment sets with made-up log probabilities (the gold candidate likelier)."""
    train, dev = psets
    rng = np.random.default_rng(0)

    def log_p(s):
        lp = -rng.uniform(1.0, 6.0, size=len(s))
        if s.gold is not None:
            lp[s.gold] += 0.5
        return lp

    return [(s, log_p(s)) for s in train[:120]], [(s, log_p(s)) for s in dev]


def test_composite_kernel_is_tree_kernel_plus_log_p_product(scored):
    (train, _) = scored
    kernel = CompositeKernel(TreeKernel(0.3), b=0.2)
    (s1, lp1), (s2, lp2) = train[0], train[5]
    t1, t2 = s1.trees(True), s2.trees(True)
    expected = gram(t1, t2, lam=0.3, normalize=True) + 0.2 * np.outer(lp1, lp2)
    np.testing.assert_allclose(expected, composite_gram(t1, lp1, t2, lp2, lam=0.3, b=0.2), rtol=1e-12)
    as_pairs = kernel.prepare(list(zip(t1, lp1)))
    as_dag = kernel.prepare((s1.dag(kernel.symbols, True), lp1))
    as_scored = kernel.prepare(ScoredTrees(s1.dag(kernel.symbols, True), lp1))
    other = kernel.prepare(list(zip(t2, lp2)))
    for prepared in (as_pairs, as_dag, as_scored):
        np.testing.assert_allclose(kernel.block(prepared, other), expected, rtol=1e-10, atol=1e-12)
    w = np.linspace(-1, 1, len(t1))
    np.testing.assert_allclose(kernel.weighted_sums([(as_dag, w)], other), w @ expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kernel.block(kernel.join([as_pairs, other]), other),
                               np.vstack([expected, composite_gram(t2, lp2, lam=0.3, b=0.2)]),
                               rtol=1e-10, atol=1e-12)
    with pytest.raises(StructPrefError, match="one log probability per candidate"):
        kernel.prepare((s1.dag(kernel.symbols, True), lp1[:-1]))
    with pytest.raises(StructPrefError, match="finite"):
        ScoredTrees(t1, np.full(len(t1), -np.inf))
    with pytest.raises(StructPrefError, match="at least 0"):
        CompositeKernel(TreeKernel(), b=-1)


def test_perceptron_with_the_composite_kernel(scored, tmp_path):
    train, dev = scored
    learner = build(COMPOSITE)
    symbols = learner.kernel.symbols
    assert learner.kernel.b == 0.05 and learner.kernel.tree_kernel.lam == 0.3
    fit(learner, [ScoredTrees(s.dag(symbols, True), lp) for s, lp in train], [s.gold for s, _ in train])
    assert learner.n_updates > 0
    # U(x) = Σ_s c_s K((x_s, lp_s), (x, lp)) over the support, with K from gram
    chunk, = learner.chunks
    coef = learner._coefficients(chunk, True)
    trees, lps = zip(*chunk.items)
    loaded = build(COMPOSITE).from_bytes(learner.to_bytes())
    for s, lp in dev[:8]:
        expected = coef @ composite_gram(list(trees), lps, s.trees(True), lp, lam=0.3, b=0.05)
        u = learner.utilities(ScoredTrees(s.dag(symbols, True), lp))
        np.testing.assert_allclose(u, expected, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(learner.utilities(list(zip(s.trees(True), lp))), expected,
                                   rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(loaded.utilities(ScoredTrees(s.dag(loaded.kernel.symbols, True), lp)),
                                   u, rtol=1e-12, atol=1e-12)


def test_learner_checks_its_kernel():
    with pytest.raises(StructPrefError, match="not a learner kernel"):
        KernelPerceptron(SymbolTable())


def test_registered_learners_load_cheaply():
    ours = {ep.name: ep for ep in entry_points(group="spacy_misc") if ep.value.startswith("spacy_structpref")}
    assert sorted(ours) == sorted(f"spacy_structpref.{name}.v1" for name in (
        "CompositeKernel", "EnsembleLearner", "FeatureRanker", "FootClasses", "ForestKernel", "KernelPerceptron",
        "LinearKernel", "RecursiveNetLearner", "Schedule", "SpecialisedLearner", "TreeKernel",
        # kernel_textcat's kernels over Docs
        "BowDocKernel", "ForestDocKernel", "NamedDocKernel", "SumDocKernel", "TreeDocKernel"))
    for name, ep in ours.items():
        assert registry.misc.get(name) is ep.load()
    code = ("import sys\n"
            "from spacy.util import registry\n"
            "registry.misc.get('spacy_structpref.KernelPerceptron.v1')\n"
            "print([m for m, mod in sys.modules.items() if m.startswith('spacy_structpref') and\n"
            "       getattr(mod, '__file__', '') and mod.__file__.endswith(('.so', '.pyd'))])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr



class _Counted(list):
    """Sets of which each access is counted, with sizes told without access."""

    def __init__(self, items):
        super().__init__(items)
        self.reads = 0

    def __getitem__(self, i):
        self.reads += 1
        return super().__getitem__(i)

    def sizes(self):
        return [len(x) for x in list.__iter__(self)]


@given(st.lists(st.lists(st.integers(), max_size=4), min_size=1, max_size=12), st.data())
def test_subsequence_of_subsequence_is_one_level_with_the_same_items(items, data):
    n = len(items)
    outer = data.draw(st.lists(st.integers(0, n - 1), max_size=10))
    inner = data.draw(st.lists(st.integers(0, len(outer) - 1), max_size=10)) if outer else []
    counted = _Counted(items)
    nested = Subsequence(Subsequence(counted, outer), inner)
    assert nested.items is counted
    assert nested.indices == [outer[i] for i in inner]
    assert nested.sizes() == [len(items[outer[i]]) for i in inner]
    assert counted.reads == 0  # sizes come from the items' sizes(), no set is read
    assert list(nested) == [items[outer[i]] for i in inner]

"""The distro_tagger component: training on a PTB slice, schedule, nuclear
norm, serialisation, multiprocessing, the label space."""
import random

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.errors import TaggerError
from spacy_structpref.models.distro import effective_rank, variant_label_matrix

from tests.helpers.fixtures import slow_fixture

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _train(nlp, examples, epochs, seed=0):
    opt = nlp.initialize(lambda: examples)
    rng = random.Random(seed)
    examples = list(examples)
    for _ in range(epochs):
        rng.shuffle(examples)
        for i in range(0, len(examples), 16):
            nlp.update(examples[i:i + 16], sgd=opt)
    return opt


def _examples(nlp, split, limit):
    return [Example(Doc(nlp.vocab, words=[t.text for t in d]), d)
            for d in corpus_docs("ptb", split, nlp.vocab, limit=limit)]


@slow_fixture
def trained():
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger", config={"w_steps": 20, "a_steps": 5, "model": {"rank": 12}})
    train = _examples(nlp, "train", 400)
    _train(nlp, train, epochs=4)
    return nlp


def test_learns_ptb_slice(trained):
    dev = _examples(trained, "dev", 150)
    scores = trained.evaluate(dev)
    assert scores["tag_acc"] > 0.85
    doc = trained("The company said it expects a loss .")
    assert [t.tag_ for t in doc][:2] == ["DT", "NN"]
    assert doc[-1].tag_ == "."


def test_label_space(trained):
    tagger = trained.get_pipe("distro_tagger")
    vectors = tagger.label_vectors
    assert set(vectors) == set(tagger.labels) and len(tagger.labels) > 30
    for v in vectors.values():
        assert v.shape == (12,) and numpy.linalg.norm(v) == pytest.approx(1.0, abs=1e-4)
    sims = tagger.most_similar("NN", n=3)
    assert len(sims) == 3 and "NN" not in [t for t, _ in sims]
    # reference: cosine of the raw columns
    ref = sorted(((float(vectors["NN"] @ v), t) for t, v in vectors.items() if t != "NN"),
                 reverse=True)[:3]
    assert [t for t, _ in sims] == [t for _, t in ref]
    with pytest.raises(KeyError, match="unknown tag"):
        tagger.most_similar("NOT-A-TAG")


def test_serialisation_round_trip(trained, tmp_path):
    texts = ["Stocks fell sharply in heavy trading .", "He said so ."]
    before = [[t.tag_ for t in d] for d in trained.pipe(texts)]
    trained.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert [[t.tag_ for t in d] for d in loaded.pipe(texts)] == before
    tagger = trained.get_pipe("distro_tagger")
    fresh = spacy.blank("en").add_pipe("distro_tagger", config={"model": {"rank": 12}})
    fresh.from_bytes(tagger.to_bytes())
    assert fresh.labels == tagger.labels
    numpy.testing.assert_array_equal(fresh.label_matrix, tagger.label_matrix)


def test_every_sublayer_round_trips(trained, tmp_path):
    tagger = trained.get_pipe("distro_tagger")
    tagger.to_disk(tmp_path / "tagger")
    fresh = spacy.blank("en").add_pipe("distro_tagger", config={"model": {"rank": 12}})
    fresh.from_disk(tmp_path / "tagger")
    nodes = list(tagger.model.walk())
    assert [n.name for n in fresh.model.walk()] == [n.name for n in nodes]
    assert {n.name for n in nodes} >= {"sparse_features", "distro_weights", "distro_labels"}
    for old, new in zip(nodes, fresh.model.walk()):
        assert old.param_names == new.param_names
        for name in old.param_names:
            numpy.testing.assert_array_equal(new.get_param(name), old.get_param(name))


def test_multiprocessing(trained):
    texts = ["Stocks fell sharply in heavy trading .", "He said so .", "Prices rose ."] * 4
    single = [[t.tag_ for t in d] for d in trained.pipe(texts)]
    multi = [[t.tag_ for t in d] for d in trained.pipe(texts, n_process=2, batch_size=3)]
    assert multi == single


def test_onehot_baseline_keeps_A_and_alternation_moves_it():
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger", config={"model": {"onehot": True}, "w_steps": 1, "a_steps": 1})
    train = _examples(nlp, "train", 60)
    _train(nlp, train, epochs=1)
    tagger = nlp.get_pipe("distro_tagger")
    M = len(tagger.labels)
    numpy.testing.assert_array_equal(tagger.label_matrix, numpy.eye(M))

    nlp2 = spacy.blank("en")
    nlp2.add_pipe("distro_tagger", config={"model": {"rank": 8}, "w_steps": 2, "a_steps": 2,
                                           "nuclear_lambda": 0.0})
    opt = nlp2.initialize(lambda: train)
    tagger2 = nlp2.get_pipe("distro_tagger")
    A0 = tagger2.label_matrix.copy()
    W0 = None
    for i in range(4):
        before_A = tagger2.label_matrix.copy()
        nlp2.update(train[i * 8:(i + 1) * 8], sgd=opt)
        moved = not numpy.allclose(before_A, tagger2.label_matrix)
        # steps 0, 1 update w only; steps 2, 3 update A only
        assert moved == (i >= 2)
        if i == 1:
            W0 = tagger2.model.get_ref("weights").get_param("WT").copy()
    numpy.testing.assert_array_equal(W0, tagger2.model.get_ref("weights").get_param("WT"))
    assert not numpy.allclose(A0, tagger2.label_matrix)


def test_nuclear_norm_lowers_rank():
    ranks = {}
    for lam in (0.0, 1500.0):
        nlp = spacy.blank("en")
        nlp.add_pipe("distro_tagger", config={"model": {"rank": 10}, "w_steps": 2, "a_steps": 2,
                                              "nuclear_lambda": lam})
        train = _examples(nlp, "train", 80)
        _train(nlp, train, epochs=1)
        ranks[lam] = effective_rank(nlp.get_pipe("distro_tagger").label_matrix)
    assert ranks[0.0] == 10 and ranks[1500.0] < 10


def test_missing_tags_and_errors():
    nlp = spacy.blank("en")
    tagger = nlp.add_pipe("distro_tagger")
    words = ["a", "b", "c"]
    egs = [Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, tags=["X", "Y", "X"])),
           Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, tags=["X", "", "Y"]))]
    opt = nlp.initialize(lambda: egs)
    assert tagger.labels == ("X", "Y")
    numpy.testing.assert_array_equal(tagger.gold_ids(egs[1:]), [0, -1, 1])
    unseen = Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, tags=["X", "Z", "Y"]))
    with pytest.raises(TaggerError, match="gold label 'Z' is not one of the 2 labels"):
        nlp.update([unseen], sgd=opt)
    # labels= that leave out a gold tag: refused at initialize, with or without the tag dictionary
    for min_count in (None, 1):
        explicit = spacy.blank("en").add_pipe("distro_tagger", config={"tag_dict_min_count": min_count})
        with pytest.raises(TaggerError, match="gold label 'Y' is not one of the 1 labels"):
            explicit.initialize(lambda: egs, labels=["X"])
    for _ in range(20):
        nlp.update(egs, sgd=opt)
    assert [t.tag_ for t in nlp(Doc(nlp.vocab, words=words))] == ["X", "Y", "X"]
    assert len(nlp(Doc(nlp.vocab, words=[]))) == 0
    with pytest.raises(ValueError, match="already initialized"):
        tagger.add_label("Z")
    with pytest.raises(ValueError, match="w_steps"):
        spacy.blank("en").add_pipe("distro_tagger", config={"w_steps": 0})
    with pytest.raises(TaggerError, match="strings"):
        tagger.add_label(3)
    with pytest.raises(TaggerError, match="nuclear_lambda"):
        spacy.blank("en").add_pipe("distro_tagger", config={"nuclear_lambda": -1.0})
    with pytest.raises((TaggerError, ValueError), match="average_A"):
        spacy.blank("en").add_pipe("distro_tagger", config={"average_A": "yes"})
    with pytest.raises(TypeError):  # spaCy's own check of the callback
        spacy.blank("en").add_pipe("distro_tagger").initialize(lambda: [])


def test_distro_tagger_before_initialize_says_so():
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger")
    with pytest.raises(TaggerError, match="not initialized: call nlp.initialize"):
        nlp("The dog barks")


def _family_tagger(nlp, **config):
    model = {"tok2vec": {"@architectures": "spacy_structpref.TensorFeatures.v1"}, **config.pop("model", {})}
    return nlp.add_pipe("distro_tagger", config={"model": model, **config})


def _family_examples(nlp, n=12):
    from spacy_structpref.corpora.label_families import family_task

    task = family_task("sequence", 0, n_families=3, n_members=2, member_weights=(1, 1), width=6,
                       train_size=8 * n, test_size=1)
    return task.examples(nlp.vocab, "train")


@pytest.mark.parametrize("a_rounds", [None, 1])
def test_phases_in_epochs(a_rounds):
    """w_epochs = 1, a_epochs = 2: epoch 0 on w, epochs 1-2 on A, epoch 3 on
    w, epochs 4-5 on A again unless a_rounds = 1 ended the A phases (an
    epoch: the 12 examples initialize saw, here in batches of 4)."""
    nlp = spacy.blank("xx")
    tagger = _family_tagger(nlp, w_epochs=1, a_epochs=2, a_rounds=a_rounds, nuclear_lambda=0.0)
    train = _family_examples(nlp)
    opt = nlp.initialize(lambda: train)
    assert tagger.cfg["epoch_size"] == 12
    on_w = (0, 3) if a_rounds is None else (0, 3, 4, 5)
    for epoch in range(6):
        for i in range(0, 12, 4):
            A = tagger.label_matrix.copy()
            WT = tagger.model.get_ref("weights").get_param("WT").copy()
            nlp.update(train[i:i + 4], sgd=opt)
            a_moved = not numpy.array_equal(A, tagger.label_matrix)
            w_moved = not numpy.array_equal(WT, tagger.model.get_ref("weights").get_param("WT"))
            assert (a_moved, w_moved) == ((False, True) if epoch in on_w else (True, False)), (epoch, i)
    assert tagger.epoch == 5 and tagger.n_docs == 72


def _params(model):
    return [node.get_param(name).copy() for node in model.walk() for name in node.param_names
            if node.has_param(name)]


def _train_family(restarts, seed, train, epochs=3):
    from thinc.api import SGD

    nlp = spacy.blank("xx")
    tagger = _family_tagger(nlp, w_epochs=1, a_epochs=1, restarts=restarts, nuclear_lambda=0.5,
                            model={"random_init": True, "seed": seed})
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in eg.predicted]), eg.reference) for eg in train]
    for eg, source in zip(examples, train):
        eg.predicted.tensor = source.predicted.tensor
    opt = nlp.initialize(lambda: examples, sgd=SGD(0.05, L2=0.01, grad_clip=0.0))
    for _ in range(epochs):
        for i in range(0, len(examples), 4):
            nlp.update(examples[i:i + 4], sgd=opt)
    return tagger, opt


def test_restarts_keep_the_lowest_objective():
    """Three restarts (seeds 11, 12, 13) through the first w and A epochs;
    the kept one (not the first here) then trains on as that restart alone
    would have."""
    train = _family_examples(spacy.blank("xx"))
    tagger, opt = _train_family(3, 11, train)
    objectives = tagger.restart_objectives
    assert len(objectives) == 3 and not tagger.restart_models and len(set(objectives)) == 3
    best = int(numpy.argmin(objectives))
    assert best > 0
    alone, alone_opt = _train_family(1, 11 + best, train)
    assert alone.restart_objectives is None
    for mine, theirs in zip(_params(tagger.model), _params(alone.model)):
        numpy.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
    with tagger.model.use_params(opt.averages), alone.model.use_params(alone_opt.averages):
        numpy.testing.assert_allclose(tagger.label_matrix, alone.label_matrix, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("average_A", [True, False])
def test_average_A_false_evaluates_w_averaged_with_A_as_it_stands(average_A):
    """With the optimizer's averages in place (as spaCy evaluates), A is the
    running average of its steps, or A itself with ``average_A = false``;
    w is averaged either way."""
    from thinc.api import Adam

    nlp = spacy.blank("xx")
    tagger = _family_tagger(nlp, w_steps=2, a_steps=2, nuclear_lambda=0.1, average_A=average_A)
    examples = _family_examples(nlp)
    opt = nlp.initialize(lambda: examples, sgd=Adam(0.05, use_averages=True))
    for i in range(0, 8 * 4, 4):
        nlp.update(examples[i % len(examples):i % len(examples) + 4], sgd=opt)
    raw_A, raw_w = tagger.label_matrix.copy(), _params(tagger.model)
    with tagger.model.use_params(opt.averages):
        averaged_A, averaged_w = tagger.label_matrix, _params(tagger.model)
    assert numpy.array_equal(averaged_A, raw_A) is not average_A
    assert any(not numpy.array_equal(a, b) for a, b in zip(averaged_w, raw_w))


def test_training_objective_by_hand():
    nlp = spacy.blank("xx")
    tagger = _family_tagger(nlp, nuclear_lambda=0.5, model={"rank": 2})
    nlp.initialize(lambda: _family_examples(nlp))
    model = tagger.model
    rng = numpy.random.default_rng(0)
    for node in model.walk():
        for name in node.param_names:
            node.set_param(name, rng.standard_normal(node.get_param(name).shape).astype("f"))
    w = sum((model.get_ref("weights").get_param(n).astype("float64") ** 2).sum() for n in ("W", "b", "WT", "w0"))
    A = model.get_ref("labels").get_param("A").astype("float64")
    expected = 0.3 / 2 * w + 0.5 * numpy.linalg.svd(A, compute_uv=False).sum() + 2.0
    assert tagger.training_objective(model, 2.0, 0.3) == pytest.approx(expected, rel=1e-6)


def test_scores_report_the_effective_rank():
    nlp = spacy.blank("xx")
    tagger = _family_tagger(nlp, model={"rank": 4})
    train = _family_examples(nlp)
    nlp.initialize(lambda: train)
    scores = nlp.evaluate(train)
    assert scores["effective_rank"] == tagger.effective_rank == 4
    assert scores["rank_share"] == pytest.approx(4 / len(tagger.labels))
    # spacy train's table shows the share (weight 0: it does not count in the score)
    assert nlp.config["training"]["score_weights"]["rank_share"] == 0.0


def test_schedule_settings_are_checked():
    nlp = spacy.blank("xx")
    with pytest.raises(TaggerError, match="set together"):
        _family_tagger(nlp, w_epochs=5)
    with pytest.raises(TaggerError, match="a_rounds"):
        _family_tagger(nlp, a_rounds=-1)
    with pytest.raises(TaggerError, match="restarts"):
        _family_tagger(nlp, restarts=2)  # phases in steps
    with pytest.raises(TaggerError, match="restarts"):
        _family_tagger(nlp, w_epochs=1, a_epochs=0, restarts=2)
    tagger = _family_tagger(nlp, w_epochs=1, a_epochs=1, restarts=2)  # A starts one-hot: restarts all alike
    with pytest.raises(TaggerError, match="needs A to start random"):
        nlp.initialize(lambda: _family_examples(nlp))
    assert tagger.cfg["restarts"] == 2


def test_a_rounds_in_steps():
    """w_steps = 2, a_steps = 1, a_rounds = 2: steps 2 and 5 on A, every other on w."""
    nlp = spacy.blank("xx")
    tagger = _family_tagger(nlp, w_steps=2, a_steps=1, a_rounds=2, nuclear_lambda=0.0)
    train = _family_examples(nlp)
    opt = nlp.initialize(lambda: train)
    moved = []
    for step in range(9):
        A = tagger.label_matrix.copy()
        nlp.update(train[step:step + 1], sgd=opt)
        moved.append(not numpy.array_equal(A, tagger.label_matrix))
    assert [i for i, m in enumerate(moved) if m] == [2, 5]


def _variant_examples(nlp):
    tagged = [[("The", "AT"), ("House", "NN-TL"), ("voted", "VBD")], [("a", "AT"), ("house", "NN"), (".", ".")],
              [("per", "FW-IN"), ("se", "FW-NN"), ("in", "IN"), ("Rome", "NP")]]
    return [Example(Doc(nlp.vocab, words=[w for w, _ in s]), Doc(nlp.vocab, words=[w for w, _ in s],
                                                                 tags=[t for _, t in s])) for s in tagged]


def test_variant_start_sets_A_from_the_tag_names(tmp_path):
    nlp = spacy.blank("en")
    tagger = nlp.add_pipe("distro_tagger", config={"variant_start": 0.2, "w_steps": 2, "a_steps": 1})
    examples = _variant_examples(nlp)
    opt = nlp.initialize(lambda: examples)
    A = tagger.model.get_ref("labels").get_param("A")
    assert numpy.array_equal(A, variant_label_matrix(tagger.labels, 0.2))
    assert tagger.label_vectors["NN-TL"] @ tagger.label_vectors["NN"] > 0.5
    for _ in range(3):
        nlp.update(examples, sgd=opt)
    nlp.to_disk(tmp_path / "model")
    assert spacy.load(tmp_path / "model").get_pipe("distro_tagger").cfg["variant_start"] == 0.2


@pytest.mark.parametrize("model", [{"rank": 3}, {"onehot": True}, {"random_init": True}])
def test_variant_start_needs_a_learned_one_hot_A(model):
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger", config={"variant_start": 0.2, "model": model})
    examples = _variant_examples(nlp)
    with pytest.raises(TaggerError, match="variant_start"):
        nlp.initialize(lambda: examples)


def test_variant_start_is_checked():
    with pytest.raises(TaggerError, match="variant_start"):
        spacy.blank("en").add_pipe("distro_tagger", config={"variant_start": -0.1})
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger", config={"variant_start": 0.2})
    plain = [Example(Doc(nlp.vocab, words=["a", "b"]), Doc(nlp.vocab, words=["a", "b"], tags=["AT", "NN"]))]
    with pytest.raises(TaggerError, match="none of the 2 labels is a variant"):
        nlp.initialize(lambda: plain)

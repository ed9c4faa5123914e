"""The DistroTagger Thinc model over sparse features: gradients against
finite differences, the phases and the label step, the proximal step against
an SVD reference, the one-hot baseline (the structured SVM)."""
import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from thinc.api import SGD, Adam, Model

from spacy_structpref.errors import TaggerError
from spacy_structpref.models.distro import (DistroTagger, adopt_parameters, copy_model, draw_label_matrix,
                                            effective_rank, finish_label_update, nuclear_norm, prox_step,
                                            set_phase, starts_random, variant_label_matrix, weight_norm)
from spacy_structpref.models.sparse_features import SparseFeatures


def fixed_features(width, seed=0):
    """Feature layer returning fixed random vectors per doc (a trainable-free stub)."""
    rng = numpy.random.default_rng(seed)
    cache = {}

    def forward(model, docs, is_train):
        out = []
        for d in docs:
            key = id(d)
            if key not in cache:
                cache[key] = rng.standard_normal((len(d), width)).astype("f")
            out.append(cache[key])
        return out, lambda dY: []

    return Model("fixed", forward, dims={"nO": width})


@pytest.fixture(scope="module")
def docs():
    nlp = spacy.blank("en")
    return [nlp("The cat sat on the mat ."), nlp("Dogs bark"), nlp("")]


def _set_random_params(model, rng):
    for node in model.walk():
        for name in node.param_names:
            if node.has_param(name):
                node.set_param(name, rng.standard_normal(node.get_param(name).shape).astype("f"))


def _objective(model, docs, G):
    scores = model.predict(docs)
    return float((scores.emissions * G[0]).sum() + (scores.transitions * G[1]).sum()
                 + (scores.initial * G[2]).sum())


@pytest.mark.parametrize("project", [True, False])
def test_gradients_match_finite_differences(docs, project):
    M, d = 4, 3
    feats = fixed_features(5) if project else SparseFeatures(n_rows=64)
    model = DistroTagger(feats, rank=d, nO=M)
    model.initialize(X=docs)
    rng = numpy.random.default_rng(1)
    _set_random_params(model, rng)
    N = sum(len(x) for x in docs)
    G = (rng.standard_normal((N, M)).astype("f"), rng.standard_normal((M, M)).astype("f"),
         rng.standard_normal(M).astype("f"))
    set_phase(model, update_w=True, update_A=True)
    _, backprop = model.begin_update(docs)
    backprop(G)
    eps = 1e-2
    for node in model.walk():
        for name in node.param_names:
            if not node.has_param(name):
                continue
            param = node.get_param(name).astype("float64")
            grad = node.get_grad(name)
            for idx in list(numpy.ndindex(param.shape))[:40]:
                if name == "E" and not grad[idx]:
                    continue  # untouched hash rows
                old = param[idx]
                for sign in (1, -1):
                    p = param.copy()
                    p[idx] = old + sign * eps
                    node.set_param(name, p.astype("f"))
                    if sign == 1:
                        up = _objective(model, docs, G)
                    else:
                        down = _objective(model, docs, G)
                node.set_param(name, param.astype("f"))
                assert grad[idx] == pytest.approx((up - down) / (2 * eps), rel=2e-2, abs=2e-2), \
                    (name, idx)


def _after_label_phase_backprop(docs):
    """A small random DISTRO model after one backprop in the A-only phase."""
    model = DistroTagger(fixed_features(5), rank=3, nO=4)
    model.initialize(X=docs)
    _set_random_params(model, numpy.random.default_rng(0))
    set_phase(model, update_w=False, update_A=True)
    scores, backprop = model.begin_update(docs)
    backprop((numpy.ones_like(scores.emissions), numpy.ones((4, 4), "f"), numpy.ones(4, "f")))
    return model


def test_phases_select_parameters(docs):
    model = _after_label_phase_backprop(docs)
    labels, weights = model.get_ref("labels"), model.get_ref("weights")
    assert labels.has_grad("A") and not weights.has_grad("W") and not weights.has_grad("WT")


def _params(model):
    return {(i, name): node.get_param(name).copy() for i, node in enumerate(model.walk())
            for name in node.param_names if node.has_param(name)}


@pytest.mark.parametrize("average", [True, False])
def test_label_step_is_scaled_adam_then_prox_on_A_and_its_average(docs, average):
    """A's running average gets the prox too; with average=False it is A itself (a copy)."""
    model = _after_label_phase_backprop(docs)
    labels = model.get_ref("labels")
    A, dA = labels.get_param("A").copy(), labels.get_grad("A").copy()
    before = _params(model)
    opt = Adam(0.1, use_averages=True)
    rank = finish_label_update(labels, opt, lr_scale=0.5, nuclear_lambda=4.0, average=average)
    # reference: a first Adam step at learn rate 0.1 · 0.5, then the prox at 0.05 · 4
    stepped, _ = Adam(0.05)(("ref", "A"), A, dA)
    expected, expected_rank = prox_step(stepped, 0.2)
    numpy.testing.assert_allclose(labels.get_param("A"), expected, rtol=1e-5, atol=1e-6)
    assert rank == expected_rank
    averaged = opt.averages[(labels.id, "A")]
    numpy.testing.assert_allclose(numpy.linalg.norm(averaged, axis=0), 1.0, rtol=1e-5)
    labels.set_grad("A", dA)
    finish_label_update(labels, opt, lr_scale=0.5, nuclear_lambda=4.0, average=average)  # a second step
    averaged = opt.averages[(labels.id, "A")]
    assert numpy.array_equal(averaged, labels.get_param("A")) is not average
    assert averaged is not labels.get_param("A") and averaged.dtype == numpy.float32
    after = _params(model)
    changed = {key for key in before if not numpy.array_equal(before[key], after[key])}
    assert changed == {(i, "A") for i, node in enumerate(model.walk()) if node is labels}


def test_model_errors_are_tagger_errors(docs):
    with pytest.raises(TaggerError, match="rank"):
        DistroTagger(fixed_features(4), rank=0)
    with pytest.raises(TaggerError, match="number of labels"):
        DistroTagger(fixed_features(4)).initialize(X=docs)
    with pytest.raises(TaggerError, match="n_hashes"):
        SparseFeatures(n_hashes=5)


def test_onehot_is_the_structured_svm(docs):
    model = DistroTagger(SparseFeatures(n_rows=64), rank=2, onehot=True, nO=5)
    model.initialize(X=docs)
    assert model.get_dim("nA") == 5
    numpy.testing.assert_array_equal(model.get_ref("labels").get_param("A"), numpy.eye(5))
    set_phase(model, update_w=True, update_A=True)
    scores, backprop = model.begin_update(docs)
    backprop((numpy.ones_like(scores.emissions), numpy.ones((5, 5), "f"), numpy.ones(5, "f")))
    assert not model.get_ref("labels").has_grad("A")
    # with A = I the scores are the plain SSVM parts: transitions are W_T itself
    WT = numpy.arange(25, dtype="f").reshape(5, 5)
    model.get_ref("weights").set_param("WT", WT)
    numpy.testing.assert_allclose(model.predict(docs).transitions, WT)


def test_init_of_A(docs):
    low = DistroTagger(fixed_features(4), rank=3, nO=6)
    low.initialize(X=docs)
    numpy.testing.assert_allclose(numpy.linalg.norm(low.get_ref("labels").get_param("A"), axis=0), 1.0, rtol=1e-5)
    high = DistroTagger(fixed_features(4), rank=6, nO=6)
    high.initialize(X=docs)
    numpy.testing.assert_array_equal(high.get_ref("labels").get_param("A"), numpy.eye(6))
    for name in ("W", "WT", "w0", "b"):
        assert not high.get_ref("weights").get_param(name).any()  # w = 0 at start
    with pytest.raises(ValueError, match="number of labels"):
        DistroTagger(fixed_features(4)).initialize(X=docs)
    for rank in (0, -1, 2.5, True, "3"):
        with pytest.raises(TaggerError, match="rank"):
            DistroTagger(fixed_features(4), rank=rank)
    # a rank above the number of labels adds parameters, not capacity: refused before anything is allocated
    with pytest.raises(TaggerError, match="rank 5000 is above the number of labels"):
        DistroTagger(fixed_features(4), rank=5000, nO=6).initialize(X=docs)


def test_random_init_draws_A_whatever_d(docs):
    """The paper's Algorithm 1 starts from a random A, also with d = M."""
    model = DistroTagger(SparseFeatures(n_rows=64), nO=6, seed=3, random_init=True)
    model.initialize(X=docs)
    labels = model.get_ref("labels")
    A = labels.get_param("A")
    assert A.shape == (6, 6) and starts_random(labels) and effective_rank(A) == 6
    numpy.testing.assert_allclose(numpy.linalg.norm(A, axis=0), 1.0, rtol=1e-5)
    # the draw is the seed's: unit columns of a standard normal matrix
    ref = numpy.random.default_rng(3).standard_normal((6, 6))
    numpy.testing.assert_allclose(A, ref / numpy.linalg.norm(ref, axis=0), rtol=1e-5)
    draw_label_matrix(labels, 4)
    assert not numpy.allclose(labels.get_param("A"), A)
    assert not starts_random(DistroTagger(SparseFeatures(n_rows=64), nO=6).initialize(X=docs).get_ref("labels"))
    with pytest.raises(TaggerError, match="random_init"):
        DistroTagger(SparseFeatures(n_rows=64), onehot=True, random_init=True)


def test_norms_of_the_objective(docs):
    model = DistroTagger(fixed_features(4), rank=3, nO=5)
    model.initialize(X=docs)
    _set_random_params(model, numpy.random.default_rng(1))
    weights = model.get_ref("weights")
    by_hand = sum(float((weights.get_param(n).astype("float64") ** 2).sum()) for n in ("W", "b", "WT", "w0"))
    assert weight_norm(model) == pytest.approx(by_hand, rel=1e-6)
    A = model.get_ref("labels").get_param("A")
    # ||A||_* = trace(sqrt(Aᵀ A))
    eig = numpy.linalg.eigvalsh(A.astype("float64").T @ A)
    assert nuclear_norm(A) == pytest.approx(numpy.sqrt(numpy.clip(eig, 0, None)).sum(), rel=1e-5)


def test_copy_model_links_refs_into_the_copy(docs):
    model = DistroTagger(fixed_features(4), rank=3, nO=5)
    model.initialize(X=docs)
    twin = copy_model(model)
    for name in ("tok2vec", "weights", "labels"):
        assert twin.get_ref(name) is twin.layers[("tok2vec", "weights", "labels").index(name)]
        assert twin.get_ref(name).id != model.get_ref(name).id
    numpy.testing.assert_array_equal(twin.get_ref("labels").get_param("A"), model.get_ref("labels").get_param("A"))
    twin.get_ref("labels").set_param("A", numpy.zeros((3, 5), "f"))
    assert model.get_ref("labels").get_param("A").any()


def test_adopt_parameters_takes_weights_and_optimizer_state(docs):
    model = DistroTagger(fixed_features(4), rank=3, nO=5)
    model.initialize(X=docs)
    other = copy_model(model)
    _set_random_params(other, numpy.random.default_rng(2))
    opt = Adam(0.1, use_averages=True)
    weights = other.get_ref("weights")
    key = (weights.id, "W")
    W, _ = opt(key, weights.get_param("W"), numpy.ones_like(weights.get_param("W")))
    weights.set_param("W", W)
    adopt_parameters(model, other, opt)
    for node, twin in zip(model.walk(), other.walk()):
        for name in twin.param_names:
            if twin.has_param(name):
                numpy.testing.assert_array_equal(node.get_param(name), twin.get_param(name))
    mine = (model.get_ref("weights").id, "W")
    numpy.testing.assert_array_equal(opt.averages[mine], opt.averages[key])
    numpy.testing.assert_array_equal(opt.mom1[mine], opt.mom1[key])
    assert opt.nr_update[mine] == opt.nr_update[key] == 1
    # the state is copied, not shared
    opt.averages[key] += 1
    assert not numpy.array_equal(opt.averages[mine], opt.averages[key])
    adopt_parameters(model, other, SGD(0.1, use_averages=False))  # no averages: parameters only


def test_unset_rank_is_one_per_label(docs):
    model = DistroTagger(SparseFeatures(n_rows=64), nO=7)
    model.initialize(X=docs)
    assert model.get_dim("nA") == 7 and model.layers[0].get_dim("nO") == 7
    numpy.testing.assert_array_equal(model.get_ref("labels").get_param("A"), numpy.eye(7))
    set_phase(model, update_w=True, update_A=True)  # unlike onehot, A is learned
    scores, backprop = model.begin_update(docs)
    backprop((numpy.ones_like(scores.emissions), numpy.ones((7, 7), "f"), numpy.ones(7, "f")))
    assert model.get_ref("labels").has_grad("A")


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(2, 8), st.floats(0.0, 3.0), st.integers(0, 10_000))
def test_prox_step_against_svd_reference(d, M, threshold, seed):
    A = numpy.random.default_rng(seed).standard_normal((d, M)).astype("f")
    A /= numpy.linalg.norm(A, axis=0)
    new, rank = prox_step(A, threshold)
    numpy.testing.assert_allclose(numpy.linalg.norm(new, axis=0), 1.0, rtol=1e-4)
    s = numpy.linalg.svd(A.astype("float64"), compute_uv=False)
    expected_rank = max(int((s > threshold).sum()), 1)
    assert rank == expected_rank
    assert effective_rank(new, tol=1e-4) <= expected_rank
    # columns point the same way as the soft-thresholded matrix's
    U, s, Vt = numpy.linalg.svd(A.astype("float64"), full_matrices=False)
    ref = (U * numpy.maximum(s - threshold, 0)) @ Vt
    norms = numpy.linalg.norm(ref, axis=0)
    ok = norms > 1e-3
    numpy.testing.assert_allclose(new[:, ok], ref[:, ok] / norms[ok], atol=2e-3)


def test_prox_step_zero_threshold_keeps_unit_A():
    A = numpy.random.default_rng(0).standard_normal((4, 7)).astype("f")
    A /= numpy.linalg.norm(A, axis=0)
    new, rank = prox_step(A, 0.0)
    numpy.testing.assert_allclose(new, A, atol=1e-5)
    assert rank == 4


def test_variant_label_matrix_by_hand():
    labels = ["NN", "NN-TL", "JJ", "JJ-TL", "FW-NN-TL", "VB"]
    A = variant_label_matrix(labels, own=0.5)
    # -TL takes the axis of the first variant carrying it (FW-NN-TL, in sorted order), FW- too
    e = numpy.eye(6, dtype="f")
    expected = {"NN": e[0], "JJ": e[2], "VB": e[5],
                "NN-TL": e[0] + e[4] + 0.5 * e[1], "JJ-TL": e[2] + e[4] + 0.5 * e[3],
                "FW-NN-TL": e[0] + 2.5 * e[4]}
    for i, label in enumerate(labels):
        assert numpy.allclose(A[:, i], expected[label] / numpy.linalg.norm(expected[label]))
    # a lone variant's marker is its own axis
    assert numpy.allclose(variant_label_matrix(["NN", "NN-TL"], own=0.0)[:, 1], [0.5 ** 0.5, 0.5 ** 0.5])
    with pytest.raises(TaggerError, match="none of the 3 labels is a variant"):
        variant_label_matrix(["NN", "JJ", "-TL"], own=0.1)
    with pytest.raises(TaggerError, match="own"):
        variant_label_matrix(labels, own=-1.0)

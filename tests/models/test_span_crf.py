"""The span-CRF scorer (models.span_crf): span order, gradients against
finite differences through a tiny model, the tag-only path, bad settings."""
import numpy as np
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc
from thinc.api import fix_random_seed
from thinc.util import has_cupy_gpu

from spacy_structpref.errors import StructPrefError
from spacy_structpref.models.span_crf import (BiLSTM, SpanCRF, SpanCRFScores, _label_layers, _span_hidden,
                                              _span_layer, _span_layer_layers, span_index, tag_logits)

from tests.helpers.lstm_reference import bilstm_reference
from tests.helpers.vectors import set_vectors

TINY = dict(embed_width=6, embed_rows=50, char_width=6, char_dim=3, char_count=4, lstm_width=8, lstm_depth=2,
            hidden_width=7, dropout=0.0)


def tiny_model(nO=4, nT=3, seed=0, **settings):
    fix_random_seed(seed)
    vocab = spacy.blank("en").vocab
    docs = [Doc(vocab, words=w.split()) for w in ("the cat sat down", "dogs bark", "a")]
    model = SpanCRF(nO=nO, nT=nT, **{**TINY, **settings})
    model.initialize(X=docs)
    return model, docs


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_span_index_lists_each_span_once_by_start_then_end(n):
    i, j = span_index(n)
    pairs = list(zip(i.tolist(), j.tolist()))
    assert pairs == sorted((a, b) for a in range(n + 1) for b in range(a + 1, n + 1))


def test_scores_have_one_row_per_span_and_per_word():
    model, docs = tiny_model()
    scores = model.predict(docs)
    assert scores.lengths.tolist() == [4, 2, 1]
    assert scores.spans.shape == (10 + 3 + 1, 3)  # n(n+1)/2 spans, labels without the empty one
    assert scores.tags.shape == (7, 3)
    assert scores.span_offsets().tolist() == [0, 10, 13, 14]
    assert scores.tag_offsets().tolist() == [0, 4, 6, 7]


def test_a_docs_scores_do_not_depend_on_its_batch():
    model, docs = tiny_model()
    together = model.predict(docs)
    for b, doc in enumerate(docs):
        alone = model.predict([doc])
        s, t = together.span_offsets(), together.tag_offsets()
        # float32: the layer norm of a 7-unit hidden layer magnifies rounding where a row is nearly constant
        np.testing.assert_allclose(alone.spans, together.spans[s[b]:s[b + 1]], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(alone.tags, together.tags[t[b]:t[b + 1]], rtol=1e-5, atol=1e-6)


def test_tag_logits_are_the_forward_passes_tag_scores():
    model, docs = tiny_model()
    full = model.predict(docs)
    np.testing.assert_allclose(np.concatenate(tag_logits(model, docs)), full.tags, rtol=1e-5, atol=1e-6)


def test_parameter_gradients_match_finite_differences():
    """f = Σ A·spans + Σ B·tags; backprop of (A, B) gives ∂f/∂θ for every
    parameter of every layer (embeddings, frame, BiLSTM, MLP, tagger)."""
    model, docs = tiny_model(seed=1)
    rng = np.random.default_rng(0)
    out, backprop = model.begin_update(docs)
    A = rng.normal(size=out.spans.shape).astype("f")
    B = rng.normal(size=out.tags.shape).astype("f")

    def f():
        y, _ = model.begin_update(docs)
        return float((A.astype(float) * y.spans).sum() + (B.astype(float) * y.tags).sum())

    backprop(SpanCRFScores(A, B, out.lengths))
    checked = set()
    eps = 1e-3  # small: a larger step moves ReLU inputs across 0; not smaller: float32 rounding
    for node in model.walk():
        for name in node.param_names:
            if not node.has_param(name) or not node.has_grad(name):
                continue
            grad = node.get_grad(name).ravel().copy()
            picks = {int(np.argmax(np.abs(grad)))} | set(rng.integers(0, grad.size, 2).tolist())
            for idx in picks:
                value = node.get_param(name).copy()
                flat = value.reshape(-1)
                base = flat[idx]
                flat[idx] = base + eps
                node.set_param(name, value.copy())
                up = f()
                flat[idx] = base - eps
                node.set_param(name, value.copy())
                down = f()
                flat[idx] = base
                node.set_param(name, value)
                numeric = (up - down) / (2 * eps)
                assert numeric == pytest.approx(float(grad[idx]), rel=3e-2, abs=3e-3), (node.name, name, idx)
            checked.add(node.name)
    assert {"span_frame", "bilstm", "relu", "linear"} <= checked
    assert any("hashembed" in name for name in checked)


def test_the_span_layer_equals_the_mlp_over_explicit_span_vectors():
    """ReLU(W r(i, j) + b) from fencepost projections equals it from the span
    vectors r(i, j) = (f→_j − f→_i ; f←_i − f←_j) built one by one, and so do
    the gradients of E, W and b (the reference's by the chain rule through
    the explicit vectors)."""
    model, _ = tiny_model(seed=2)
    relu = _label_layers(model.get_ref("labeller"))[0]
    rng = np.random.default_rng(3)
    half = 4
    E = [rng.normal(size=(n + 2, 2 * half)) for n in (1, 3, 6)]
    W, b = relu.get_param("W").astype(float), relu.get_param("b").astype(float)
    relu.set_param("W", W)
    relu.set_param("b", b)
    R, owners = [], []
    for d, e in enumerate(E):
        n = len(e) - 2
        for i, j in zip(*span_index(n)):
            R.append(np.concatenate([e[j, :half] - e[i, :half], e[i + 1, half:] - e[j + 1, half:]]))
            owners.append((d, int(i), int(j)))
    R = np.array(R)
    pre = R @ W.T + b
    Y, backprop = _span_hidden(relu, E)
    np.testing.assert_allclose(Y, np.maximum(pre, 0.0), rtol=1e-12, atol=1e-12)
    dY = rng.normal(size=Y.shape)
    relu.set_grad("W", np.zeros_like(W))
    relu.set_grad("b", np.zeros_like(b))
    dE = backprop(dY)
    d_pre = dY * (pre > 0)
    dR = d_pre @ W
    want = [np.zeros_like(e) for e in E]
    for (d, i, j), row in zip(owners, dR):
        want[d][j, :half] += row[:half]
        want[d][i, :half] -= row[:half]
        want[d][i + 1, half:] += row[half:]
        want[d][j + 1, half:] -= row[half:]
    for got, ref in zip(dE, want):
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(relu.get_grad("W"), d_pre.T @ R, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(relu.get_grad("b"), d_pre.sum(axis=0), rtol=1e-10, atol=1e-10)


def test_the_label_mlp_is_thincs_relu_with_norm_and_dropout_node_for_node():
    """The label MLP, built from its pieces, has the node structure of
    Thinc's ``Relu(normalize=True, dropout=...)`` before a Linear: weights
    saved from either load into the other."""
    from thinc.api import Linear, Relu, chain

    model, _ = tiny_model(seed=4)
    labeller = model.get_ref("labeller")
    relu = _label_layers(labeller)[0]
    thincs = chain(Relu(nO=relu.get_dim("nO"), normalize=True, dropout=0.1), Linear())
    assert [node.name for node in thincs.walk()] == [node.name for node in labeller.walk()]
    thincs.from_bytes(labeller.to_bytes())
    assert np.array_equal(thincs.layers[0].layers[0].layers[0].get_param("W"),
                          relu.get_param("W"))
    assert [layer.name for layer in _label_layers(labeller)] == ["relu", "layernorm", "dropout", "linear"]


def test_settings_and_inputs_are_checked():
    for bad in (dict(lstm_width=7), dict(lstm_depth=0), dict(dropout=1.0), dict(hidden_width=0),
                dict(char_count=1), dict(embed_rows=True), dict(margin=-0.5), dict(margin=float("inf")),
                dict(margin=True)):
        with pytest.raises(StructPrefError):
            SpanCRF(**bad)
    vocab = spacy.blank("en").vocab
    with pytest.raises(StructPrefError, match="nO"):
        SpanCRF(**TINY).initialize(X=[Doc(vocab, words=["a"])])
    with pytest.raises(StructPrefError, match="non-empty span label"):
        SpanCRF(nO=1, nT=2, **TINY).initialize(X=[Doc(vocab, words=["a"])])
    model, _ = tiny_model()
    with pytest.raises(StructPrefError, match="non-empty"):
        model.predict([Doc(vocab, words=[])])
    with pytest.raises(StructPrefError, match="non-empty"):
        model.predict([])


def test_static_vectors_are_read_when_asked_and_required_then():
    fix_random_seed(0)
    vocab = set_vectors(spacy.blank("en").vocab, {"cat": [1.0, 0.0, 0.0], "dog": [0.0, 1.0, 0.0]})
    model = SpanCRF(nO=4, nT=3, include_static_vectors=True, **TINY)
    model.initialize(X=[Doc(vocab, words=["the", "cat"])])
    before = model.predict([Doc(vocab, words=["the", "cat"])])
    vocab.vectors.data[0] = [0.0, 0.0, 5.0]  # the row of "cat"
    after = model.predict([Doc(vocab, words=["the", "cat"])])
    assert not np.allclose(before.spans, after.spans)
    with pytest.raises(StructPrefError, match="has no vectors"):
        SpanCRF(nO=4, nT=3, include_static_vectors=True, **TINY).initialize(
            X=[Doc(spacy.blank("en").vocab, words=["a"])])
    with pytest.raises(StructPrefError, match="default feature layer"):
        SpanCRF(tok2vec=model.get_ref("tok2vec"), include_static_vectors=True)


def test_bilstm_input_gradients_match_finite_differences_at_every_position():
    """Every position of sequences of different lengths, the first and last
    included, gets its gradient (float64 inputs: central differences are
    exact to rounding)."""
    fix_random_seed(2)
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(n, 3)) for n in (4, 1, 3)]
    lstm = BiLSTM(2, depth=2)
    lstm.initialize(X=[x.astype("f") for x in X])
    for name in lstm.param_names:
        lstm.set_param(name, lstm.get_param(name).astype(float))
    W = [rng.normal(size=(len(x), 4)) for x in X]
    Y, backprop = lstm.begin_update(X)
    dX = backprop(W)

    def f(inputs):
        return sum(float((w * y).sum()) for w, y in zip(W, lstm.predict(inputs)))

    eps = 1e-6
    for s, x in enumerate(X):
        for t in range(len(x)):
            for c in range(3):
                up = [v.copy() for v in X]
                down = [v.copy() for v in X]
                up[s][t, c] += eps
                down[s][t, c] -= eps
                assert (f(up) - f(down)) / (2 * eps) == pytest.approx(dX[s][t, c], rel=1e-5, abs=1e-8)


def _float64_bilstm(nI, nH, depth, lengths, seed):
    fix_random_seed(seed)
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(n, nI)) for n in lengths]
    lstm = BiLSTM(nH, depth=depth)
    lstm.initialize(X=[x.astype("f") for x in X])
    for name in lstm.param_names:
        # the forget gates' bias of 1 moved off its start, so that a wrong gate order shows
        lstm.set_param(name, lstm.get_param(name).astype(float) + rng.normal(scale=0.3, size=lstm.get_param(name).shape))
    return lstm, X, rng


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 7), min_size=1, max_size=6), depth=st.integers(1, 3),
       nH=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
def test_bilstm_equals_the_one_sequence_at_a_time_reference(lengths, depth, nH, seed):
    """Packed batches of any lengths, in any order (ties and a single
    sequence included), give each sequence the states of the reference run
    on it alone."""
    lstm, X, _ = _float64_bilstm(3, nH, depth, lengths, seed)
    params = {name: lstm.get_param(name) for name in lstm.param_names}
    for y, expected in zip(lstm.predict(X), bilstm_reference(params, X, nH, depth)):
        np.testing.assert_allclose(y, expected, rtol=1e-10, atol=1e-12)


def test_bilstm_takes_an_empty_batch_and_empty_sequences():
    lstm, X, _ = _float64_bilstm(3, 2, 2, (3, 1), seed=1)
    assert lstm.predict([]) == []
    Y, backprop = lstm.begin_update([X[0], np.zeros((0, 3)), X[1]])
    assert [y.shape for y in Y] == [(3, 4), (0, 4), (1, 4)]
    dX = backprop([np.ones_like(y) for y in Y])
    assert [d.shape for d in dX] == [(3, 3), (0, 3), (1, 3)]
    empty, back = lstm.begin_update([np.zeros((0, 3))])
    assert [y.shape for y in empty] == [(0, 4)] and [d.shape for d in back([np.zeros((0, 4))])] == [(0, 3)]


def test_bilstm_parameter_gradients_match_finite_differences_of_the_reference():
    """Every entry of every layer's Wx, Wh and b (float64): backprop through
    the packed batch against central differences of the reference."""
    lstm, X, rng = _float64_bilstm(3, 2, 2, (4, 1, 3, 4), seed=4)
    W = [rng.normal(size=(len(x), 4)) for x in X]
    _, backprop = lstm.begin_update(X)
    backprop(W)
    params = {name: lstm.get_param(name).copy() for name in lstm.param_names}

    def f(values):
        return sum(float((w * y).sum()) for w, y in zip(W, bilstm_reference(values, X, 2, 2)))

    eps = 1e-6
    for name, value in params.items():
        grad = lstm.get_grad(name)
        for idx in np.ndindex(value.shape):
            up, down = value.copy(), value.copy()
            up[idx] += eps
            down[idx] -= eps
            numeric = (f({**params, name: up}) - f({**params, name: down})) / (2 * eps)
            assert numeric == pytest.approx(grad[idx], rel=1e-5, abs=1e-8), (name, idx)


def test_bilstm_forward_half_reads_the_past_backward_half_the_future():
    fix_random_seed(3)
    lstm = BiLSTM(2, depth=1)
    x = np.random.default_rng(0).normal(size=(5, 3)).astype("f")
    lstm.initialize(X=[x])
    y = lstm.predict([x])[0]
    changed = x.copy()
    changed[2] += 1.0
    moved = np.abs(lstm.predict([changed])[0] - y) > 0
    assert not moved[:2, :2].any() and moved[2:, :2].all()
    assert not moved[3:, 2:].any() and moved[:3, 2:].all()


@pytest.mark.gpu
@pytest.mark.skipif(not has_cupy_gpu, reason="needs cupy and a GPU")
def test_on_a_gpu_scores_and_gradients_equal_the_cpus():
    """The same weights on cupy give the CPU's span and tag scores and, for
    the same output gradient, the same parameter gradients."""
    cpu, docs = tiny_model(seed=5)
    gpu, _ = tiny_model(seed=6)
    gpu.from_bytes(cpu.to_bytes())  # not Model.copy(): it drops the references the forward pass reads
    gpu.to_gpu(0)
    rng = np.random.default_rng(6)
    outputs = []
    for model in (cpu, gpu):
        out, backprop = model.begin_update(docs)
        host = out.on_host(model.ops)
        assert isinstance(host.spans, np.ndarray) and host.lengths.tolist() == [4, 2, 1]
        outputs.append(host)
    np.testing.assert_allclose(outputs[1].spans, outputs[0].spans, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outputs[1].tags, outputs[0].tags, rtol=1e-4, atol=1e-5)
    A = rng.normal(size=outputs[0].spans.shape).astype("f")
    B = rng.normal(size=outputs[0].tags.shape).astype("f")
    grads = []
    for model in (cpu, gpu):
        _, backprop = model.begin_update(docs)
        backprop(SpanCRFScores(A, B, outputs[0].lengths))
        grads.append({(node.id, name): model.ops.to_numpy(node.get_grad(name))
                      for node in model.walk() for name in node.param_names if node.has_grad(name)})
    ids = {a.id: b.id for a, b in zip(cpu.walk(), gpu.walk())}
    assert len(grads[0]) == len(grads[1]) > 10
    for (node_id, name), grad in grads[0].items():
        np.testing.assert_allclose(grads[1][ids[node_id], name], grad, rtol=1e-3, atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 7), min_size=1, max_size=4), width=st.integers(1, 9),
       rate=st.sampled_from([0.0, 0.3]), is_train=st.booleans(), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2 ** 16))
def test_the_fused_span_layer_equals_thincs_layers_in_turn(lengths, width, rate, is_train, dtype, seed):
    """``_span_layer`` (one pass per span, on numpy) against the span
    differences through ReLU (``_span_hidden``), then Thinc's LayerNorm
    and the Dropout node, each run as a layer (``_span_layer_layers``):
    outputs, the input gradients and every parameter's gradient, with the
    same dropout masks (the global seed fixed before each)."""
    model, _ = tiny_model(seed=seed % 7, hidden_width=width, dropout=rate)
    relu, norm, drop, _ = _label_layers(model.get_ref("labeller"))
    rng = np.random.default_rng(seed)
    params = {(layer, name): rng.normal(size=layer.get_param(name).shape).astype(dtype)
              for layer in (relu, norm) for name in ("W", "b", "G") if layer.has_param(name)}
    E = [rng.normal(size=(n + 2, 8)).astype(dtype) for n in lengths]
    dY = None
    results = []
    for fused in (True, False):
        for (layer, name), value in params.items():
            layer.set_param(name, value.copy())
            layer.set_grad(name, np.zeros_like(value))
        np.random.seed(seed)
        Y, backprop = (_span_layer if fused else _span_layer_layers)(relu, norm, drop, E, is_train)
        if dY is None:
            dY = rng.normal(size=Y.shape).astype(dtype)
        dE = backprop(dY.copy())
        results.append((Y, dE, {key: key[0].get_grad(key[1]).copy() for key in params}))
    tol = dict(rtol=1e-9, atol=1e-9) if dtype == "float64" else dict(rtol=2e-3, atol=2e-4)
    (Y, dE, grads), (Y_ref, dE_ref, grads_ref) = results
    assert Y.dtype == Y_ref.dtype == np.dtype(dtype)
    np.testing.assert_allclose(Y, Y_ref, **tol)
    for got, want in zip(dE, dE_ref):
        np.testing.assert_allclose(got, want, **tol)
    for key in params:
        np.testing.assert_allclose(grads[key], grads_ref[key], **tol)

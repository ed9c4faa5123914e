"""``spacy_structpref.SpanCRF.v1``: span scores and tag scores for a tree-CRF
constituency parser (Stern, Andreas & Klein 2017; Kitaev & Klein 2018;
Zhang, Zhou & Li 2020).

Tokens are embedded by a feature layer (by default hashed NORM, PREFIX,
SUFFIX and SHAPE embeddings, spaCy's ``MultiHashEmbed``, beside character
embeddings, :func:`.characters.CharacterFeatures`; any spaCy ``tok2vec`` can
take its place), framed by learned start and stop vectors and run through a
BiLSTM (:func:`BiLSTM`). With ``h→_t``/``h←_t`` the forward and backward halves of
the top layer at position t (0 the start vector, n + 1 the stop vector), the
fencepost between words k − 1 and k is ``f→_k = h→_k``, ``f←_k = h←_{k+1}``
and a span ``[i, j)`` is the vector

    r(i, j) = (f→_j − f→_i ; f←_i − f←_j)        (Stern et al. 2017, §3)

An MLP (linear, ReLU, layer norm, dropout, linear) scores every non-empty
label of every span; the empty label's score is 0 and is not output. Its
first layer is linear in the fenceposts, ``W r(i, j) = a_j − a_i`` with
``a_k = W→ f→_k − W← f←_k`` (``W = (W→ W←)``), so it costs one product per
fencepost rather than per span, O(n) instead of O(n²) (as Kitaev & Klein
2018 project fenceposts before differencing). A linear tagging head over the
words' BiLSTM states gives tag logits.

The model maps Docs to :class:`SpanCRFScores`, whose spans are listed per
Doc in :func:`span_index` order; its backprop takes a ``SpanCRFScores`` of
gradients of the same shapes. The tree CRF over these scores is the
parser's (:mod:`spacy_structpref.parsing.span_parser`).
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy
from spacy.ml.models import MultiHashEmbed
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import LayerNorm, Linear, Model, Relu, chain, concatenate
from thinc.initializers import glorot_uniform_init
from thinc.types import Floats2d, Ints1d
from thinc.util import get_array_module

from ..errors import StructPrefError
from ..trees.arrays import offsets
from .characters import CharacterFeatures
from .dropout import Dropout, active_rate, dropout_mask

LEXICAL_ATTRS = ["NORM", "PREFIX", "SUFFIX", "SHAPE"]


@dataclass
class SpanCRFScores:
    """Scores of a batch of Docs: ``spans`` (Σ n(n+1)/2, labels − 1), the
    non-empty labels' scores of each Doc's spans in :func:`span_index` order,
    Docs one after another; ``tags`` (Σ n, tags), tag logits, both in the
    model's array module (cupy on a GPU); ``lengths``, the Docs' lengths n,
    a numpy array."""

    spans: Floats2d
    tags: Floats2d
    lengths: Ints1d

    def span_offsets(self) -> numpy.ndarray:
        """Start of each Doc's rows in ``spans`` (one more entry: the total)."""
        n = numpy.asarray(self.lengths, dtype=numpy.int64)
        return offsets(n * (n + 1) // 2)

    def tag_offsets(self) -> numpy.ndarray:
        """Start of each Doc's rows in ``tags`` (one more entry: the total)."""
        return offsets(numpy.asarray(self.lengths, dtype=numpy.int64))

    def on_host(self, ops) -> "SpanCRFScores":
        """The scores as numpy arrays, where the tree CRF (compiled for the
        CPU) reads them (``ops.to_numpy`` leaves numpy arrays as they are)."""
        return SpanCRFScores(ops.to_numpy(self.spans), ops.to_numpy(self.tags), self.lengths)


def span_index(n: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Fenceposts ``(i, j)`` of the n(n+1)/2 spans ``0 <= i < j <= n`` of an
    n-word sentence, in the order the model lists them (by i, then j)."""
    return numpy.triu_indices(n + 1, 1)


@registry.architectures("spacy_structpref.SpanCRF.v1")
def SpanCRF(tok2vec: Optional[Model[List[Doc], List[Floats2d]]] = None, embed_width: int = 100,
            embed_rows: int = 5000, char_width: int = 100, char_dim: int = 32, char_count: int = 10,
            lstm_width: int = 256, lstm_depth: int = 2, hidden_width: int = 250, dropout: float = 0.2,
            nO: Optional[int] = None, nT: Optional[int] = None,
            include_static_vectors: bool = False, margin: float = 0.0) -> Model[List[Doc], SpanCRFScores]:
    """Span-CRF scorer. ``tok2vec``: the feature layer (null: hashed lexical
    embeddings of ``embed_width`` with ``embed_rows`` rows per attribute,
    beside ``CharacterFeatures`` of ``char_width`` over the first and last
    ``char_count / 2`` characters in ``char_dim`` dimensions); ``lstm_width``:
    both directions together, ``lstm_depth`` layers; ``hidden_width``: the
    label MLP's hidden layer; ``dropout``: on the features, inside the LSTM
    (on its weights) and in the MLP. ``nO``: number of span labels with the
    empty one, ``nT``: number of tags (both set from the training data when
    unset). ``margin``: the cost of a wrong span in the training loss (0:
    the CRF's ``-log p``; c > 0: the softmax-margin of
    :func:`~spacy_structpref.parsing.span_parser.crf_loss`); prediction
    does not read it."""
    for name, value, low in (("embed_width", embed_width, 1), ("embed_rows", embed_rows, 1),
                             ("char_width", char_width, 1), ("char_dim", char_dim, 1),
                             ("char_count", char_count, 2), ("lstm_width", lstm_width, 2),
                             ("lstm_depth", lstm_depth, 1), ("hidden_width", hidden_width, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise StructPrefError(f"SpanCRF {name} must be an integer of at least {low}, got {value!r}")
    if lstm_width % 2:
        raise StructPrefError(f"SpanCRF lstm_width counts both directions and must be even, got {lstm_width}")
    if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise StructPrefError(f"SpanCRF dropout must lie in [0, 1), got {dropout!r}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < float("inf"):
        raise StructPrefError(f"SpanCRF margin must be a finite number of at least 0, got {margin!r}")
    if tok2vec is not None and include_static_vectors:
        raise StructPrefError("SpanCRF include_static_vectors applies to the default feature layer: with a tok2vec "
                              "of your own, let that layer read the vectors (e.g. MultiHashEmbed's own setting)")
    if tok2vec is None:
        tok2vec = concatenate(
            MultiHashEmbed(width=embed_width, attrs=LEXICAL_ATTRS, rows=[embed_rows] * len(LEXICAL_ATTRS),
                           include_static_vectors=include_static_vectors),
            CharacterFeatures(width=char_width, rows=embed_rows, nM=char_dim, nC=char_count))
    frame = Model("span_frame", _frame_forward, init=_frame_init, params={"B": None}, dims={"nI": None})
    encoder = chain(frame, BiLSTM(lstm_width // 2, depth=lstm_depth, dropout=dropout))
    labeller = _label_mlp(hidden_width, dropout)
    tagger = Linear(nO=None)
    return Model("span_crf", _forward, init=_init, layers=[tok2vec, encoder, labeller, tagger],
                 refs={"tok2vec": tok2vec, "encoder": encoder, "labeller": labeller, "tagger": tagger},
                 dims={"nO": nO, "nT": nT},
                 attrs={"dropout": dropout, "static_vectors": include_static_vectors, "margin": float(margin)})


def _init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> Model:
    if not model.has_dim("nO") or not model.has_dim("nT"):
        raise StructPrefError("SpanCRF needs its numbers of span labels (nO) and tags (nT) before initialization")
    if model.get_dim("nO") < 2 or model.get_dim("nT") < 1:
        raise StructPrefError(f"SpanCRF needs at least one non-empty span label and one tag, got "
                              f"nO={model.get_dim('nO')} (with the empty label) and nT={model.get_dim('nT')}")
    tok2vec, encoder, labeller, tagger = (model.get_ref(x) for x in ("tok2vec", "encoder", "labeller", "tagger"))
    if X is None:
        raise StructPrefError("SpanCRF needs sample Docs to initialize")
    if model.attrs["static_vectors"] and X and not X[0].vocab.vectors.shape[0]:
        raise StructPrefError("SpanCRF include_static_vectors = true, but the pipeline has no vectors: set "
                              "[initialize] vectors to a pipeline that holds them (python -m spacy_structpref "
                              "train-vectors makes one from corpora)")
    tok2vec.initialize(X=X)
    H = tok2vec.predict(X)
    encoder.initialize(X=H)
    width = encoder.predict(H)[0].shape[1]
    labeller.layers[-1].set_dim("nO", model.get_dim("nO") - 1)
    labeller.initialize(X=model.ops.alloc2f(2, width))
    tagger.set_dim("nO", model.get_dim("nT"))
    tagger.initialize(X=model.ops.alloc2f(2, width))
    return model


def _forward(model: Model, docs: List[Doc], is_train: bool):
    ops = model.ops
    tok2vec, encoder, labeller, tagger = (model.get_ref(x) for x in ("tok2vec", "encoder", "labeller", "tagger"))
    lengths = numpy.asarray([len(doc) for doc in docs], dtype=numpy.int32)
    if not len(docs) or int(lengths.min()) < 1:
        raise StructPrefError("SpanCRF needs a non-empty batch of non-empty Docs")
    H, bp_tok2vec = tok2vec(docs, is_train)
    dropout = model.attrs["dropout"] if is_train else 0.0
    masks = [dropout_mask(ops, h.shape, dropout) if dropout else None for h in H]
    if dropout:
        H = [h * m for h, m in zip(H, masks)]
    E, bp_encoder = encoder(H, is_train)
    relu, norm, drop, out = _label_layers(labeller)
    S, bp_hidden = _span_layer(relu, norm, drop, E, is_train)
    S, bp_out = out(S, is_train)
    W = ops.xp.concatenate([e[1:-1] for e in E])
    T, bp_tagger = tagger(W, is_train)

    def backprop(d: SpanCRFScores) -> List[Floats2d]:
        dW = bp_tagger(ops.asarray2f(d.tags))
        dE = bp_hidden(bp_out(ops.asarray2f(d.spans)))
        start = 0
        for de, n in zip(dE, lengths.tolist()):
            de[1:-1] += dW[start:start + n]
            start += n
        dH = bp_encoder(dE)
        if dropout:
            dH = [dh * m for dh, m in zip(dH, masks)]
        return bp_tok2vec(dH)

    return SpanCRFScores(S, T, lengths), backprop


def _label_mlp(hidden_width: int, dropout: float) -> Model:
    """The label MLP: ReLU layer, layer norm, dropout, linear. Nested as
    Thinc's ``chain(Relu(normalize=True, dropout=...), Linear())`` nests
    them, node for node, so that saved weights load either way; built here
    from its pieces so that :func:`_label_layers` finds them by position (a
    Thinc model's copy and load keep layers, not references)."""
    relu = Relu(nO=hidden_width)
    return chain(chain(chain(relu, LayerNorm(nI=hidden_width)), Dropout(dropout)), Linear(nO=None))


def _label_layers(labeller: Model) -> List[Model]:
    """The label MLP's layers in order, as :func:`_label_mlp` nests them:
    the ReLU layer, the layer norm, the dropout (the three run as
    :func:`_span_layer`) and the linear output layer."""
    (norm_block, drop), out = labeller.layers[0].layers, labeller.layers[1]
    relu, norm = norm_block.layers
    return [relu, norm, drop, out]


def _projections(W: Floats2d, E: List[Floats2d]):
    """The fencepost projections ``a_k = W→ f→_k − W← f←_k`` of every Doc
    (rows n + 1 each, Docs one after another) in double precision, with
    the fencepost rows they are made of: ``a_j − a_i`` cancels where a
    span is short, and double precision keeps the differences as exact as
    the products of differences were. Returns ``(A, fwd, bwd)``."""
    xp = get_array_module(W)
    half = E[0].shape[1] // 2
    fwd = xp.concatenate([e[:-1, :half] for e in E])
    bwd = xp.concatenate([e[1:, half:] for e in E])
    W64 = W.astype("float64")
    A = fwd.astype("float64") @ W64[:, :half].T - bwd.astype("float64") @ W64[:, half:].T
    return A, fwd, bwd


def _projections_backprop(relu: Model, E: List[Floats2d], fwd: Floats2d, bwd: Floats2d, dA: Floats2d):
    """Add the gradient of ``relu``'s W for the gradient ``dA`` of the
    projections (:func:`_projections`) and return each Doc's input
    gradient."""
    xp = relu.ops.xp
    W = relu.get_param("W")
    half = E[0].shape[1] // 2
    relu.inc_grad("W", xp.concatenate([dA.T @ fwd, -(dA.T @ bwd)], axis=1))
    d_fwd, d_bwd = dA @ W[:, :half], dA @ W[:, half:]
    out, start = [], 0
    for e in E:
        rows = slice(start, start + e.shape[0] - 1)
        de = xp.zeros_like(e)
        de[:-1, :half] = d_fwd[rows]
        de[1:, half:] = -d_bwd[rows]
        out.append(de)
        start = rows.stop
    return out


def _span_hidden(relu: Model, E: List[Floats2d]):
    """``ReLU(W r(i, j) + b)`` for every span of each Doc (rows n + 2 of
    ``E``: start, words, stop), stacked in :func:`span_index` order, with
    ``relu``'s W and b, from the fencepost projections ``a_k`` (module
    docstring); backprop takes the gradient of the output, adds W's and b's
    and returns one per Doc (any array module)."""
    b = relu.get_param("b")
    xp = relu.ops.xp
    A, fwd, bwd = _projections(relu.get_param("W"), E)
    index = [tuple(xp.asarray(x) for x in span_index(e.shape[0] - 2)) for e in E]
    rows, start = [], 0
    for e, (i, j) in zip(E, index):
        a = A[start:start + e.shape[0] - 1]
        rows.append((a[j] - a[i]).astype(e.dtype))
        start += e.shape[0] - 1
    Y = relu.ops.relu(xp.concatenate(rows) + b)

    def backprop(dY: Floats2d) -> List[Floats2d]:
        dY = relu.ops.backprop_relu(dY, Y)
        relu.inc_grad("b", dY.sum(axis=0))
        dA, start = [], 0
        for e, (i, j) in zip(E, index):
            n = e.shape[0] - 2
            m = (n + 1) * n // 2
            dense = xp.zeros((n + 1, n + 1, dY.shape[1]), dtype=dY.dtype)
            dense[i, j] = dY[start:start + m]
            start += m
            dA.append(dense.sum(axis=0) - dense.sum(axis=1))  # a_k enters the spans ending at k with +, starting with -
        return _projections_backprop(relu, E, fwd, bwd, xp.concatenate(dA))

    return Y, backprop


def _span_layer(relu: Model, norm: Model, drop: Model, E: List[Floats2d], is_train: bool):
    """The label MLP up to its output layer, ``dropout(LayerNorm(ReLU(W
    r(i, j) + b)))``, over every span of each Doc, with the three layers'
    parameters and settings; backprop adds their gradients and returns one
    per Doc. On numpy one pass per span in each direction
    (:func:`_span_layer_fused`), on other array modules the layers in turn
    (:func:`_span_layer_layers`)."""
    run = _span_layer_fused if relu.ops.xp is numpy else _span_layer_layers
    return run(relu, norm, drop, E, is_train)


def _span_layer_layers(relu: Model, norm: Model, drop: Model, E: List[Floats2d], is_train: bool):
    """:func:`_span_layer` as :func:`_span_hidden`, then Thinc's layer norm
    and the dropout node, each its own layer (any array module)."""
    S, bp_hidden = _span_hidden(relu, E)
    S, bp_norm = norm(S, is_train)
    S, bp_drop = drop(S, is_train)
    return S, lambda dS: bp_hidden(bp_norm(bp_drop(dS)))


def _span_layer_fused(relu: Model, norm: Model, drop: Model, E: List[Floats2d], is_train: bool):
    """:func:`_span_layer` in one compiled pass per span each way
    (:mod:`._span_layer`), numpy only; the dropout mask is the node's
    (:func:`.dropout.dropout_mask`, drawn for the whole output at once)."""
    from ._span_layer import span_layer_backward, span_layer_forward  # compiled: imported on first use

    dtype = E[0].dtype
    b, G, beta = (layer.get_param(name).astype(dtype, copy=False) for layer, name in
                  ((relu, "b"), (norm, "G"), (norm, "b")))
    A, fwd, bwd = _projections(relu.get_param("W"), E)
    I, J, start = [], [], 0
    for e in E:
        i, j = span_index(e.shape[0] - 2)
        I.append(i + start)
        J.append(j + start)
        start += e.shape[0] - 1
    I, J = numpy.concatenate(I).astype(numpy.intp), numpy.concatenate(J).astype(numpy.intp)
    shape = (len(I), A.shape[1])
    rate = active_rate(drop, is_train)
    mask = dropout_mask(drop.ops, shape, rate).astype(dtype, copy=False) if rate else numpy.empty((0, 0), dtype)
    R, Y = numpy.empty(shape, dtype), numpy.empty(shape, dtype)
    mu, rstd = numpy.empty(shape[0]), numpy.empty(shape[0])
    span_layer_forward(A, I, J, b, G, beta, mask, bool(rate), R, mu, rstd, Y)

    def backprop(dY: Floats2d) -> List[Floats2d]:
        dA = numpy.zeros(A.shape)
        db, dG, dbeta = numpy.zeros(shape[1]), numpy.zeros(shape[1]), numpy.zeros(shape[1])
        span_layer_backward(numpy.ascontiguousarray(dY, dtype=dtype), mask, bool(rate), R, mu, rstd, G, I, J,
                            dA, db, dG, dbeta)
        relu.inc_grad("b", db.astype(dtype))
        norm.inc_grad("G", dG.astype(dtype))
        norm.inc_grad("b", dbeta.astype(dtype))
        return _projections_backprop(relu, E, fwd, bwd, dA.astype(dtype))

    return Y, backprop


def _frame_init(model: Model, X: Optional[List[Floats2d]] = None, Y=None) -> Model:
    if X is not None:
        model.set_dim("nI", X[0].shape[1], force=True)
    model.set_param("B", model.ops.alloc2f(2, model.get_dim("nI")))
    return model


def _frame_forward(model: Model, X: List[Floats2d], is_train: bool):
    """Each sequence framed by the learned start and stop vectors (rows n + 2)."""
    B = model.get_param("B")
    Y = [model.ops.xp.vstack([B[:1], x, B[1:]]) for x in X]

    def backprop(dY: List[Floats2d]) -> List[Floats2d]:
        dB = model.ops.alloc2f(*B.shape)
        for dy in dY:
            dB[0] += dy[0]
            dB[1] += dy[-1]
        model.inc_grad("B", dB)
        return [dy[1:-1] for dy in dY]

    return Y, backprop


def tag_logits(model: Model, docs: List[Doc]) -> List[Floats2d]:
    """The tagging head's logits (n, tags) of each Doc, without the span
    scores (linear in the length: the fallback for sentences too long for
    a chart)."""
    tok2vec, encoder, tagger = (model.get_ref(x) for x in ("tok2vec", "encoder", "tagger"))
    return [tagger.predict(e[1:-1]) for e in encoder.predict(tok2vec.predict(docs))]


def BiLSTM(nH: int, depth: int = 1, dropout: float = 0.0) -> Model[List[Floats2d], List[Floats2d]]:
    """A stacked bidirectional LSTM (Hochreiter & Schmidhuber 1997, with a
    forget gate as in Gers et al. 2000; bidirectional as in Graves &
    Schmidhuber 2005): each layer's output is ``(h→_t ; h←_t)``, ``nH`` units
    per direction, the next layer's input; ``dropout`` on the inputs of the
    layers above the first. Both directions of a layer run in one batched
    loop over time, the backward one on the sequences reversed; backprop is
    backpropagation through time.

    The batch is packed rather than padded: with the sequences sorted
    longest first, the rows of step t are those of the ``active[t]``
    sequences still running, and the rows of every step lie one after the
    other (the layout of cuDNN's packed sequences), so no product or gate
    is computed for padding; on sentences of the Penn Treebank in batches
    of 16 padding would be nearly half of the rows."""
    params = {f"{name}{layer}": None for layer in range(depth) for name in ("Wx", "Wh", "b")}
    return Model("bilstm", _bilstm_forward, init=_bilstm_init, params=params,
                 dims={"nI": None, "nO": 2 * nH, "nH": nH, "depth": depth}, attrs={"dropout": dropout})


def _bilstm_init(model: Model, X: Optional[List[Floats2d]] = None, Y=None) -> Model:
    if X is not None:
        model.set_dim("nI", X[0].shape[1], force=True)
    nH, nI = model.get_dim("nH"), model.get_dim("nI")
    for layer in range(model.get_dim("depth")):
        width = nI if layer == 0 else 2 * nH
        model.set_param(f"Wx{layer}", glorot_uniform_init(model.ops, (2, width, 4 * nH)))
        model.set_param(f"Wh{layer}", glorot_uniform_init(model.ops, (2, nH, 4 * nH)))
        b = model.ops.alloc2f(2, 4 * nH)
        b[:, nH:2 * nH] = 1.0  # forget gates start open (Jozefowicz, Zaremba & Sutskever 2015)
        model.set_param(f"b{layer}", b)
    return model


def _sigmoid(xp, x):
    return 0.5 * (xp.tanh(0.5 * x) + 1.0)


@dataclass
class _Packing:
    """Where each packed row comes from. Row r belongs to step ``t`` of one
    sequence; ``forward[r]``/``backward[r]`` is the row of the concatenated
    sequences that the forward/backward direction reads at that step, and
    ``previous[r - active[0]]`` the packed row of the same sequence's step
    ``t - 1`` (rows of step 0 have none)."""
    active: numpy.ndarray  # (T,) sequences running at each step, non-increasing
    offsets: numpy.ndarray  # (T + 1,) first packed row of each step
    forward: Ints1d
    backward: Ints1d
    previous: Ints1d

    @classmethod
    def of(cls, xp, lengths: numpy.ndarray) -> "_Packing":
        order = numpy.argsort(-lengths, kind="stable")
        active = (lengths[order][None, :] > numpy.arange(int(lengths.max()))[:, None]).sum(axis=1)
        starts = offsets(active)
        step = numpy.repeat(numpy.arange(len(active)), active)
        rank = numpy.arange(len(step)) - starts[step]  # position among the running sequences
        seq = order[rank]
        first = offsets(lengths)[:-1][seq]
        later = step > 0
        previous = starts[step[later] - 1] + rank[later]
        return cls(active, starts, xp.asarray(first + step), xp.asarray(first + lengths[seq] - 1 - step),
                   xp.asarray(previous))


def _bilstm_forward(model: Model, X: List[Floats2d], is_train: bool):
    ops, xp = model.ops, model.ops.xp
    nH, depth = model.get_dim("nH"), model.get_dim("depth")
    if not X:
        return [], lambda dY: []
    lengths = numpy.array([len(x) for x in X])
    pack = _Packing.of(xp, lengths)
    active, offsets = pack.active.tolist(), pack.offsets.tolist()
    N, T = offsets[-1], len(active)
    dtype = X[0].dtype  # float32 in the net; float64 inputs stay float64 (gradient checks)
    inp = xp.concatenate(X)
    rate = model.attrs["dropout"] if is_train else 0.0
    caches = []
    for layer in range(depth):
        mask = dropout_mask(ops, inp.shape, rate) if layer and rate else None
        if mask is not None:
            inp = inp * mask
        Wx, Wh, bias = (model.get_param(f"{name}{layer}") for name in ("Wx", "Wh", "b"))
        both = xp.stack([inp[pack.forward], inp[pack.backward]])  # (2, N, nI)
        acts = both @ Wx + bias[:, None, :]  # the gates' inputs, then their values i, f, o, g in place
        cells = xp.zeros((2, N, nH), dtype=dtype)
        tanh_cells = xp.zeros((2, N, nH), dtype=dtype)
        hidden = xp.zeros((2, N, nH), dtype=dtype)
        for t in range(T):
            rows, n = slice(offsets[t], offsets[t + 1]), active[t]
            a = acts[:, rows]
            if t:
                before = slice(offsets[t - 1], offsets[t - 1] + n)
                a += hidden[:, before] @ Wh
            a[..., :3 * nH] = _sigmoid(xp, a[..., :3 * nH])
            a[..., 3 * nH:] = xp.tanh(a[..., 3 * nH:])
            c = a[..., :nH] * a[..., 3 * nH:]
            if t:
                c += a[..., nH:2 * nH] * cells[:, before]
            cells[:, rows] = c
            tanh_cells[:, rows] = xp.tanh(c)
            hidden[:, rows] = a[..., 2 * nH:3 * nH] * tanh_cells[:, rows]
        caches.append((both, acts, cells, tanh_cells, hidden, mask))
        inp = xp.empty((N, 2 * nH), dtype=dtype)
        inp[pack.forward, :nH] = hidden[0]
        inp[pack.backward, nH:] = hidden[1]
    Y = ops.unflatten(inp, lengths)

    def backprop(dY: List[Floats2d]) -> List[Floats2d]:
        d_out = xp.concatenate(dY)
        for layer in reversed(range(depth)):
            both, acts, cells, tanh_cells, hidden, mask = caches[layer]
            Wx, Wh = model.get_param(f"Wx{layer}"), model.get_param(f"Wh{layer}")
            WhT = Wh.transpose(0, 2, 1)
            d_h = xp.stack([d_out[pack.forward, :nH], d_out[pack.backward, nH:]])  # (2, N, nH), BPTT adds to it
            d_gates = xp.empty((2, N, 4 * nH), dtype=dtype)
            dc_next = xp.zeros((2, len(X), nH), dtype=dtype)  # rows past a step's active stay 0: ended
            for t in reversed(range(T)):
                rows, n = slice(offsets[t], offsets[t + 1]), active[t]
                a = acts[:, rows]
                i, f, o, g = (a[..., k * nH:(k + 1) * nH] for k in range(4))
                tanh_c, dh = tanh_cells[:, rows], d_h[:, rows]
                dc = dc_next[:, :n] + dh * o * (1.0 - tanh_c ** 2)
                dg = d_gates[:, rows]
                dg[..., :nH] = dc * g * i * (1.0 - i)
                dg[..., 2 * nH:3 * nH] = dh * tanh_c * o * (1.0 - o)
                dg[..., 3 * nH:] = dc * i * (1.0 - g ** 2)
                if t:
                    before = slice(offsets[t - 1], offsets[t - 1] + n)
                    dg[..., nH:2 * nH] = dc * cells[:, before] * f * (1.0 - f)
                    d_h[:, before] += dg @ WhT
                else:
                    dg[..., nH:2 * nH] = 0.0  # c_{-1} = 0
                dc_next[:, :n] = dc * f
            later = d_gates[:, N - len(pack.previous):]  # the rows past step 0, as pack.previous lists them
            model.inc_grad(f"Wx{layer}", both.transpose(0, 2, 1) @ d_gates)
            model.inc_grad(f"Wh{layer}", hidden[:, pack.previous].transpose(0, 2, 1) @ later)
            model.inc_grad(f"b{layer}", d_gates.sum(axis=1))
            d_both = d_gates @ Wx.transpose(0, 2, 1)
            d_out = xp.empty((N, d_both.shape[2]), dtype=dtype)
            d_out[pack.forward] = d_both[0]
            d_out[pack.backward] += d_both[1]
            if mask is not None:
                d_out = d_out * mask
        return ops.unflatten(d_out, lengths)

    return Y, backprop

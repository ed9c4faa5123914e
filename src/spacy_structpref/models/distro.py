"""``spacy_structpref.DistroTagger.v1``: first-order sequence scoring with
distributed label vectors (DISTRO, Srikumar & Manning 2014).

Labels are unit columns ``a_y`` of ``A`` (d × M). With features ``φ_i`` from
the feature layer, a token's emission vector is ``e_i = W φ_i + b`` (or
``φ_i + b`` when the feature layer is itself the linear map over indicators,
see below) and

    emission(i, y) = a_yᵀ e_i,  transition(y, y') = a_yᵀ W_T a_y',  initial(y) = a_yᵀ w_0.

The model maps Docs to :class:`DistroScores` (emission matrix of the whole
batch, lengths, transition and initial scores); decoding and the structured
hinge loss live in :mod:`.decode`. Its backprop takes ``(dS, dT, dπ)``.

It chains three sublayers, each also a ref of the model:

* ``tok2vec``, the feature layer: Docs → ``φ_i`` per Doc;
* ``weights`` (``distro_weights``), the weights w: ``φ_i`` → ``(e_i, W_T, w_0)``;
* ``labels`` (``distro_labels``), the label matrix A: ``(e_i, W_T, w_0)`` →
  emission, transition and initial scores.

Learning alternates between w and A (Srikumar & Manning 2014): :func:`set_phase`
chooses which part accumulates gradients; a w step is ``finish_update`` on
``tok2vec`` and ``weights``, an A step is :func:`finish_label_update` on
``labels`` (an optimizer step, then the nuclear-norm proximal map).
``onehot = true`` fixes ``A = I`` (d = M): the ordinary structured SVM baseline.

If the feature layer is :func:`~.sparse_features.SparseFeatures` (or
:func:`~.sparse_features.SparseBagFeatures`) with its width
unset (``width = null`` in a config), its width is set to d and no projection
is learned: the summed embeddings are exactly ``W φ_i`` with W the table.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, Optimizer
from thinc.backends import get_array_ops
from thinc.types import Floats1d, Floats2d, Ints1d

from ..corpora.labels import variant_bases, variant_parts
from ..errors import TaggerError, check_count, check_number

# feature layers that are themselves a linear map over indicators (see above)
SPARSE_LAYERS = ("sparse_features", "sparse_bag_features")


@dataclass
class DistroScores:
    """Scores of a batch: emissions (N, M) for all tokens, per-doc lengths,
    transitions (M, M) and initial scores (M,)."""

    emissions: Floats2d
    lengths: Ints1d
    transitions: Floats2d
    initial: Floats1d


@registry.architectures("spacy_structpref.DistroTagger.v1")
def DistroTagger(tok2vec: Model[List[Doc], List[Floats2d]], rank: Optional[int] = None,
                 onehot: bool = False, nO: Optional[int] = None,
                 seed: int = 0, random_init: bool = False) -> Model[List[Doc], DistroScores]:
    """DISTRO over any feature layer. ``rank`` is d; unset (null), d is the
    number of labels, so A starts one-hot and only the nuclear norm lowers its
    rank, whatever the tag set. ``onehot = true`` gives the structured SVM
    baseline (A = I, d = number of labels, A never updated). ``seed`` draws A
    when d is below the number of labels, or always with ``random_init``
    (random unit columns, Srikumar & Manning 2014, Algorithm 1, line 1)."""
    if rank is not None:
        check_count("rank (null: one per label)", rank, 1, error=TaggerError)
    if onehot and random_init:
        raise TaggerError("onehot = true fixes A = I: it cannot also start random (random_init)")
    # a bare sparse embedder of unset width is the linear model over indicators itself
    project = not (tok2vec.name in SPARSE_LAYERS and tok2vec.has_dim("nO") is None)
    weights = Model("distro_weights", _weights_forward, init=_weights_init,
                    params=dict.fromkeys(("W", "b", "WT", "w0") if project else ("b", "WT", "w0")),
                    dims={"nO": None, "nI": None}, attrs={"project": project})
    # with onehot, A = I stays fixed: the scores are the weights' own (no product with A)
    labels = Model("distro_labels", _labels_forward, init=_labels_init, params={"A": None},
                   dims={"nO": None, "nI": None},
                   attrs={"seed": seed, "update_A": False, "identity": onehot, "random_init": random_init})
    return Model(
        "distro_tagger", _forward, init=_init, layers=[tok2vec, weights, labels],
        refs={"tok2vec": tok2vec, "weights": weights, "labels": labels},
        dims={"nO": nO, "nA": None},
        attrs={"rank": rank, "onehot": onehot, "update_w": True},
    )


def label_rank(model: Model) -> int:
    """d for a model with nO labels: ``rank``, at most the number of labels
    (label vectors of more dimensions than labels add parameters, not
    capacity: A's rank is at most M whatever d)."""
    rank, n_labels = model.attrs["rank"], model.get_dim("nO")
    if model.attrs["onehot"] or rank is None:
        return n_labels
    if rank > n_labels:
        raise TaggerError(f"rank {rank} is above the number of labels ({n_labels}): A (d × M) has rank at most "
                          f"M, so set rank to at most {n_labels}, or null for one dimension per label")
    return rank


def set_phase(model: Model, *, update_w: bool, update_A: bool) -> None:
    """Choose what the next backward passes accumulate gradients for: w (with
    the feature layer) and/or A (never for the fixed A of ``onehot``). A part
    that rests must get none: Thinc keeps gradients until that part's next
    step, which would apply them."""
    model.attrs["update_w"] = update_w
    model.get_ref("labels").attrs["update_A"] = update_A and not model.attrs["onehot"]


def _init(model: Model, X=None, Y=None) -> Model:
    if not model.has_dim("nO"):
        raise TaggerError("DistroTagger needs its number of labels (nO) before initialization")
    d = label_rank(model)
    model.set_dim("nA", d, force=True)
    tok2vec, weights, labels = (model.get_ref(name) for name in ("tok2vec", "weights", "labels"))
    if not weights.attrs["project"]:
        tok2vec.set_dim("nO", d, force=True)
    tok2vec.initialize(X=X)
    weights.set_dim("nI", tok2vec.get_dim("nO"), force=True)
    weights.set_dim("nO", d, force=True)
    weights.initialize()
    labels.set_dim("nI", d, force=True)
    labels.set_dim("nO", model.get_dim("nO"), force=True)
    labels.initialize()
    return model


def _forward(model: Model, docs: List[Doc], is_train: bool):
    ops = model.ops
    tok2vec, weights, labels = (model.get_ref(name) for name in ("tok2vec", "weights", "labels"))
    H_list, bp_tok2vec = tok2vec(docs, is_train)
    lengths = ops.asarray1i([len(h) for h in H_list])
    H = ops.flatten(H_list, pad=0) if H_list else ops.alloc2f(0, weights.get_dim("nI"))
    parts, bp_weights = weights(H, is_train)
    (S, T, P), bp_labels = labels(parts, is_train)

    def backprop(d_scores):
        d_parts = bp_labels(d_scores)
        if not model.attrs["update_w"]:
            return []
        return bp_tok2vec(ops.unflatten(bp_weights(d_parts), lengths))

    return DistroScores(S, lengths, T, P), backprop


def _weights_init(model: Model, X=None, Y=None) -> Model:
    d, F = model.get_dim("nO"), model.get_dim("nI")
    ops = model.ops
    # w = 0 at start (authors' code)
    if model.attrs["project"]:
        model.set_param("W", ops.alloc2f(d, F))
    model.set_param("b", ops.alloc1f(d))
    model.set_param("WT", ops.alloc2f(d, d))
    model.set_param("w0", ops.alloc1f(d))
    return model


def _weights_forward(model: Model, H: Floats2d, is_train: bool):
    """Features (N, F) → emission vectors e (N, d), W_T (d, d) and w_0 (d,)."""
    ops = model.ops
    project = model.attrs["project"]
    E = (ops.gemm(H, model.get_param("W"), trans2=True) if project else H) + model.get_param("b")

    def backprop(d_parts) -> Floats2d:
        dE, dWT, dw0 = d_parts
        model.inc_grad("b", dE.sum(axis=0))
        model.inc_grad("WT", dWT)
        model.inc_grad("w0", dw0)
        if not project:
            return dE
        model.inc_grad("W", ops.gemm(dE, H, trans1=True))
        return ops.gemm(dE, model.get_param("W"))

    return (E, model.get_param("WT"), model.get_param("w0")), backprop


def _labels_init(model: Model, X=None, Y=None) -> Model:
    # one-hot when d >= M, else random unit columns (authors' code); random
    # whatever d with random_init (the paper's Algorithm 1)
    if starts_random(model):
        draw_label_matrix(model, model.attrs["seed"])
    else:
        model.set_param("A", model.ops.asarray2f(numpy.eye(model.get_dim("nI"), model.get_dim("nO"), dtype="f")))
    return model


def starts_random(labels: Model) -> bool:
    """Whether the ``labels`` layer's A starts as random unit columns (d
    below the number of labels, or ``random_init``) rather than one-hot."""
    return not labels.attrs["identity"] and (labels.attrs["random_init"]
                                             or labels.get_dim("nI") < labels.get_dim("nO"))


def draw_label_matrix(labels: Model, seed: int) -> None:
    """Set the ``labels`` layer's A to random unit columns drawn with ``seed``."""
    d, M = labels.get_dim("nI"), labels.get_dim("nO")
    A = numpy.random.default_rng(seed).standard_normal((d, M)).astype("f")
    A /= numpy.linalg.norm(A, axis=0, keepdims=True)
    labels.set_param("A", labels.ops.asarray2f(A))


def variant_label_matrix(labels: Sequence[str], own: float) -> numpy.ndarray:
    """A starting label matrix (M × M, unit columns) in which each Brown
    variant tag (:func:`~..corpora.labels.variant_parts`: ``NN-TL`` of
    ``NN``, ``FW-NN`` …) starts as the sum of its parts,

        a_v ∝ e_base + Σ_m u_m + own · e_v,

    and every other label one-hot. Each marker m (``FW-``, ``-TL``, ``-HL``,
    ``-NC``) takes the axis of the first variant carrying it in sorted
    order, so that, with d = M, the markers are directions shared by all
    their variants (that first variant's own part lies along its marker). A
    prior read off the tag names, not learned: what it gives is checked
    against the one-hot start in docs/results.md."""
    labels = list(labels)
    check_number("own", own, 0.0, error=TaggerError)
    index = {label: i for i, label in enumerate(labels)}
    parts = {label: variant_parts(label) for label in variant_bases(labels)}
    if not parts:
        raise TaggerError(f"none of the {len(labels)} labels is a variant (FW-, -TL, -HL, -NC) of another: there "
                          "is nothing to start from its parts")
    marker_axis: Dict[str, int] = {}
    for label in sorted(parts):
        for marker in parts[label][1]:
            marker_axis.setdefault(marker, index[label])
    A = numpy.eye(len(labels), dtype="f")
    for label, (base, markers) in parts.items():
        column = numpy.zeros(len(labels), dtype="f")
        column[index[base]] = 1.0
        for marker in markers:
            column[marker_axis[marker]] += 1.0
        column[index[label]] += own
        A[:, index[label]] = column / numpy.linalg.norm(column)
    return A


def _labels_forward(model: Model, parts, is_train: bool):
    """``(e, W_T, w_0)`` → emission scores ``e A`` (N, M), transition scores
    ``Aᵀ W_T A`` (M, M) and initial scores ``Aᵀ w_0`` (M,)."""
    E, WT, w0 = parts
    ops = model.ops
    if model.attrs["identity"]:  # A = I: the one-hot structured SVM
        return (E, WT, w0), lambda d_scores: d_scores
    A = model.get_param("A")
    S = ops.gemm(E, A)
    WTA, T, P = _pair_scores(ops, A, WT, w0)

    def backprop(d_scores):
        dS, dT, dP = d_scores
        if model.attrs["update_A"]:
            # Exact subgradient: A appears in emissions, both sides of T and P.
            dA = ops.gemm(E, dS, trans1=True)
            dA += ops.gemm(WTA, dT, trans2=True)
            dA += ops.gemm(ops.gemm(WT, A, trans1=True), dT)
            dA += ops.xp.outer(w0, dP)
            model.inc_grad("A", dA)
        return ops.gemm(dS, A, trans2=True), ops.gemm(ops.gemm(A, dT), A, trans2=True), A @ dP

    return (S, T, P), backprop


def _pair_scores(ops, A, WT, w0):
    """``W_T A``, the transition scores ``Aᵀ W_T A`` and the initial scores ``Aᵀ w_0``."""
    WTA = ops.gemm(WT, A)
    return WTA, ops.gemm(A, WTA, trans1=True), A.T @ w0


def predict_scores(model: Model, docs: List[Doc], mask=None) -> DistroScores:
    """The model's scores of ``docs`` for decoding. With a candidate ``mask``
    (tokens × labels, bool) only the candidates' emission scores are computed
    (d per candidate instead of d·M per token; the others are -inf), which is
    all that Viterbi restricted to the candidates reads."""
    if mask is None or model.get_ref("labels").attrs["identity"]:
        return model.predict(docs)
    from .tag_dictionary import candidate_lists
    from .viterbi import candidate_emissions

    tok2vec, weights, labels = (model.get_ref(name) for name in ("tok2vec", "weights", "labels"))
    ops = model.ops
    H_list = tok2vec.predict(docs)
    lengths = ops.asarray1i([len(h) for h in H_list])
    H = ops.flatten(H_list, pad=0) if H_list else ops.alloc2f(0, weights.get_dim("nI"))
    E, WT, w0 = weights.predict(H)
    A = labels.get_param("A")
    S = candidate_emissions(ops.to_numpy(E), ops.to_numpy(A), *candidate_lists(mask))
    _, T, P = _pair_scores(ops, A, WT, w0)
    return DistroScores(ops.asarray2f(S), lengths, T, P)


def finish_label_update(labels: Model, optimizer: Optimizer, *, lr_scale: float,
                        nuclear_lambda: float, average: bool = True) -> int:
    """A step on the ``labels`` layer: proximal (sub)gradient descent on the
    hinge loss plus ``λ2 ||A||_*`` (Srikumar & Manning 2014), i.e. the
    optimizer's step with its learning rate scaled by ``lr_scale``, then
    :func:`prox_step` with threshold ``step · λ2`` (step = learn_rate ·
    lr_scale). The optimizer's running average of A, which spaCy evaluates
    and saves, gets the same map so that it too is low-rank with unit
    columns; with ``average=False`` it is A itself instead (the weights w,
    averaged over the w steps that follow, are trained against A as it
    stands, and an average of A beside an average of w is a model no step
    trained). Returns the rank after thresholding."""
    key = (labels.id, "A")
    if labels.has_grad("A"):
        A, _ = optimizer(key, labels.get_param("A"), labels.get_grad("A"), lr_scale=lr_scale)
        labels.set_param("A", A)
    threshold = float(optimizer.learn_rate) * lr_scale * nuclear_lambda
    A, rank = prox_step(labels.get_param("A"), threshold)
    labels.set_param("A", A)
    if optimizer.averages is not None and not average:
        optimizer.averages[key] = labels.ops.xp.array(A, dtype="float32", copy=True)
    elif optimizer.averages is not None and key in optimizer.averages:
        optimizer.averages[key] = prox_step(optimizer.averages[key], threshold)[0]
    return rank


def prox_step(A: Floats2d, threshold: float) -> Tuple[Floats2d, int]:
    """Nuclear-norm proximal map on A, i.e. its singular values
    soft-thresholded by ``threshold`` (Cai, Candès & Shen 2010, Theorem 2.1),
    then every column rescaled to unit length; on A's own device. Returns
    ``(new A, rank of the thresholded matrix)``."""
    ops = get_array_ops(A)
    xp = ops.xp
    U, s, Vt = xp.linalg.svd(ops.asarray2f(A), full_matrices=False)
    s = xp.maximum(s - threshold, 0.0)
    if not s.any():  # everything thresholded away: keep the strongest direction
        s[0] = 1e-6
    A = (U * s) @ Vt  # xp's matmul, not BLIS (ops.gemm): bit-identical to earlier releases
    norms = xp.linalg.norm(A, axis=0, keepdims=True)
    A /= xp.where(norms > 0, norms, 1.0)
    return A, int((s > 0).sum())


def weight_norm(model: Model) -> float:
    """``||w||²``: the squared norm of every parameter of the feature layer
    and the weights (all but A), the λ1/2 term of the paper's objective."""
    ops = model.ops
    return float(sum((ops.to_numpy(node.get_param(name)).astype("float64") ** 2).sum()
                     for ref in ("tok2vec", "weights") for node in model.get_ref(ref).walk()
                     for name in node.param_names if node.has_param(name)))


def nuclear_norm(A) -> float:
    """``||A||_*``: the sum of A's singular values."""
    return float(numpy.linalg.svd(numpy.asarray(A, dtype="float64"), compute_uv=False).sum())


def copy_model(model: Model) -> Model:
    """A deep copy of ``model`` (new ids, copied parameters) whose refs
    point into the copy, as the original's into the original (thinc's
    ``Model.copy`` leaves the refs out)."""
    copied = model.copy()
    twins = {id(node): twin for node, twin in zip(model.walk(), copied.walk())}
    for node, twin in zip(model.walk(), copied.walk()):
        for name in node.ref_names:
            ref = node.maybe_get_ref(name)
            if ref is not None and id(ref) in twins:
                twin.set_ref(name, twins[id(ref)])
    return copied


def adopt_parameters(target: Model, source: Model, optimizer: Optional[Optimizer] = None) -> None:
    """Give ``target`` the parameters of ``source``, a model of the same
    structure (a restart trained beside it), and with ``optimizer`` its
    state for them too (averages, moments, update counts), so that the
    training goes on as if ``target`` had been ``source`` all along."""
    states = [] if optimizer is None else [optimizer.averages or {}, optimizer.mom1, optimizer.mom2,
                                           optimizer.nr_update, optimizer.last_seen]
    for node, other in zip(target.walk(), source.walk()):
        for name in other.param_names:
            if not other.has_param(name):
                continue
            node.set_param(name, other.ops.xp.array(other.get_param(name), copy=True))
            for state in states:
                if (other.id, name) in state:
                    value = state[(other.id, name)]
                    state[(node.id, name)] = value.copy() if hasattr(value, "copy") else value


def effective_rank(A, tol: float = 1e-3) -> int:
    """Number of singular values above ``tol`` times the largest."""
    s = numpy.linalg.svd(numpy.asarray(A, dtype="f"), compute_uv=False)
    return int((s > tol * s[0]).sum()) if s.size and s[0] > 0 else 0

"""``spacy_structpref.DistroTagger.v1``: first-order sequence scoring with
distributed label vectors (DISTRO, Srikumar & Manning 2014; SPEC §6).

Labels are unit columns ``a_y`` of ``A`` (d × M). With features ``φ_i`` from
the feature layer, a token's emission vector is ``e_i = W φ_i + b`` (or
``φ_i + b`` when the feature layer is itself the linear map over indicators,
see below) and

    emission(i, y) = a_yᵀ e_i,  transition(y, y') = a_yᵀ W_T a_y',  initial(y) = a_yᵀ w_0.

The model maps Docs to :class:`DistroScores` (emission matrix of the whole
batch, lengths, transition and initial scores); decoding and the structured
hinge loss live in :mod:`.decode`. Its backprop takes ``(dS, dT, dπ)``.

Learning alternates (SPEC §6): the component sets ``attrs["update_w"]`` and
``attrs["update_A"]``; gradients are only accumulated for the enabled part,
so Thinc's optimizer steps on w (and the feature layer) or on A, and the
component then applies :func:`prox_step` to A. ``attrs["onehot"]`` fixes
``A = I`` (d = M): the ordinary structured SVM baseline.

If the feature layer is :func:`~.sparse_features.SparseFeatures` with its width
unset (``width = null`` in a config), its width is set to d and no projection
is learned: the summed embeddings are exactly ``W φ_i`` with W the table.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats1d, Floats2d, Ints1d


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
                 seed: int = 0) -> Model[List[Doc], DistroScores]:
    """DISTRO over any feature layer. ``rank`` is d; unset (null), d is the
    number of labels, so A starts one-hot and only the nuclear norm lowers its
    rank, whatever the tag set. ``onehot = true`` gives the structured SVM
    baseline (A = I, d = number of labels, A never updated)."""
    if rank is not None and rank < 1:
        raise ValueError(f"rank must be >= 1 or null (one per label), got {rank}")
    # a bare sparse embedder of unset width is the linear model over indicators itself
    project = not (tok2vec.name == "sparse_features" and tok2vec.has_dim("nO") is None)
    return Model(
        "distro_tagger", _forward, init=_init, layers=[tok2vec],
        params={"W": None, "b": None, "WT": None, "w0": None, "A": None},
        dims={"nO": nO, "nA": None, "nI": None},
        attrs={"rank": rank, "onehot": onehot, "project": project, "seed": seed,
               "update_w": True, "update_A": False},
    )


def label_rank(model: Model) -> int:
    """d for a model with nO labels."""
    rank = model.attrs["rank"]
    return model.get_dim("nO") if model.attrs["onehot"] or rank is None else rank


def _init(model: Model, X=None, Y=None) -> Model:
    if not model.has_dim("nO"):
        raise ValueError("DistroTagger needs its number of labels (nO) before initialization")
    M = model.get_dim("nO")
    d = label_rank(model)
    model.set_dim("nA", d, force=True)
    tok2vec = model.layers[0]
    if not model.attrs["project"]:
        tok2vec.set_dim("nO", d, force=True)
    tok2vec.initialize(X=X)
    F = tok2vec.get_dim("nO")
    model.set_dim("nI", F, force=True)
    ops = model.ops
    # w = 0 at start (authors' code); A one-hot when d >= M, else random unit columns.
    if model.attrs["project"]:
        model.set_param("W", ops.alloc2f(d, F))
    model.set_param("b", ops.alloc1f(d))
    model.set_param("WT", ops.alloc2f(d, d))
    model.set_param("w0", ops.alloc1f(d))
    if d >= M:
        A = numpy.eye(d, M, dtype="f")
    else:
        A = numpy.random.default_rng(model.attrs["seed"]).standard_normal((d, M)).astype("f")
        A /= numpy.linalg.norm(A, axis=0, keepdims=True)
    model.set_param("A", ops.asarray2f(A))
    return model


def _forward(model: Model, docs: List[Doc], is_train: bool):
    ops = model.ops
    H_list, bp_tok2vec = model.layers[0](docs, is_train)
    lengths = ops.asarray1i([len(h) for h in H_list])
    H = ops.flatten(H_list, pad=0) if H_list else ops.alloc2f(0, model.get_dim("nI"))
    A = model.get_param("A")
    WT = model.get_param("WT")
    w0 = model.get_param("w0")
    project = model.attrs["project"]
    E = (ops.gemm(H, model.get_param("W"), trans2=True) if project else H) + model.get_param("b")
    S = ops.gemm(E, A)
    WTA = ops.gemm(WT, A)
    T = ops.gemm(A, WTA, trans1=True)
    P = A.T @ w0
    scores = DistroScores(S, lengths, T, P)

    def backprop(d_scores):
        dS, dT, dP = d_scores
        update_w, update_A = model.attrs["update_w"], model.attrs["update_A"]
        if update_A and not model.attrs["onehot"]:
            # Exact subgradient: A appears in emissions, both sides of T and P.
            dA = ops.gemm(E, dS, trans1=True)
            dA += ops.gemm(WTA, dT, trans2=True)
            dA += ops.gemm(ops.gemm(WT, A, trans1=True), dT)
            dA += numpy.outer(w0, dP)
            model.inc_grad("A", dA)
        if not update_w:
            return []
        dE = ops.gemm(dS, A, trans2=True)
        model.inc_grad("b", dE.sum(axis=0))
        model.inc_grad("WT", ops.gemm(ops.gemm(A, dT), A, trans2=True))
        model.inc_grad("w0", A @ dP)
        if project:
            model.inc_grad("W", ops.gemm(dE, H, trans1=True))
            dH = ops.gemm(dE, model.get_param("W"))
        else:
            dH = dE
        return bp_tok2vec(ops.unflatten(dH, lengths))

    return scores, backprop


def prox_step(A, threshold: float):
    """Nuclear-norm proximal map on A: singular values soft-thresholded by
    ``threshold`` (``step · λ2``), then every column rescaled to unit length.
    Returns ``(new A, rank of the thresholded matrix)``."""
    A = numpy.asarray(A, dtype="f")
    U, s, Vt = numpy.linalg.svd(A, full_matrices=False)
    s = numpy.maximum(s - threshold, 0.0)
    if not s.any():  # everything thresholded away: keep the strongest direction
        s[0] = 1e-6
    A = (U * s) @ Vt
    norms = numpy.linalg.norm(A, axis=0, keepdims=True)
    A /= numpy.where(norms > 0, norms, 1.0)
    return A.astype("f"), int((s > 0).sum())


def effective_rank(A, tol: float = 1e-3) -> int:
    """Number of singular values above ``tol`` times the largest."""
    s = numpy.linalg.svd(numpy.asarray(A, dtype="f"), compute_uv=False)
    return int((s > tol * s[0]).sum()) if s.size and s[0] > 0 else 0

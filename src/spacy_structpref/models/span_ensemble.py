"""``spacy_structpref.SpanCRFEnsemble.v1``: the span and tag scores of
several trained span CRFs averaged, a product of experts over trees.

With members ``m`` of weights ``w_m``, a span's score for a label is
``s(i, j, l) = Σ_m w_m s_m(i, j, l) / Σ_m w_m`` over the members that know
the label, so a tree's score is the weighted mean of the members' scores
and ``p(T) ∝ Π_m p_m(T)^(w_m / Σ w)``: the log-linear combination of
parsers' distributions (Hinton 2002, products of experts; Petrov 2010 for
constituency parsers). Tags are the weighted mean of the members'
log-probabilities. An ensemble is assembled from members trained on their
own (for instance the whole-train parser and its jackknife folds), each with
its own span labels and tags: ``label_maps[m][c]`` is member m's column for
the ensemble's non-empty label c (−1 when it does not know it), and
``tag_maps`` the same for tags. It is not trained further: ``update`` and
``initialize`` refuse it.
"""
from typing import List, Optional, Sequence

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from ..errors import StructPrefError
from .span_crf import SpanCRFScores
from .span_crf import tag_logits as member_tag_logits

ENSEMBLE = "span_crf_ensemble"
MEMBER = "span_crf"


@registry.architectures("spacy_structpref.SpanCRFEnsemble.v1")
def SpanCRFEnsemble(*members: Model, weights: Optional[List[float]] = None) -> Model[List[Doc], SpanCRFScores]:
    """An ensemble of ``SpanCRF.v1`` models (in a config, one block per member
    under ``[...model.*.NAME]``), each scored with ``weights`` (default: all
    1; only ratios matter). Its label and tag maps are set when it is
    assembled (:func:`assemble`) and saved with it."""
    if len(members) < 2:
        raise StructPrefError(f"a span CRF ensemble needs at least two members, got {len(members)}")
    for m in members:
        if not isinstance(m, Model) or m.name != MEMBER:
            raise StructPrefError("the members of a span CRF ensemble must be spacy_structpref.SpanCRF.v1 models, "
                                  f"got {getattr(m, 'name', type(m).__name__)!r}")
    weights = [1.0] * len(members) if weights is None else list(weights)
    if len(weights) != len(members):
        raise StructPrefError(f"the ensemble has {len(members)} members but {len(weights)} weights")
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0 and numpy.isfinite(w)
               for w in weights):
        raise StructPrefError(f"ensemble weights must be positive numbers, got {weights!r}")
    return Model(ENSEMBLE, _forward, init=_init, layers=list(members), dims={"nO": None, "nT": None},
                 attrs={"weights": [float(w) for w in weights], "label_maps": None, "tag_maps": None,
                        "static_vectors": any(m.attrs["static_vectors"] for m in members)})


def assemble(members: Sequence[Model], label_maps: Sequence[Sequence[int]], tag_maps: Sequence[Sequence[int]],
             weights: Optional[Sequence[float]] = None) -> Model:
    """The ensemble of trained ``members`` with their label and tag maps
    (one row per member; the ensemble's labels and tags are those every map
    indexes, each known to at least one member)."""
    model = SpanCRFEnsemble(*members, weights=None if weights is None else list(weights))
    n_labels, n_tags = _check_maps(members, label_maps, "nO", 1), _check_maps(members, tag_maps, "nT", 0)
    model.attrs["label_maps"] = [list(map(int, row)) for row in label_maps]
    model.attrs["tag_maps"] = [list(map(int, row)) for row in tag_maps]
    model.set_dim("nO", n_labels + 1)
    model.set_dim("nT", n_tags)
    return model


def _check_maps(members: Sequence[Model], maps, dim: str, offset: int) -> int:
    what = "label" if dim == "nO" else "tag"
    if len(maps) != len(members):
        raise StructPrefError(f"{len(members)} members need {len(members)} {what} maps, got {len(maps)}")
    widths = {len(row) for row in maps}
    if len(widths) != 1:
        raise StructPrefError(f"the {what} maps must have one length, got {sorted(widths)}")
    known = numpy.zeros(widths.pop(), dtype=bool)
    for m, row in zip(members, maps):
        row = numpy.asarray(row, dtype=numpy.int64)
        columns = m.get_dim(dim) - offset
        if row.size and (row.min() < -1 or row.max() >= columns):
            raise StructPrefError(f"a {what} map points outside its member's {columns} {what}s")
        known |= row >= 0
    if not known.all():
        raise StructPrefError(f"{what} {int(numpy.argmin(known))} of the ensemble is known to no member")
    return known.size


def _init(model: Model, X=None, Y=None) -> Model:
    if model.attrs["label_maps"] is None or not is_trained(model):
        raise StructPrefError("a span CRF ensemble is assembled from trained span parsers (SpanParser.ensemble, "
                              "python -m spacy_structpref ensemble-span-parser), not initialized from data: "
                              "train its members")
    return model


def _trained(member: Model) -> bool:
    return member.get_ref("tagger").has_param("W")


def _forward(model: Model, docs: List[Doc], is_train: bool):
    if is_train:
        raise StructPrefError("a span CRF ensemble is not trained: train its members, then assemble them")
    return _combine(model, [member.predict(docs) for member in model.layers]), _no_backprop


def _combine(model: Model, outs: List[SpanCRFScores]) -> SpanCRFScores:
    spans = _mean(model, [o.spans for o in outs], model.attrs["label_maps"], log_softmax=False)
    tags = _mean(model, [o.tags for o in outs], model.attrs["tag_maps"], log_softmax=True)
    return SpanCRFScores(spans, tags, outs[0].lengths)


def _no_backprop(d):
    raise StructPrefError("a span CRF ensemble has no gradient: train its members")


def _mean(model: Model, scores: List[Floats2d], maps, log_softmax: bool) -> Floats2d:
    """The weighted mean of the members' columns mapped into the ensemble's,
    each column over the members that have it."""
    xp = model.ops.xp
    width = len(maps[0])
    total = xp.zeros((scores[0].shape[0], width), dtype="float32")
    mass = numpy.zeros(width, dtype="float32")
    for s, row, w in zip(scores, maps, model.attrs["weights"]):
        row = numpy.asarray(row, dtype=numpy.int64)
        have = numpy.flatnonzero(row >= 0)
        if log_softmax:
            s = _log_softmax(xp, s)
        total[:, model.ops.asarray(have)] += w * s[:, model.ops.asarray(row[have])]
        mass[have] += w
    return total / model.ops.asarray(mass)


def _log_softmax(xp, x):
    shift = x.max(axis=1, keepdims=True)
    return x - shift - xp.log(xp.exp(x - shift).sum(axis=1, keepdims=True))


def tag_logits(model: Model, docs: List[Doc]) -> List[Floats2d]:
    """The tag scores of each Doc without the span scores (linear in the
    length): a member's logits, or an ensemble's mean log-probabilities."""
    if model.name != ENSEMBLE:
        return member_tag_logits(model, docs)
    per_member = [member_tag_logits(m, docs) for m in model.layers]
    return [_mean(model, [logits[b] for logits in per_member], model.attrs["tag_maps"], log_softmax=True)
            for b in range(len(docs))]


def dropout_scores(model: Model, docs: List[Doc]) -> SpanCRFScores:
    """The scores of one forward pass with each member's training dropout
    on: a sample of Monte Carlo dropout (Gal & Ghahramani 2016), which
    treats the dropout masks as draws from an approximate posterior over
    the weights. An ensemble's sample is the weighted mean of one sample of
    each member. The masks come from the backend's random generator."""
    if model.name != ENSEMBLE:
        return model.begin_update(docs)[0]
    return _combine(model, [member.begin_update(docs)[0] for member in model.layers])


def is_trained(model: Model) -> bool:
    """Whether a span CRF (or every member of an ensemble) has its weights."""
    return all(_trained(m) for m in model.layers) if model.name == ENSEMBLE else _trained(model)

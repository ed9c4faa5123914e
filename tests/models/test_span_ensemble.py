"""The span-CRF ensemble (models.span_ensemble): its scores against a loop
over members and columns, members that lack labels or tags, the tag-only
path, saving, and what it refuses."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.errors import StructPrefError
from spacy_structpref.models.span_crf import SpanCRF
from spacy_structpref.models.span_ensemble import SpanCRFEnsemble, assemble, is_trained, tag_logits

from tests.models.test_span_crf import TINY, tiny_model


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    return x - np.logaddexp.reduce(x, axis=1, keepdims=True)


def reference(members, docs, label_maps, tag_maps, weights):
    """Each ensemble column, row by row, as the weighted mean over the
    members that map it."""
    outs = [m.predict(docs) for m in members]
    n_rows, n_cols = outs[0].spans.shape[0], len(label_maps[0])
    spans = np.zeros((n_rows, n_cols))
    for c in range(n_cols):
        have = [(o, row[c], w) for o, row, w in zip(outs, label_maps, weights) if row[c] >= 0]
        for r in range(n_rows):
            spans[r, c] = sum(w * o.spans[r, k] for o, k, w in have) / sum(w for _, _, w in have)
    logp = [log_softmax(o.tags) for o in outs]
    tags = np.zeros((outs[0].tags.shape[0], len(tag_maps[0])))
    for c in range(tags.shape[1]):
        have = [(lp, row[c], w) for lp, row, w in zip(logp, tag_maps, weights) if row[c] >= 0]
        tags[:, c] = sum(w * lp[:, k] for lp, k, w in have) / sum(w for _, _, w in have)
    return spans, tags


def members_of_three():
    """Three tiny span CRFs: 3, 2 and 3 non-empty labels, 3, 3 and 2 tags."""
    (a, docs), (b, _), (c, _) = tiny_model(nO=4, nT=3, seed=0), tiny_model(nO=3, nT=3, seed=1), \
        tiny_model(nO=4, nT=2, seed=2)
    return [a, b, c], docs


LABEL_MAPS = [[0, 1, 2], [1, -1, 0], [2, 0, 1]]
TAG_MAPS = [[0, 1, 2], [2, 0, 1], [-1, 1, 0]]


@settings(max_examples=15, deadline=None)
@given(weights=st.lists(st.floats(0.1, 5.0), min_size=3, max_size=3))
def test_scores_are_the_weighted_mean_over_the_members_that_know_each_column(weights):
    members, docs = members_of_three()
    model = assemble(members, LABEL_MAPS, TAG_MAPS, weights)
    out = model.predict(docs)
    spans, tags = reference(members, docs, LABEL_MAPS, TAG_MAPS, weights)
    np.testing.assert_allclose(out.spans, spans, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.tags, tags, rtol=1e-5, atol=1e-5)
    assert out.lengths.tolist() == [4, 2, 1]
    assert model.get_dim("nO") == 4 and model.get_dim("nT") == 3


def test_an_ensemble_of_one_model_twice_scores_as_that_model():
    (a, docs) = tiny_model()
    model = assemble([a, a], [[0, 1, 2]] * 2, [[0, 1, 2]] * 2, [1.0, 3.0])
    out, alone = model.predict(docs), a.predict(docs)
    np.testing.assert_allclose(out.spans, alone.spans, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out.tags, log_softmax(alone.tags), rtol=1e-5, atol=1e-5)


def test_tag_logits_are_the_forward_passes_tag_scores():
    members, docs = members_of_three()
    model = assemble(members, LABEL_MAPS, TAG_MAPS)
    np.testing.assert_allclose(np.concatenate(tag_logits(model, docs)), model.predict(docs).tags, rtol=1e-5,
                               atol=1e-5)


def test_a_saved_ensemble_loads_into_one_built_from_its_config():
    members, docs = members_of_three()
    model = assemble(members, LABEL_MAPS, TAG_MAPS, [2.0, 1.0, 1.0])
    fresh = SpanCRFEnsemble(*[SpanCRF(**TINY) for _ in range(3)], weights=[2.0, 1.0, 1.0])
    assert not is_trained(fresh)
    fresh.from_bytes(model.to_bytes())
    assert is_trained(fresh) and fresh.attrs["label_maps"] == LABEL_MAPS
    np.testing.assert_allclose(fresh.predict(docs).spans, model.predict(docs).spans, rtol=1e-6)


def test_bad_ensembles_are_refused():
    members, docs = members_of_three()
    with pytest.raises(StructPrefError, match="at least two"):
        SpanCRFEnsemble(members[0])
    with pytest.raises(StructPrefError, match="SpanCRF.v1"):
        SpanCRFEnsemble(members[0], SpanCRFEnsemble(*members))
    with pytest.raises(StructPrefError, match="3 members but 2 weights"):
        SpanCRFEnsemble(*members, weights=[1.0, 1.0])
    for weights in ([1.0, 0.0, 1.0], [1.0, float("nan"), 1.0], [1, True, 1]):
        with pytest.raises(StructPrefError, match="positive"):
            SpanCRFEnsemble(*members, weights=weights)
    with pytest.raises(StructPrefError, match="known to no member"):
        assemble(members, [[0, -1, 1], [1, -1, 0], [2, -1, 1]], TAG_MAPS)
    with pytest.raises(StructPrefError, match="outside"):
        assemble(members, [[0, 1, 2], [1, 2, 0], [2, 0, 1]], TAG_MAPS)
    with pytest.raises(StructPrefError, match="one length"):
        assemble(members, [[0, 1, 2], [1, 0], [2, 0, 1]], TAG_MAPS)
    with pytest.raises(StructPrefError, match="3 tag maps"):
        assemble(members, LABEL_MAPS, TAG_MAPS[:2])
    model = assemble(members, LABEL_MAPS, TAG_MAPS)
    with pytest.raises(StructPrefError, match="not trained"):
        model.begin_update(docs)
    with pytest.raises(StructPrefError, match="assembled from trained"):
        SpanCRFEnsemble(*[SpanCRF(**TINY) for _ in range(2)]).initialize(X=docs)

"""The hashed sparse features of the DISTRO tagger: the feature templates
of a token, and the summed embedding rows with their gradient."""
import numpy
import pytest
import spacy

from spacy_structpref.models.sparse_features import TEMPLATES, SparseFeatures, doc_keys


def test_feature_templates():
    nlp = spacy.blank("en")
    a, b = nlp("Running fast"), nlp("running fast")
    ka, kb = doc_keys(a), doc_keys(b)
    assert ka.shape == (2, len(TEMPLATES))
    col = {t: i for i, t in enumerate(TEMPLATES)}
    # lower-cased templates agree, capitalisation and shape differ
    for t in ("lower", "pre1", "pre2", "pre3", "suf1", "suf2", "suf3", "next"):
        assert ka[0, col[t]] == kb[0, col[t]]
    assert ka[0, col["cap"]] != kb[0, col["cap"]] and ka[0, col["shape"]] != kb[0, col["shape"]]
    assert ka[1, col["prev"]] == kb[1, col["prev"]]
    # "fast"'s previous word is "running"; "Running" has the sentence-start marker
    assert ka[1, col["prev"]] != ka[0, col["prev"]]
    assert len(set(ka[0].tolist())) == len(TEMPLATES)


def test_sparse_features_sum_rows():
    nlp = spacy.blank("en")
    docs = [nlp("a b"), nlp("b")]
    model = SparseFeatures(width=3, n_rows=50, n_hashes=2)
    model.initialize()
    E = numpy.random.default_rng(0).standard_normal((50, 3)).astype("f")
    model.set_param("E", E)
    out, backprop = model.begin_update(docs)
    from spacy_structpref.models.sparse_features import _rows

    rows = _rows(model, docs)
    assert rows.shape == (3, 2 * len(TEMPLATES))
    numpy.testing.assert_allclose(numpy.concatenate(out), E[rows].sum(axis=1), rtol=1e-5)
    backprop([numpy.ones((2, 3), "f"), numpy.ones((1, 3), "f")])
    counts = numpy.bincount(rows.ravel(), minlength=50)
    numpy.testing.assert_allclose(model.get_grad("E")[:, 0], counts)
    grad = model.get_grad("E")
    # a second minibatch adds to the kept gradient in place; after the optimizer zeroes it, only the new one
    model.begin_update(docs)[1]([numpy.ones((2, 3), "f"), numpy.ones((1, 3), "f")])
    assert model.get_grad("E") is grad
    numpy.testing.assert_allclose(grad[:, 0], 2 * counts)
    grad *= 0
    model.begin_update(docs[1:])[1]([numpy.full((1, 3), 2, "f")])
    numpy.testing.assert_allclose(grad[:, 0], 2 * numpy.bincount(_rows(model, docs[1:]).ravel(), minlength=50))
    with pytest.raises(ValueError, match="n_hashes"):
        SparseFeatures(n_hashes=5)

"""TensorFeatures: each Doc's doc.tensor as its feature rows."""
import numpy
import pytest
import spacy
from spacy.tokens import Doc

from spacy_structpref.errors import TaggerError
from spacy_structpref.models.tensor_features import TensorFeatures


def _doc(vocab, rows):
    doc = Doc(vocab, words=["x"] * len(rows))
    doc.tensor = numpy.asarray(rows, dtype="float32")
    return doc


def test_reads_doc_tensors_and_infers_width():
    vocab = spacy.blank("en").vocab
    docs = [_doc(vocab, [[1, 2, 3], [4, 5, 6]]), _doc(vocab, [[7, 8, 9]])]
    model = TensorFeatures()
    model.initialize(X=docs)
    assert model.get_dim("nO") == 3
    out, backprop = model.begin_update(docs)
    numpy.testing.assert_array_equal(out[0], docs[0].tensor)
    numpy.testing.assert_array_equal(out[1], docs[1].tensor)
    assert backprop([numpy.ones((2, 3), "f"), numpy.ones((1, 3), "f")]) == []


def test_bad_tensors_are_named():
    vocab = spacy.blank("en").vocab
    with pytest.raises(TaggerError, match="width must be"):
        TensorFeatures(width=0)
    with pytest.raises(TaggerError, match="one width"):
        TensorFeatures().initialize(X=[_doc(vocab, [[1, 2]]), _doc(vocab, [[1, 2, 3]])])
    with pytest.raises(TaggerError, match="one width"):
        TensorFeatures().initialize(X=[Doc(vocab, words=["no", "tensor"])])
    model = TensorFeatures(width=2)
    model.initialize()
    bad = Doc(vocab, words=["a", "b"])
    bad.tensor = numpy.zeros((1, 2), dtype="float32")
    with pytest.raises(TaggerError, match=r"2 tokens and a tensor of shape \(1, 2\)"):
        model.predict([_doc(vocab, [[1, 2]]), bad])

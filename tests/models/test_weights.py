"""A model's weights: the finiteness check and the digest (spacy_structpref.models.weights)."""
import numpy as np
import pytest
from thinc.api import Linear, chain

from spacy_structpref.errors import SavedModelError
from spacy_structpref.models.weights import arrays_digest, check_finite_weights, model_weights, weights_digest


def net(seed=0, nO=3):
    model = chain(Linear(nO=4, nI=5), Linear(nO=nO))
    model.initialize(X=np.zeros((2, 5), dtype="f"))
    rng = np.random.default_rng(seed)
    for node in model.walk():
        for name in node.param_names:
            node.set_param(name, rng.standard_normal(node.get_param(name).shape).astype("f"))
    return model


def test_the_digest_follows_the_weights():
    a, b = net(0), net(0)
    assert weights_digest(a) == weights_digest(b)
    assert weights_digest(a) != weights_digest(net(1))
    W = b.layers[1].get_param("W")
    W[0, 0] = np.nextafter(W[0, 0], np.float32(np.inf))  # one weight by one unit in the last place, in place
    assert weights_digest(a) != weights_digest(b)
    W[0, 0] = a.layers[1].get_param("W")[0, 0]
    assert weights_digest(a) == weights_digest(b)


def test_the_digest_tells_shapes_apart():
    flat = net(0)
    other = net(0)
    W = other.layers[1].get_param("W")
    other.layers[1].set_param("W", W.reshape(W.shape[1], W.shape[0]))  # the same values, another shape
    assert weights_digest(flat) != weights_digest(other)


def test_non_finite_weights_are_refused():
    model = net(0)
    check_finite_weights("the net", model_weights(model))
    model.layers[0].get_param("b")[1] = np.nan
    with pytest.raises(SavedModelError):
        check_finite_weights("the net", model_weights(model))


def test_an_arrays_digest_reads_names_shapes_and_bytes_in_order():
    a, b = np.arange(6, dtype="f"), np.ones(3, dtype="f")
    assert arrays_digest([("a", a), ("b", b)]) == arrays_digest([("a", a.copy()), ("b", b.copy())])
    assert arrays_digest([("a", a), ("b", b)]) != arrays_digest([("b", b), ("a", a)])
    assert arrays_digest([("a", a)]) != arrays_digest([("x", a)])
    assert arrays_digest([("a", a)]) != arrays_digest([("a", a.reshape(2, 3))])
    assert arrays_digest([("a", a)]) != arrays_digest([("a", a.astype("f8"))])

import numpy
import pytest
from hypothesis import given, settings, strategies as st
from thinc.api import Dropout as ThincDropout, NumpyOps, fix_random_seed

from spacy_structpref.errors import StructPrefError
from spacy_structpref.models.dropout import Dropout, dropout_mask

OPS = NumpyOps()


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.0, 0.95), rows=st.integers(1, 30), cols=st.integers(1, 30))
def test_a_mask_holds_thincs_two_values_in_float32(rate, rows, cols):
    mask = dropout_mask(OPS, (rows, cols), rate)
    assert mask.shape == (rows, cols) and mask.dtype == numpy.float32
    values = {numpy.float32(0.0), numpy.float32(1.0 / (1.0 - rate))}
    assert set(numpy.unique(mask)) <= values
    assert set(numpy.unique(OPS.get_dropout_mask((rows, cols), rate))) <= values  # Thinc's take the same


def test_a_mask_drops_the_rate_of_cells_and_keeps_the_expectation():
    fix_random_seed(0)
    mask = dropout_mask(OPS, (400, 500), 0.3)
    assert abs((mask == 0).mean() - 0.3) < 0.005  # 200,000 cells: ten standard deviations
    assert abs(mask.mean() - 1.0) < 0.01


def test_masks_follow_numpys_global_seed():
    fix_random_seed(3)
    first = [dropout_mask(OPS, (20, 30), 0.5) for _ in range(2)]
    fix_random_seed(3)
    again = [dropout_mask(OPS, (20, 30), 0.5) for _ in range(2)]
    assert all(numpy.array_equal(a, b) for a, b in zip(first, again))
    assert not numpy.array_equal(first[0], first[1])  # each draw advances the global generator
    fix_random_seed(4)
    assert not numpy.array_equal(dropout_mask(OPS, (20, 30), 0.5), first[0])


def test_rate_zero_is_all_ones_and_a_rate_outside_0_1_is_refused():
    assert numpy.array_equal(dropout_mask(OPS, (3, 4), 0.0), numpy.ones((3, 4), dtype=numpy.float32))
    for bad in (-0.1, 1.0, 2.0):
        with pytest.raises(StructPrefError, match="dropout rate"):
            dropout_mask(OPS, (3, 4), bad)


def test_the_layer_masks_in_training_backprops_through_its_mask_and_is_the_identity_otherwise():
    layer = Dropout(0.4)
    X = numpy.arange(1, 601, dtype=numpy.float32).reshape(20, 30)
    Y, backprop = layer(X, is_train=True)
    mask = numpy.where(Y != 0, numpy.float32(1 / 0.6), numpy.float32(0))
    assert abs((mask == 0).mean() - 0.4) < 0.1  # 600 cells: five standard deviations
    numpy.testing.assert_array_equal(Y, X * mask)
    dY = numpy.full_like(X, 2.0)
    numpy.testing.assert_array_equal(backprop(dY), dY * mask)
    Y, backprop = layer(X, is_train=False)
    assert Y is X and backprop(dY) is dY
    layer.attrs["is_enabled"] = False
    assert layer(X, is_train=True)[0] is X


def test_the_layer_is_thincs_node_so_saved_weights_load_either_way():
    ours, thincs = Dropout(0.25), ThincDropout(0.25)
    assert ours.name == thincs.name and ours.attrs == thincs.attrs
    thincs.attrs["dropout_rate"] = 0.125
    assert ours.from_bytes(thincs.to_bytes()).attrs["dropout_rate"] == 0.125
    assert ThincDropout(0.5).from_bytes(ours.to_bytes()).attrs["dropout_rate"] == 0.125

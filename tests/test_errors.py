"""The checks of plain arguments (``errors.check_count``, ``check_number``)
against a reference predicate written out case by case: any value, of any
type, is accepted exactly when it is what the check states, and refused
with a StructPrefError (never a TypeError) otherwise."""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structpref.errors import StructPrefError, TaggerError, check_count, check_number

ANY = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True),
                st.text(max_size=3), st.lists(st.integers(), max_size=2), st.just(np.int64(3)),
                st.just(np.float32(0.5)), st.just(Fraction(1, 2)), st.just(np.array([1, 2])))


def is_count(value, low, high):
    return (type(value) is int or isinstance(value, np.integer)) and low <= value <= high


def is_number(value, low, high, above):
    if type(value) is bool or not isinstance(value, (int, float, np.integer, np.floating, Fraction)):
        return False
    if not math.isfinite(value):
        return False
    return (value > low if above else value >= low) and value <= high


@settings(max_examples=400, deadline=None)
@given(ANY, st.integers(-2, 2), st.one_of(st.just(math.inf), st.integers(2, 6)))
def test_check_count_accepts_exactly_the_integers_in_range(value, low, high):
    if is_count(value, low, high):
        assert check_count("x", value, low, high) == value and type(check_count("x", value, low, high)) is int
    else:
        with pytest.raises(StructPrefError, match="x must be an integer"):
            check_count("x", value, low, high)


@settings(max_examples=400, deadline=None)
@given(ANY, st.sampled_from([-math.inf, 0.0, 1.0]), st.sampled_from([math.inf, 1.0, 5.0]), st.booleans())
def test_check_number_accepts_exactly_the_finite_reals_in_range(value, low, high, above):
    if is_number(value, low, high, above):
        assert check_number("y", value, low, high, above=above) == float(value)
    else:
        with pytest.raises(StructPrefError, match="y must be a finite number"):
            check_number("y", value, low, high, above=above)


def test_the_error_class_can_be_narrowed():
    with pytest.raises(TaggerError):
        check_count("rank", 0, 1, error=TaggerError)
    with pytest.raises(TaggerError):
        check_number("cost", 0.0, 0.0, above=True, error=TaggerError)

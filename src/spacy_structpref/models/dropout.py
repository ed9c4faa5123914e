"""Dropout (Srivastava et al. 2014) with masks drawn in single precision.

Thinc's ``Ops.get_dropout_mask`` draws a double-precision uniform per cell
from numpy's legacy generator, compares, divides and casts: on the span
CRF's label MLP (one row per span of a batch, about 1.4 million cells for
16 PTB sentences) that is about 8 % of a training step. Here a mask is
``(u >= rate) / (1 - rate)`` for single-precision uniforms of a PCG64
generator, which is seeded from numpy's global generator at each draw, so
``thinc.api.fix_random_seed`` (and any code that seeds ``numpy.random``)
still fixes every mask. The mask's values are Thinc's (0 and
``float32(1 / (1 - rate))``); only the draws differ. Non-numpy backends
(cupy) keep Thinc's own masks."""
from typing import Callable, Tuple

import numpy
from thinc.api import Model
from thinc.types import ArrayXd

from ..errors import StructPrefError


def dropout_mask(ops, shape: Tuple[int, ...], rate: float) -> ArrayXd:
    """A float32 mask of ``shape``: each cell 0 with probability ``rate``,
    else ``1 / (1 - rate)`` (so the masked input keeps its expectation)."""
    if not 0 <= rate < 1:
        raise StructPrefError(f"dropout rate must lie in [0, 1), got {rate!r}")
    if ops.xp is not numpy:
        return ops.get_dropout_mask(shape, rate)
    if rate == 0:
        return numpy.ones(shape, dtype=numpy.float32)
    generator = numpy.random.default_rng(numpy.random.randint(2 ** 31))
    mask = generator.random(shape, dtype=numpy.float32) >= numpy.float32(rate)
    out = mask.astype(numpy.float32)
    out *= numpy.float32(1.0 / (1.0 - rate))
    return out


def Dropout(rate: float = 0.0) -> Model:
    """Thinc's ``Dropout`` node for arrays (same name and attributes, so
    saved weights load either way), its masks from :func:`dropout_mask`."""
    return Model("dropout", _forward, attrs={"dropout_rate": rate, "is_enabled": True})


def active_rate(model: Model, is_train: bool) -> float:
    """The rate a :func:`Dropout` node applies in this pass: its
    ``dropout_rate`` while training and enabled, else 0."""
    return model.attrs["dropout_rate"] if is_train and model.attrs["is_enabled"] else 0.0


def _forward(model: Model, X: ArrayXd, is_train: bool) -> Tuple[ArrayXd, Callable]:
    rate = active_rate(model, is_train)
    if rate == 0:
        return X, lambda dY: dY
    mask = dropout_mask(model.ops, X.shape, rate)
    return X * mask, lambda dY: dY * mask

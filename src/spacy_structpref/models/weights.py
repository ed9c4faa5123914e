"""A Thinc model's weights: checked as a save brings them, and digested.

A save whose files match their checksums can still hold NaN or infinite
weights (written by a diverged training, or crafted); loading them would
make every score NaN, and decoding would then pick labels silently: every
parameter must be finite. The digest keys a memo of the model's outputs."""
import zlib
from typing import Iterable, Iterator, Tuple

import numpy as np
from thinc.api import Model

from ..errors import SavedModelError

Weights = Iterable[Tuple[str, str, object]]  # (layer, parameter name, array)


def model_weights(model: Model) -> Iterator[Tuple[str, str, object]]:
    """``(layer name, parameter name, array)`` of every set parameter of ``model``."""
    for node in model.walk():
        for name in node.param_names:
            if node.has_param(name):
                yield node.name, name, node.ops.to_numpy(node.get_param(name))


def weights_digest(model: Model) -> Tuple[int, int]:
    """:func:`arrays_digest` of every parameter, named by its layer, in the
    model's walk order: changes when a weight does (an optimizer's step, a
    load, averaged weights swapped in), in tens of milliseconds for the
    span CRF's 18 MB of weights."""
    return arrays_digest((f"{layer}/{name}", value) for layer, name, value in model_weights(model))


def arrays_digest(named: Iterable[Tuple[str, object]]) -> Tuple[int, int]:
    """CRC-32 and Adler-32 of each ``(name, array)``'s name, shape, dtype
    and bytes, in order (host arrays)."""
    crc, adler = 0, 1
    for name, value in named:
        data = memoryview(np.ascontiguousarray(value)).cast("B")
        head = f"{name}{value.shape}{value.dtype}".encode()
        crc, adler = zlib.crc32(data, zlib.crc32(head, crc)), zlib.adler32(data, zlib.adler32(head, adler))
    return crc, adler


def message_weights(msg: dict) -> Iterator[Tuple[str, str, object]]:
    """The same from Thinc's serialised message (``srsly.msgpack_loads`` of
    ``Model.to_bytes``), before anything is loaded: layers by their names."""
    try:
        nodes, params = msg["nodes"], msg["params"]
    except (KeyError, TypeError):
        raise SavedModelError("the saved model is not a Thinc model's message") from None
    for node, values in zip(nodes, params):
        for name, value in (values or {}).items():
            if value is not None:
                yield node.get("name", "?"), name, value


def check_finite_weights(owner: str, weights: Weights) -> None:
    """Refuse (:class:`SavedModelError`) a parameter with a NaN or infinite value."""
    for layer, name, value in weights:
        array = np.asarray(value)
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            bad = int(np.size(array) - np.isfinite(array).sum())
            raise SavedModelError(f"{owner}: the saved weights {layer}.{name} hold {bad} NaN or infinite "
                                  f"value(s) of {np.size(array)}: the save comes from a diverged training or "
                                  "is damaged; train again, or load an earlier save")

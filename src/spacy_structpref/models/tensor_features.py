"""``spacy_structpref.TensorFeatures.v1``: dense features computed outside
the pipeline, read from each Doc's ``doc.tensor`` (one row per token).

A feature layer for the DISTRO model when the inputs are real-valued
vectors rather than the indicators of :mod:`.sparse_features`: a generated
benchmark, or vectors a user computed beforehand. The DISTRO model then
learns the projection W over them (emission vector ``W φ_i + b``).
"""
from typing import List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from ..errors import TaggerError


@registry.architectures("spacy_structpref.TensorFeatures.v1")
def TensorFeatures(width: Optional[int] = None) -> Model[List[Doc], List[Floats2d]]:
    """Each Doc's ``doc.tensor`` (tokens × ``width``) as its feature rows.
    ``width`` unset (null) is read off the first Doc seen at initialization."""
    if width is not None and width < 1:
        raise TaggerError(f"width must be >= 1 or null, got {width}")
    return Model("tensor_features", _forward, init=_init, dims={"nO": width})


def _init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> Model:
    if not model.has_dim("nO"):
        widths = {doc.tensor.shape[1] for doc in X or () if doc.tensor.ndim == 2 and doc.tensor.size}
        if len(widths) != 1:
            raise TaggerError("TensorFeatures needs its width: set width, or initialize with Docs whose "
                              f"doc.tensor has one width (got widths {sorted(widths)})")
        model.set_dim("nO", widths.pop())
    return model


def _forward(model: Model, docs: List[Doc], is_train: bool):
    width = model.get_dim("nO")
    for doc in docs:
        if doc.tensor.shape != (len(doc), width):
            raise TaggerError(f"TensorFeatures reads doc.tensor of shape (tokens, {width}); the Doc "
                              f"{doc.text[:40]!r} has {len(doc)} tokens and a tensor of shape {doc.tensor.shape}")
    outputs = [model.ops.asarray2f(doc.tensor) for doc in docs]

    def backprop(d_outputs: List[Floats2d]) -> List[Doc]:
        return []

    return outputs, backprop

"""Character features of words: a fixed number of UTF-8 bytes per word, the
first and last ``nC / 2``, each embedded by its position's own table and
concatenated (Kitaev & Klein 2018 use characters to the same end), beside a
hashed embedding of the lower-case form, through a Maxout layer.

This is spaCy's ``CharacterEmbed`` architecture node for node (a pipeline
saved with spaCy's loads here and gives the same vectors) with one change:
the gradient of the byte table. spaCy adds it with a fancy-index update,
``dE[c, ids] += d``, which keeps one of the terms where two words of a Doc
have the same byte at the same position (numpy's buffered update keeps the
last, cupy's an arbitrary one), so a frequent ending such as "-s" or "-ed"
gets a fraction of its gradient, and a GPU a different fraction than a CPU.
Here every occurrence is added (``Ops.scatter_add``).
"""
from typing import List

from spacy.attrs import intify_attr
from spacy.ml.featureextractor import FeatureExtractor
from spacy.tokens import Doc
from thinc.api import HashEmbed, Maxout, Model, chain, concatenate, list2ragged, ragged2list, with_array
from thinc.types import Floats2d

from ..errors import StructPrefError

BYTE_VALUES = 256


def CharacterEmbed(nM: int, nC: int) -> Model[List[Doc], List[Floats2d]]:
    """Each word's first and last ``nC / 2`` UTF-8 bytes (padded in the
    middle; spaCy's ``Doc.to_utf8_array``), byte c embedded by the c-th table
    of ``nM`` dimensions, concatenated: ``(n, nC · nM)`` per Doc."""
    return Model("charembed", _embed_forward, init=_embed_init, params={"E": None},
                 dims={"nM": nM, "nC": nC, "nO": nM * nC, "nV": BYTE_VALUES})


def _embed_init(model: Model, X=None, Y=None) -> Model:
    model.set_param("E", model.ops.alloc3f(model.get_dim("nC"), model.get_dim("nV"), model.get_dim("nM")))
    return model


def _embed_forward(model: Model, docs: List[Doc], is_train: bool):
    ops, E = model.ops, model.get_param("E")
    nC, nV, nM = E.shape
    # row of byte b at position c in the tables laid end to end
    offsets = ops.xp.arange(nC, dtype="int32") * nV
    rows = [ops.asarray(doc.to_utf8_array(nr_char=nC), dtype="int32") + offsets for doc in docs]
    table = E.reshape(nC * nV, nM)
    Y = [table[r].reshape(r.shape[0], nC * nM) for r in rows]

    def backprop(dY: List[Floats2d]) -> list:
        dE = ops.alloc2f(nC * nV, nM)
        for r, dy in zip(rows, dY):
            # r is a fresh contiguous array; dy may be a view of a larger one
            ops.scatter_add(dE, r.reshape(-1), ops.xp.ascontiguousarray(dy.reshape(-1, nM), dtype="float32"))
        model.inc_grad("E", dE.reshape(nC, nV, nM))
        return []

    return Y, backprop


def CharacterFeatures(width: int, rows: int, nM: int, nC: int,
                      feature: str = "LOWER") -> Model[List[Doc], List[Floats2d]]:
    """Byte embeddings (:func:`CharacterEmbed`) beside a hashed embedding of
    ``feature`` (``rows`` rows, ``width`` wide), through a Maxout layer of
    ``width`` (3 pieces, layer norm): spaCy's ``CharacterEmbed`` architecture
    without static vectors."""
    attr = intify_attr(feature)
    if attr is None:
        raise StructPrefError(f"unknown token attribute {feature!r} for the character features")
    chars = chain(CharacterEmbed(nM=nM, nC=nC), list2ragged())
    word = chain(FeatureExtractor([attr]), list2ragged(), with_array(HashEmbed(nO=width, nV=rows, column=0, seed=5)))
    return chain(concatenate(chars, word), with_array(Maxout(width, nM * nC + width, nP=3, normalize=True,
                                                             dropout=0.0)), ragged2list())

"""``spacy_structpref.SparseFeatures.v1``: the DISTRO paper's indicator
features as summed hash embeddings.

Each token fires one indicator per template — lower-cased word, prefixes and
suffixes of length 1–3, capitalisation class, word shape, previous and next
lower-cased word — and its vector is the sum of the embedding rows of its
indicators. With a zero-initialised table this is exactly a linear model over
the indicators (``W φ_i``), the paper's setting; every key is hashed to
``n_hashes`` rows so that a collision rarely hurts a whole feature.
"""
from typing import Dict, List, Optional

import numpy
from spacy.strings import hash_string
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from ..errors import TaggerError

TEMPLATES = ("lower", "pre1", "pre2", "pre3", "suf1", "suf2", "suf3", "cap", "shape",
             "prev", "next")
_MAX_CACHE = 500_000
_word_keys: Dict[str, numpy.ndarray] = {}
_BOS = hash_string("prev=<s>")
_EOS = hash_string("next=</s>")


def _cap_class(word: str) -> str:
    if word.isupper():
        return "upper"
    if word[:1].isupper():
        return "title"
    if any(c.isupper() for c in word):
        return "mixed"
    if any(c.isdigit() for c in word):
        return "digit"
    return "lower"


def word_keys(word: str, shape: str) -> numpy.ndarray:
    """64-bit keys (stable across processes) of the word-internal templates,
    then of the word seen as the previous and as the next word."""
    keys = _word_keys.get(word)
    if keys is None:
        low = word.lower()
        values = (low, low[:1], low[:2], low[:3], low[-1:], low[-2:], low[-3:],
                  _cap_class(word), shape, low, low)
        keys = numpy.array([hash_string(f"{t}={v}") for t, v in zip(TEMPLATES, values)],
                           dtype=numpy.uint64)
        if len(_word_keys) >= _MAX_CACHE:
            _word_keys.clear()
        _word_keys[word] = keys
    return keys


def doc_keys(doc: Doc) -> numpy.ndarray:
    """(n_tokens, len(TEMPLATES)) uint64 feature keys of one Doc."""
    n = len(doc)
    if not n:
        return numpy.zeros((0, len(TEMPLATES)), dtype=numpy.uint64)
    own = numpy.stack([word_keys(t.text, t.shape_) for t in doc])
    out = own.copy()
    out[0, 9] = _BOS
    out[1:, 9] = own[:-1, 9]
    out[:-1, 10] = own[1:, 10]
    out[-1, 10] = _EOS
    return out


@registry.architectures("spacy_structpref.SparseFeatures.v1")
def SparseFeatures(width: Optional[int] = None, n_rows: int = 262144, n_hashes: int = 2,
                   seed: int = 17, init_scale: float = 0.0) -> Model[List[Doc], List[Floats2d]]:
    """Summed hash embeddings of the indicator features. ``width`` may be left
    unset (null): the DISTRO model then sets it to its label rank. The table
    starts at zero (w = 0, the paper's linear model) unless ``init_scale`` > 0,
    which a learned projection on top needs (N(0, init_scale²) entries)."""
    if n_rows < 1 or not 1 <= n_hashes <= 4:
        raise TaggerError(f"n_rows must be >= 1 and n_hashes in 1..4, got {n_rows}, {n_hashes}")
    return Model("sparse_features", _forward, init=_init, params={"E": None},
                 dims={"nO": width, "nV": n_rows},
                 attrs={"n_hashes": n_hashes, "seed": seed, "init_scale": init_scale})


def _init(model: Model, X=None, Y=None) -> Model:
    if not model.has_dim("nO"):
        raise TaggerError("SparseFeatures needs its width (nO) before initialization")
    shape = (model.get_dim("nV"), model.get_dim("nO"))
    scale = model.attrs["init_scale"]
    E = (numpy.random.default_rng(model.attrs["seed"]).normal(0, scale, shape) if scale > 0
         else numpy.zeros(shape))
    model.set_param("E", model.ops.asarray2f(E.astype("f")))
    return model


def _rows(model: Model, docs: List[Doc]) -> numpy.ndarray:
    keys = numpy.concatenate([doc_keys(d) for d in docs]) if docs else \
        numpy.zeros((0, len(TEMPLATES)), dtype=numpy.uint64)
    flat = numpy.ascontiguousarray(keys.ravel())
    hashed = model.ops.hash(flat, model.attrs["seed"])[:, : model.attrs["n_hashes"]]
    rows = (numpy.asarray(hashed) % model.get_dim("nV")).astype(numpy.int32)
    return rows.reshape(len(keys), -1)  # (n_tokens, n_templates * n_hashes)


def _forward(model: Model, docs: List[Doc], is_train: bool):
    E = model.get_param("E")
    rows = _rows(model, docs)
    lengths = [len(d) for d in docs]
    summed = E[rows].sum(axis=1)
    outputs = model.ops.unflatten(summed, lengths)

    def backprop(d_outputs: List[Floats2d]) -> List[Doc]:
        dY = model.ops.flatten(d_outputs)
        n_per = rows.shape[1]
        d_rows = numpy.repeat(dY, n_per, axis=0)
        dE = model.ops.alloc2f(*E.shape)
        model.ops.scatter_add(dE, rows.ravel(), d_rows)
        model.inc_grad("E", dE)
        return []

    return outputs, backprop

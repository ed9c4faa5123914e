"""``spacy_structpref.SparseFeatures.v1``: the DISTRO paper's indicator
features as summed hash embeddings; ``spacy_structpref.SparseBagFeatures.v1``:
the bag of words and bigrams of a whole document, for multiclass
classification (Srikumar & Manning 2014, §5.1: tokens as features).

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
from ..trees.arrays import offsets

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


def _orth_keys(vocab, orth: int) -> numpy.ndarray:
    """:func:`word_keys` of a word given by its ORTH hash (cached by hash:
    reading a token's text and shape is the slow part)."""
    keys = _word_keys.get(orth)
    if keys is None:
        lexeme = vocab[orth]
        keys = _word_keys[orth] = word_keys(lexeme.orth_, lexeme.shape_)
    return keys


def doc_keys(doc: Doc) -> numpy.ndarray:
    """(n_tokens, len(TEMPLATES)) uint64 feature keys of one Doc."""
    n = len(doc)
    if not n:
        return numpy.zeros((0, len(TEMPLATES)), dtype=numpy.uint64)
    own = numpy.stack([_orth_keys(doc.vocab, orth) for orth in doc.to_array("ORTH").tolist()])
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


def _hash_rows(model: Model, keys: numpy.ndarray) -> numpy.ndarray:
    """(len(keys), n_hashes) int32 table rows of uint64 feature keys."""
    n_hashes = model.attrs["n_hashes"]
    if not keys.size:
        return numpy.zeros((0, n_hashes), dtype=numpy.int32)
    hashed = model.ops.hash(numpy.ascontiguousarray(keys), model.attrs["seed"])[:, :n_hashes]
    return (model.ops.to_numpy(hashed) % model.get_dim("nV")).astype(numpy.int32)


def _rows(model: Model, docs: List[Doc]) -> numpy.ndarray:
    keys = numpy.concatenate([doc_keys(d) for d in docs]) if docs else \
        numpy.zeros((0, len(TEMPLATES)), dtype=numpy.uint64)
    rows = _hash_rows(model, keys.ravel())
    return rows.reshape(len(keys), -1)  # (n_tokens, n_templates * n_hashes)


def _table_grad(model: Model, rows: numpy.ndarray, d_rows) -> None:
    """Add ``d_rows[k]`` to the gradient of table row ``rows[k]``, in place
    once the table has a gradient: a dense table-sized temporary per
    minibatch, then added to the gradient, cost more than the rest of the
    step for a large table (the optimizer zeroes the gradient it keeps)."""
    if model.has_grad("E"):
        model.ops.scatter_add(model.get_grad("E"), model.ops.asarray(rows, dtype="i"), d_rows)
        return
    dE = model.ops.alloc2f(*model.get_param("E").shape)
    model.ops.scatter_add(dE, model.ops.asarray(rows, dtype="i"), d_rows)
    model.set_grad("E", dE)


def _forward(model: Model, docs: List[Doc], is_train: bool):
    E = model.get_param("E")
    rows = _rows(model, docs)
    lengths = [len(d) for d in docs]
    if isinstance(E, numpy.ndarray):
        from ._sparse import gather_sum  # compiled extension: imported on first use

        summed = gather_sum(E, rows)
    else:  # on a GPU
        summed = E[model.ops.asarray(rows)].sum(axis=1)
    outputs = model.ops.unflatten(summed, lengths)

    def backprop(d_outputs: List[Floats2d]) -> List[Doc]:
        dY = model.ops.flatten(d_outputs)
        _table_grad(model, rows.ravel(), model.ops.xp.repeat(dY, rows.shape[1], axis=0))
        return []

    return outputs, backprop


_BAG_BOS, _BAG_EOS = "<s>", "</s>"


def bag_keys(doc: Doc) -> numpy.ndarray:
    """uint64 keys of a document's lower-cased words and of its word bigrams
    (with sentence-boundary markers), one per occurrence."""
    words = [_BAG_BOS] + [t.lower_ for t in doc] + [_BAG_EOS]
    keys = [hash_string(f"w={w}") for w in words[1:-1]]
    keys += [hash_string(f"b={a} {b}") for a, b in zip(words, words[1:])]
    return numpy.asarray(keys, dtype=numpy.uint64)


@registry.architectures("spacy_structpref.SparseBagFeatures.v1")
def SparseBagFeatures(width: Optional[int] = None, n_rows: int = 262144, n_hashes: int = 2,
                      seed: int = 17) -> Model[List[Doc], List[Floats2d]]:
    """One feature vector per Doc (a (1, width) array each): the summed hash
    embeddings of its words and bigrams (counts), a linear model over the
    bag of words and bigrams with a zero-initialised table. With DISTRO each
    Doc is then a sequence of one atomic part, the multiclass case of
    Srikumar & Manning (2014, §3.1 and §5.1). ``width`` as for
    :func:`SparseFeatures`."""
    if n_rows < 1 or not 1 <= n_hashes <= 4:
        raise TaggerError(f"n_rows must be >= 1 and n_hashes in 1..4, got {n_rows}, {n_hashes}")
    return Model("sparse_bag_features", _bag_forward, init=_init, params={"E": None},
                 dims={"nO": width, "nV": n_rows},
                 attrs={"n_hashes": n_hashes, "seed": seed, "init_scale": 0.0})


def _bag_forward(model: Model, docs: List[Doc], is_train: bool):
    E = model.get_param("E")
    per_doc = [_hash_rows(model, bag_keys(d)).ravel() for d in docs]
    counts = numpy.asarray([len(r) for r in per_doc], dtype=numpy.int32)
    rows = numpy.concatenate(per_doc) if per_doc else numpy.zeros(0, dtype=numpy.int32)
    row_off = offsets(counts, numpy.int32)
    if isinstance(E, numpy.ndarray):
        from ._sparse import gather_sum_ragged  # compiled extension: imported on first use

        summed = gather_sum_ragged(E, rows, row_off)
    else:  # on a GPU
        summed = model.ops.reduce_sum(E[model.ops.asarray(rows)], model.ops.asarray1i(counts))
    outputs = [summed[i: i + 1] for i in range(len(docs))]

    def backprop(d_outputs: List[Floats2d]) -> List[Doc]:
        dY = model.ops.flatten(d_outputs)
        _table_grad(model, rows, model.ops.xp.repeat(dY, model.ops.asarray(counts), axis=0))
        return []

    return outputs, backprop

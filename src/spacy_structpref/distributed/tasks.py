"""The tasks of the distributed jobs (:mod:`.jobs`): plain functions of
their arguments, run on a worker (or in this process), that call the
package's own per-shard code. Nothing here imports dask.

Values every task of a job reads (a pipeline, a fold's parser, a trained
support set) travel as :class:`Packed` bytes and are unpacked once per
worker process, then kept (a few at a time) and used under a lock of their
own: a worker with several threads must not parse with one parser, or
intern into one SymbolTable, from two threads at once.
"""
import hashlib
import pickle
import threading
from collections import OrderedDict
from typing import Any, Callable, List, Sequence, Tuple

from ..errors import StructPrefError

CACHE_SIZE = 64  # unpacked values kept per process


class Packed:
    """A value as bytes (``pack(value)``) with a digest; :meth:`get` gives
    the value as ``unpack(bytes)`` once per process."""

    def __init__(self, value, pack: Callable[[Any], bytes] = pickle.dumps, unpack: Callable[[bytes], Any] = pickle.loads,
                 what: str = "value"):
        try:
            self.data = pack(value)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            raise StructPrefError(f"the {what} cannot be sent to other processes: {err}") from None
        self.unpack = unpack
        self.digest = f"{getattr(unpack, '__qualname__', unpack)}:{hashlib.blake2b(self.data, digest_size=16).hexdigest()}"

    def get(self) -> Tuple[Any, threading.Lock]:
        """(the value, the lock to hold while using it)."""
        with _cache_lock:
            entry = _cache.get(self.digest)
            if entry is not None:
                _cache.move_to_end(self.digest)
                return entry
        value = self.unpack(self.data)
        with _cache_lock:
            entry = _cache.setdefault(self.digest, (value, threading.Lock()))
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
        return entry


_cache: "OrderedDict[str, Tuple[Any, threading.Lock]]" = OrderedDict()
_cache_lock = threading.Lock()


# ---------------------------------------------------------------- parsing
def pack_pipeline(nlp) -> bytes:
    """A spaCy pipeline as its config and ``to_bytes`` (the documented way
    to rebuild one elsewhere: ``Language.from_config(config).from_bytes``)."""
    return pickle.dumps((nlp.config.to_str(), nlp.to_bytes()))


def unpack_pipeline(data: bytes):
    from spacy import util
    from thinc.api import Config

    config_text, nlp_bytes = pickle.loads(data)
    config = Config().from_str(config_text, interpolate=False)
    nlp = util.get_lang_class(config["nlp"]["lang"]).from_config(config, validate=False)
    return nlp.from_bytes(nlp_bytes)


def parse_shard(pipeline: Packed, sentences: Sequence[Tuple[List[str], List[bool]]]) -> bytes:
    """The pipeline's Docs of a shard of sentences (words, trailing spaces),
    as the bytes of a DocBin with their user data (``doc._.nbest``,
    ``doc._.forest``, fallback flags)."""
    from spacy.tokens import Doc, DocBin

    nlp, lock = pipeline.get()
    with lock:
        docs = list(nlp.pipe(Doc(nlp.vocab, words=words, spaces=spaces) for words, spaces in sentences))
        return DocBin(docs=docs, store_user_data=True).to_bytes()


def fold_parser(trees: Sequence, fold: int, n_folds: int, settings: dict) -> Packed:
    """The parser of one jackknife fold: a grammar read off the other folds'
    trees (:func:`~spacy_structpref.reranking.data.parser_from_trees`)."""
    from ..reranking.data import fold_assignment, parser_from_trees

    folds = fold_assignment(len(trees), n_folds)
    return Packed(parser_from_trees([t for t, g in zip(trees, folds) if g != fold], settings), what="parser")


def parse_items(parser: Packed, sentences: Sequence, k: int, with_forest: bool, fold: int):
    """One shard's rerank items, forests and their table
    (:func:`~spacy_structpref.reranking.data.parse_part`)."""
    from ..reranking.data import parse_part

    value, lock = parser.get()
    with lock:
        items, forests, symbols = parse_part(value, sentences, k, with_forest, fold)
        return items, forests, pickle.loads(pickle.dumps(symbols))  # a snapshot: the table grows with the next shard


# ---------------------------------------------------- incremental attachment
def candidate_shard(inventory: Packed, trees: Sequence) -> list:
    """The preference sets of a shard of gold trees, in order
    (:func:`~spacy_structpref.incremental.preference_sets_of`)."""
    from ..incremental import preference_sets_of

    value, _ = inventory.get()  # read only
    return preference_sets_of(trees, value)


def pack_learner(learner) -> bytes:
    """A trained learner as an untrained one with its settings (its kernel,
    whose SymbolTable comes along) and its own ``to_bytes``: prepared
    supports (DAGs with packed kernel arrays) are not picklable, and saving
    is what a learner guarantees to read back."""
    from ..learners.specialised import SpecialisedLearner

    fresh = SpecialisedLearner(learner.prototype.clone()) if isinstance(learner, SpecialisedLearner) else learner.clone()
    return pickle.dumps((fresh, learner.to_bytes()))


def unpack_learner(data: bytes):
    fresh, state = pickle.loads(data)
    return fresh.from_bytes(state)


def dag_symbols(learner):
    """The SymbolTable candidate DAGs are built with for ``learner``: its
    (prototype's) kernel's, where the support is interned; None for a
    learner without a tree kernel (any table will do)."""
    kernel = getattr(getattr(learner, "prototype", learner), "kernel", None)
    return getattr(kernel, "symbols", None)


def utilities_shard(learner: Packed, psets: Sequence, reduced: bool, keys: Sequence) -> list:
    """The learner's utilities of every candidate of a shard of preference
    sets, each set built as a DAG in the learner's table (``keys``: each
    set's class for a specialised learner, else None)."""
    from ..trees.arrays import SymbolTable

    value, lock = learner.get()
    with lock:
        symbols = dag_symbols(value)
        symbols = symbols if symbols is not None else SymbolTable()
        out = []
        for pset, key in zip(psets, keys):
            dag = pset.dag(symbols, reduced)
            out.append(value.utilities(dag) if key is None else value.utilities(dag, key))
        return out


# ------------------------------------------------------------------ kernels
_block_symbols = None  # one table per process for the tree blocks (gram needs both sides in one)
_block_lock = threading.Lock()  # held while a block interns into it


def unpack_block(data: bytes):
    """A block of trees as a :class:`~spacy_structpref.kernels.TreeBatch`
    interned in this process's block table (converted and packed once, its
    self-kernels cached for every block pair that uses it)."""
    global _block_symbols
    from ..kernels import TreeBatch
    from ..trees.arrays import SymbolTable

    with _block_lock:
        if _block_symbols is None:
            _block_symbols = SymbolTable()
        return TreeBatch(pickle.loads(data), _block_symbols)


def gram_block(rows: Packed, cols, lam: float, sigma: float, normalize: bool):
    """``gram`` of a row block against a column block (None: the symmetric
    block of the rows with themselves)."""
    from ..kernels import gram

    a = rows.get()[0]
    b = cols.get()[0] if cols is not None else None  # both read only: interned when unpacked
    return gram(a, b, lam=lam, sigma=sigma, normalize=normalize, n_threads=1, progress=False)

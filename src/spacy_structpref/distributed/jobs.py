"""The jobs that run on a ``dask.distributed`` cluster (scale-out),
each a function of (data, settings, where to run) that returns exactly what
the single-process path returns:

- :func:`parse_corpus`: a spaCy pipeline (``forest_parser``: k-best lists
  in ``doc._.nbest``, pruned forests in ``doc._.forest``; Huang & Chiang
  2005) over a corpus, in shards written as DocBins; = ``nlp.pipe``.
- :func:`jackknife_lists` / :func:`parse_lists`: the reranker's k-best
  lists (Collins & Koo 2005), fold × shard tasks; = the functions of the
  same names in :mod:`spacy_structpref.reranking`.
- :func:`candidate_sets`: first-pass attachment preference sets of a
  treebank (Menchetti et al. 2005, §5), shards of sentences; =
  ``preference_sets`` of each tree.
- :func:`set_utilities`: a trained learner's utilities (the kernel voted
  perceptron's ``Σ_s c_s [K(x_best_s, x) − K(x_wrong_s, x)]``) of every
  candidate of a test set, the support sent once, the sets in shards; =
  ``learner.utilities`` of each set's DAG; :func:`attachment_utilities`:
  both for a trained ``attachment_predictor`` on one cluster.
- :func:`gram`: a kernel (Gram) matrix in row × column blocks; =
  :func:`spacy_structpref.kernels.gram` to 1e-12.

Where they run (every job): ``client`` (a ``distributed.Client``), or
``scheduler="tcp://HOST:PORT"``, or ``n_workers`` worker processes of a
``LocalCluster`` started for the job (None: one per core, or this process
for a small input; 0: this process). Progress is a tqdm bar over finished
tasks. Without dask installed, only the in-process path runs; asking for a
cluster raises a :class:`~.cluster.MissingDependency` that says what to
install.
"""
import os
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import srsly
from nltk.tree import Tree

from ..errors import StructPrefError
from ..saving import atomic_file, inside
from . import tasks
from .cluster import LocalRunner, runner
from .tasks import Packed

# Below these sizes a job runs in this process unless workers are asked for:
# starting worker processes (each imports spaCy) costs seconds.
SMALL = {"parse": 50, "candidates": 200, "utilities": 500, "gram_pairs": 2_000_000}
MANIFEST = "shards.json"
SHARD_NAME = "shard-{:05d}.spacy"


def _where(client, scheduler, n_workers) -> dict:
    return {"client": client, "scheduler": scheduler, "n_workers": n_workers}


def _check_size(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise StructPrefError(f"{name} must be an integer of at least 1, got {value!r}")
    return int(value)


def _shards(n: int, size: int) -> List[Tuple[int, int]]:
    return [(a, min(a + size, n)) for a in range(0, n, size)]


# ---------------------------------------------------------------- parsing
Sentence = Tuple[List[str], Optional[List[bool]]]  # words, trailing spaces (None: a space after each)


def read_sentences(inputs) -> List[Sentence]:
    """The sentences (words, trailing spaces) of ``inputs``: paths of
    ``.spacy`` files (each Doc's tokens) or of bracket files (the leaves of
    :func:`read_trees`), or Docs, or word lists."""
    from spacy.tokens import Doc

    if isinstance(inputs, (str, Path, Doc)):
        inputs = [inputs]
    out: List[Sentence] = []
    for item in inputs:
        if isinstance(item, Doc):
            out.append(([t.text for t in item], [bool(t.whitespace_) for t in item]))
        elif isinstance(item, (str, Path)):
            out.extend(_read_file(Path(item)))
        elif isinstance(item, (list, tuple)) and all(isinstance(w, str) for w in item):
            out.append((list(item), None))
        else:
            raise StructPrefError(f"cannot read sentences from a {type(item).__name__}: give .spacy or "
                                  "bracket file paths, Docs or word lists")
    if any(not words for words, _ in out):
        raise StructPrefError("the corpus has an empty sentence: there is nothing to parse in it")
    return out


def _read_file(path: Path) -> List[Sentence]:
    if not path.is_file():
        raise StructPrefError(f"no corpus file at {path}")
    if path.suffix == ".spacy":
        import spacy

        from ..trees.doc import read_docs

        docs = read_docs(path, spacy.blank("xx").vocab)
        return [([t.text for t in d], [bool(t.whitespace_) for t in d]) for d in docs]
    return [(tree.leaves(), None) for tree in read_trees(path)]


def read_trees(path, normalize: bool = True) -> List[Tree]:
    """The trees of a ``.spacy`` file (its Docs' constituents) or of a
    bracket file (one tree a line; ``normalize``: as the corpus readers give
    them, :func:`~spacy_structpref.trees.normalize_tree`: PTB's outer
    bracket becomes ``TOP``, ``-NONE-`` elements and function tags go)."""
    from ..scoring.parseval import read_lines
    from ..trees.brackets import parse_bracketed
    from ..trees.normalize import normalize_tree

    path = Path(path)
    if not path.is_file():
        raise StructPrefError(f"no tree file at {path}")
    if path.suffix == ".spacy":
        import spacy

        from ..trees.doc import doc_to_tree, read_docs

        trees = [doc_to_tree(d) for d in read_docs(path, spacy.blank("xx").vocab)]
        if any(t is None for t in trees):
            raise StructPrefError(f"{path} has Docs without constituents (doc.spans['constituents'])")
        return trees
    trees = [parse_bracketed(line) for line in read_lines(path) if line.strip()]
    return [normalize_tree(t) for t in trees] if normalize else trees


def _pipeline(model):
    from spacy.language import Language

    if isinstance(model, Language):
        return model
    import spacy

    try:
        return spacy.load(model)
    except OSError as err:
        raise StructPrefError(f"cannot load the pipeline {model!r}: {err}") from None


def parse_corpus(model, inputs, output_dir, *, shard_size: int = 100, client=None, scheduler: str = None,
                 n_workers: Optional[int] = None, progress: bool = True) -> List[Path]:
    """Run a pipeline (a ``Language``, or a name or path for ``spacy.load``:
    typically a ``forest_parser``, which writes the k-best list and the
    pruned forest of each sentence) over the sentences of ``inputs`` (see
    :func:`read_sentences`), ``shard_size`` sentences a task, and write
    ``output_dir/shard-NNNNN.spacy`` (DocBins with user data) and
    ``shards.json`` (the shards in order, with their sizes). Returns the
    shard paths; :func:`read_parsed` reads the Docs back in corpus order,
    the Docs ``nlp.pipe`` gives in one process. The pipeline travels as its
    config and bytes, so workers need the package, not the model's path.
    Each shard is written once, by the caller, when its task's result
    arrives; earlier shards in ``output_dir`` are removed first."""
    shard_size = _check_size("shard_size", shard_size)
    nlp = _pipeline(model)
    sentences = read_sentences(inputs)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    for old in list(output_dir.glob("shard-*.spacy")) + [output_dir / MANIFEST]:
        old.unlink(missing_ok=True)
    bounds = _shards(len(sentences), shard_size)

    def write(i: int, data: bytes) -> Path:
        path = output_dir / SHARD_NAME.format(i)
        with atomic_file(path) as tmp:
            tmp.write_bytes(data)
        return path

    with runner(**_where(client, scheduler, n_workers), in_process=len(sentences) < SMALL["parse"]) as run:
        pipeline = run.share(Packed(nlp, tasks.pack_pipeline, tasks.unpack_pipeline, "pipeline"))
        handles = [run.submit(tasks.parse_shard, pipeline, sentences[a:b]) for a, b in bounds]
        paths = run.gather(handles, [b - a for a, b in bounds], "parse:sent", progress, write)
    with atomic_file(output_dir / MANIFEST) as tmp:
        srsly.write_json(tmp, {"n_docs": len(sentences), "pipeline": nlp.pipe_names,
                               "shards": [{"file": p.name, "n_docs": b - a} for p, (a, b) in zip(paths, bounds)]})
    return paths


def read_parsed(output_dir, vocab=None) -> Iterable:
    """The Docs :func:`parse_corpus` wrote to ``output_dir``, in corpus order."""
    from spacy.tokens import DocBin

    output_dir = Path(output_dir)
    manifest = output_dir / MANIFEST
    if not manifest.is_file():
        raise StructPrefError(f"{output_dir} holds no parsed corpus (no {MANIFEST}): run parse_corpus first")
    if vocab is None:
        import spacy

        vocab = spacy.blank("xx").vocab
    from ..trees import register_extensions

    register_extensions()
    for shard in srsly.read_json(manifest)["shards"]:
        docs = list(DocBin().from_disk(inside(output_dir, shard["file"])).get_docs(vocab))
        if len(docs) != shard["n_docs"]:
            raise StructPrefError(f"{output_dir / shard['file']} has {len(docs)} Docs, its manifest says "
                                  f"{shard['n_docs']}: the output is damaged, parse the corpus again")
        yield from docs


# ------------------------------------------------------------ rerank lists
def jackknife_lists(train_trees: Sequence[Tree], settings: Optional[dict] = None, n_folds: int = 10,
                    k: Optional[int] = None, with_forest: bool = False, *, shard_size: int = 50, client=None,
                    scheduler: str = None, n_workers: Optional[int] = None, progress: bool = True,
                    symbols=None) -> list:
    """:func:`spacy_structpref.reranking.jackknife_lists` on a cluster:
    one task per fold reads the fold's grammar off the other folds, and its
    held-out sentences are parsed in shards of ``shard_size`` (fold × shard
    tasks), so a cluster of more workers than folds stays busy. The same
    items, in the same order; all forests share the table ``symbols``."""
    from ..parsing.settings import parser_settings
    from ..reranking.data import assemble_parts, check_k, fold_assignment

    trees = list(train_trees)
    if not all(isinstance(t, Tree) for t in trees):
        raise StructPrefError("jackknifing needs gold trees (nltk Trees) for every training sentence")
    shard_size = _check_size("shard_size", shard_size)
    cfg = parser_settings(settings)
    k = check_k(cfg["k"] if k is None else k)
    folds = fold_assignment(len(trees), n_folds)
    with runner(**_where(client, scheduler, n_workers), in_process=len(trees) < SMALL["parse"]) as run:
        shared = run.share(trees)
        handles, sizes = [], []
        for f in range(n_folds):
            parser = run.submit(tasks.fold_parser, shared, f, n_folds, cfg)
            held = np.flatnonzero(folds == f)  # contiguous: folds are blocks of the corpus order
            for a, b in _shards(len(held), shard_size):
                handles.append(run.submit(tasks.parse_items, parser, trees[held[a]:held[b - 1] + 1], k,
                                          with_forest, f))
                sizes.append(b - a)
        parts = run.gather(handles, sizes, "jackknife:sent", progress)
    return assemble_parts(parts, symbols)


def parse_lists(sentences: Sequence, parser, k: int = 50, with_forest: bool = False, *, shard_size: int = 50,
                client=None, scheduler: str = None, n_workers: Optional[int] = None, progress: bool = True,
                symbols=None) -> list:
    """:func:`spacy_structpref.reranking.parse_lists` on a cluster: the
    parser sent once, the sentences (gold trees or word lists) in shards."""
    from ..reranking.data import assemble_parts, check_k

    sentences = list(sentences)
    k = check_k(k)
    shard_size = _check_size("shard_size", shard_size)
    if not sentences:
        return []
    bounds = _shards(len(sentences), shard_size)
    with runner(**_where(client, scheduler, n_workers), in_process=len(sentences) < SMALL["parse"]) as run:
        shared = run.share(Packed(parser, what="parser"))
        handles = [run.submit(tasks.parse_items, shared, sentences[a:b], k, with_forest, -1) for a, b in bounds]
        parts = run.gather(handles, [b - a for a, b in bounds], "parse:sent", progress)
    return assemble_parts(parts, symbols)


# ------------------------------------------------- incremental attachment
def candidate_sets(trees: Sequence[Tree], inventory, *, shard_size: int = 100, client=None, scheduler: str = None,
                   n_workers: Optional[int] = None, progress: bool = True) -> list:
    """The preference sets of every word (from the second on) of every gold
    tree, in order (``preference_sets_of(trees, inventory)``), shards of
    ``shard_size`` trees a task. Wrap them in
    :class:`~spacy_structpref.incremental.CandidateSets` to build their
    candidate DAGs on access."""
    trees = list(trees)
    shard_size = _check_size("shard_size", shard_size)
    bounds = _shards(len(trees), shard_size)
    with runner(**_where(client, scheduler, n_workers), in_process=len(trees) < SMALL["candidates"]) as run:
        shared = run.share(Packed(inventory, what="CP inventory"))
        handles = [run.submit(tasks.candidate_shard, shared, trees[a:b]) for a, b in bounds]
        parts = run.gather(handles, [b - a for a, b in bounds], "candidates:tree", progress)
    return [s for part in parts for s in part]


def set_utilities(learner, psets: Sequence, reduced: bool = False, keys: Optional[Sequence] = None, *,
                  shard_size: int = 100, client=None, scheduler: str = None, n_workers: Optional[int] = None,
                  progress: bool = True) -> List[np.ndarray]:
    """A trained learner's utilities of the candidates of each preference
    set (:class:`~spacy_structpref.incremental.PreferenceSet`), in order:
    ``learner.utilities(pset.dag(symbols, reduced))`` with the table of the
    learner's kernel (where its support is interned). A
    :class:`~spacy_structpref.learners.SpecialisedLearner` scores each set
    with the learner of its key: ``keys`` (default: each set's
    :func:`~spacy_structpref.incremental.foot_class`). The learner (its
    support) is sent once; the sets go in shards of ``shard_size``. Kernel
    sums may run in another order on a worker: equal to 1e-12."""
    from ..learners.specialised import SpecialisedLearner

    psets = list(psets)
    shard_size = _check_size("shard_size", shard_size)
    if isinstance(learner, SpecialisedLearner):
        if keys is None:
            from ..incremental import set_classes

            keys = set_classes(psets)
    elif keys is not None:
        raise StructPrefError("keys select a specialised learner's sub-learner: this learner takes none")
    keys = list(keys) if keys is not None else [None] * len(psets)
    if len(keys) != len(psets):
        raise StructPrefError(f"{len(psets)} preference sets but {len(keys)} keys")
    bounds = _shards(len(psets), shard_size)
    with runner(**_where(client, scheduler, n_workers), in_process=len(psets) < SMALL["utilities"]) as run:
        shared = run.share(Packed(learner, tasks.pack_learner, tasks.unpack_learner, "learner"))
        handles = [run.submit(tasks.utilities_shard, shared, psets[a:b], reduced, keys[a:b]) for a, b in bounds]
        parts = run.gather(handles, [b - a for a, b in bounds], "utilities:set", progress)
    return [u for part in parts for u in part]


def attachment_utilities(model, trees: Sequence[Tree], *, shard_size: int = 100, client=None,
                         scheduler: str = None, n_workers: Optional[int] = None,
                         progress: bool = True) -> Tuple[List[np.ndarray], List[Optional[int]]]:
    """A trained ``attachment_predictor``'s utilities of every preference set
    of gold ``trees`` (its CP inventory's candidates given each gold prefix,
    Menchetti et al. 2005, §5), with each set's gold index: what the
    component's ``attachment_loss`` scores, from :func:`candidate_sets` and
    :func:`set_utilities` on one cluster (``model``: a pipeline, its name or
    path, or the component)."""
    from ..components.attachment_predictor import AttachmentPredictor, find_attachment_predictor
    from ..incremental import set_classes

    component = model if isinstance(model, AttachmentPredictor) else find_attachment_predictor(_pipeline(model))
    component.require_inventory()
    trees = list(trees)
    with runner(**_where(client, scheduler, n_workers), in_process=len(trees) < SMALL["candidates"]) as run:
        where = {"n_workers": 0} if isinstance(run, LocalRunner) else {"client": run.client}
        psets = candidate_sets(trees, component.inventory, shard_size=shard_size, progress=progress, **where)
        keys = set_classes(psets, component.foot_class) if component.cfg["specialise"] else None
        utilities = set_utilities(component.learner, psets, component.cfg["reduced"], keys, shard_size=shard_size,
                                  progress=progress, **where)
    return utilities, [s.gold for s in psets]


# ------------------------------------------------------------------ kernels
def _portable(items) -> list:
    """Trees as values any process can read: bracket strings and nltk Trees
    as they are, TreeArrays and Docs as nltk Trees."""
    from ..trees.arrays import TreeArrays
    from ..trees.forest import Forest

    out = []
    for x in items:
        if isinstance(x, (str, Tree)):
            out.append(x)
        elif isinstance(x, Forest):
            raise StructPrefError("the blocked Gram matrix takes trees; for forests use "
                                  "spacy_structpref.kernels.forest_gram")
        elif isinstance(x, TreeArrays):
            out.append(x.to_tree())
        else:
            from ..trees.doc import doc_to_tree

            tree = doc_to_tree(x) if hasattr(x, "spans") else None
            if tree is None:
                raise StructPrefError(f"cannot use a {type(x).__name__} as a tree: pass bracketed strings, "
                                      "nltk Trees, TreeArrays or Docs with constituents")
            out.append(tree)
    return out


def gram(A, B=None, lam: float = 0.4, normalize: bool = True, sigma: float = 1, *, block_size: int = 500,
         client=None, scheduler: str = None, n_workers: Optional[int] = None, progress: bool = True) -> np.ndarray:
    """:func:`spacy_structpref.kernels.gram` (``B=None``: the symmetric
    ``K(A, A)``) in blocks of ``block_size`` rows × ``block_size`` columns,
    one task each (of a symmetric matrix only the blocks on and above the
    diagonal). Each worker process converts and packs a block once and
    caches its self-kernels for every block pair it computes. Equal to the
    single-process matrix to 1e-12 (Moschitti's production join visits the
    same node pairs; only the order of some sums may differ). The in-process
    path is the single-process ``gram`` on every core."""
    from ..kernels import gram as single_process_gram
    from ..kernels.inputs import check_lambda, check_sigma

    lam, sigma = check_lambda(lam), check_sigma(sigma)
    block_size = _check_size("block_size", block_size)
    A = _portable(A)
    B = None if B is None else _portable(B)
    rows = _shards(len(A), block_size)
    cols = rows if B is None else _shards(len(B), block_size)
    n_pairs = len(A) * (len(A) if B is None else len(B))
    where = _where(client, scheduler, n_workers)
    with runner(**where, in_process=n_pairs < SMALL["gram_pairs"]) as run:
        if isinstance(run, LocalRunner):
            return single_process_gram(A, B, lam=lam, normalize=normalize, sigma=sigma,
                                       n_threads=os.cpu_count() or 1, progress=progress)
        out = np.zeros((len(A), len(A) if B is None else len(B)))
        blocks_a = [run.share(Packed(A[a:b], unpack=tasks.unpack_block, what="trees")) for a, b in rows]
        blocks_b = blocks_a if B is None else [run.share(Packed(B[a:b], unpack=tasks.unpack_block, what="trees"))
                                               for a, b in cols]
        pairs = [(i, j) for i in range(len(rows)) for j in range(len(cols)) if B is not None or j >= i]
        handles = [run.submit(tasks.gram_block, blocks_a[i], None if (B is None and i == j) else blocks_b[j],
                              lam, sigma, normalize) for i, j in pairs]

        def place(t: int, block: np.ndarray) -> None:
            i, j = pairs[t]
            (a, b), (c, d) = rows[i], cols[j]
            out[a:b, c:d] = block
            if B is None and i != j:
                out[c:d, a:b] = block.T

        sizes = [(rows[i][1] - rows[i][0]) * (cols[j][1] - cols[j][0]) for i, j in pairs]
        run.gather(handles, sizes, "gram:pair", progress, place)
    return out

"""Parsed TREC questions (Li & Roth 2002): every question parsed once by a
trained ``forest_parser`` pipeline (1-best tree in ``doc.spans``, pruned
packed forest in ``doc._.forest``, pruned as the parser prunes the
reranker's forests: its ``merit_threshold``) and cached as a ``DocBin``,
so that every kernel and both label granularities reuse the same parses.

The cache holds ``train+dev.spacy`` (the 5,452 training questions in
corpus order: :func:`~spacy_structpref.corpora.qc_questions`' dev split is
every 10th of them) and ``test.spacy`` (500), each Doc with its fine
label in ``doc.cats``; :func:`load_parsed` gives either granularity.
"""
from pathlib import Path
from typing import Iterable, List, Optional

from ..corpora.labels import coarse_label
from ..errors import StructPrefError

CACHE_SPLITS = ("train+dev", "test")


def gold_label(doc) -> str:
    """The one class of a Doc whose ``doc.cats`` is a one-hot exclusive
    labelling (a clear error otherwise)."""
    positive = [label for label, value in doc.cats.items() if value == 1.0]
    if len(positive) != 1:
        raise StructPrefError(f"the Doc {doc.text[:40]!r} needs exactly one class with cats value 1.0 "
                              f"(mutually exclusive classes), got {positive or 'none'}")
    return positive[0]


def parse_docs(nlp, docs: Iterable, n_process: int = 1, batch_size: int = 64, progress: bool = True,
               total: Optional[int] = None) -> List:
    """The Docs (words only are read) parsed by ``nlp``, ``doc.cats`` kept;
    ``doc._.nbest`` is dropped (the classifier reads the 1-best tree and the
    forest)."""
    from spacy.tokens import Doc

    from ..progress import progress_bar

    docs = list(docs)
    fresh = (Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d]) for d in docs)
    out = []
    for gold, doc in progress_bar(zip(docs, nlp.pipe(fresh, batch_size=batch_size, n_process=n_process)),
                                  total=total or len(docs), desc="parse", unit="doc", disable=not progress):
        doc.cats = dict(gold.cats)
        if doc.has_extension("nbest"):
            doc._.nbest = None
        out.append(doc)
    return out


def parse_questions(model, out_dir, n_process: int = 1, limit: Optional[int] = None,
                    progress: bool = True) -> dict:
    """Parse the TREC training (train+dev, corpus order) and test questions
    with the pipeline saved at ``model`` (its last component must be the
    ``forest_parser``, storing forests) and write ``out_dir/{split}.spacy``
    atomically; ``limit`` parses the first n of each split (smoke runs; 0
    or None: all). Returns the number of Docs per split."""
    import spacy
    from spacy.tokens import DocBin

    from ..corpora import item_to_doc, qc_questions
    from ..corpora.readers import check_limit
    from ..saving import atomic_file

    limit = check_limit(limit)

    nlp = spacy.load(model)
    parsers = [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory == "forest_parser"]
    if not parsers:
        raise StructPrefError(f"{model} has no forest_parser to parse the questions with")
    if not nlp.get_pipe(parsers[-1]).cfg["store_forest"]:
        raise StructPrefError(f"{model}: the forest_parser must store its forests (store_forest = true)")
    counts = {}
    for split in CACHE_SPLITS:
        questions = qc_questions(split, "fine")[:limit]
        docs = parse_docs(nlp, (item_to_doc(nlp.vocab, q) for q in questions), n_process=n_process,
                          progress=progress, total=len(questions))
        path = Path(out_dir) / f"{split}.spacy"
        with atomic_file(path) as tmp:
            DocBin(docs=docs, store_user_data=True).to_disk(tmp)
        counts[split] = len(docs)
    return counts


def load_parsed(path, granularity: str = "coarse", vocab=None) -> List:
    """The parsed Docs of a cache file, ``doc.cats`` at ``granularity``
    (``"fine"`` as stored, or ``"coarse"``: the fine classes grouped)."""
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    from ..corpora import qc_labels
    from ..trees import register_extensions

    if granularity not in ("fine", "coarse"):
        raise StructPrefError(f"unknown granularity {granularity!r}; expected 'fine' or 'coarse'")
    path = Path(path)
    if not path.exists():
        raise StructPrefError(f"no parsed questions at {path}: run `python bench/textcat.py --parse-only` "
                              "(project command parse-qc) first")
    register_extensions()
    docs = list(DocBin().from_disk(path).get_docs(vocab if vocab is not None else Vocab()))
    if granularity == "coarse":
        labels = qc_labels("coarse")
        for doc in docs:
            own = coarse_label(gold_label(doc))
            doc.cats = {label: float(label == own) for label in labels}
    return docs


def parsed_examples(path, granularity: str = "coarse", split: str = "all", limit: int = 0):
    """A spaCy corpus reader's function ``(nlp) -> Examples`` over a parse
    cache file: the predicted Doc carries the cached parse (tree, forest),
    the reference Doc the gold ``doc.cats``. ``split`` ``"all"``, or, for
    the training file, ``"train"``/``"dev"`` (dev: every 10th question);
    ``limit`` > 0 keeps the first n (0 or None: all)."""
    from spacy.training import Example

    from ..corpora.readers import check_limit

    limit = check_limit(limit)

    if split not in ("all", "train", "dev"):
        raise StructPrefError(f"unknown split {split!r}; expected 'all', 'train' or 'dev'")

    def read(nlp):
        from ..corpora.readers import QC_DEV_EVERY

        docs = load_parsed(path, granularity, nlp.vocab)
        if split != "all":
            docs = [d for i, d in enumerate(docs) if (i % QC_DEV_EVERY == QC_DEV_EVERY - 1) == (split == "dev")]
        for doc in docs[:limit]:
            predicted = doc.copy()
            predicted.cats = {}
            yield Example(predicted, doc)

    return read

"""Corpus → .spacy conversion with a progress bar and a summary table."""
from pathlib import Path
from typing import Dict, List, Optional

from wasabi import msg


def convert(corpus: str, output_dir: Path, limit: Optional[int] = None,
            skip_bad: bool = False) -> List[Dict[str, object]]:
    """Write ``train``/``dev``/``test.spacy``; ``limit``: the first n
    sentences of each split (0 or None: all; a negative one is refused);
    ``skip_bad``: leave out bad sentences (counted in the table's
    ``skipped`` column) rather than fail."""
    import warnings

    import spacy
    from ..corpora import SPLITS, corpus_items, item_to_doc
    from ..corpora.readers import CORPORA, check_limit
    from ..errors import CorpusError, CorpusWarning
    from ..progress import progress_bar
    from ..trees.doc import SPANS_KEY, write_docs
    from .common import output_directory

    if corpus not in CORPORA:
        raise CorpusError(f"unknown corpus {corpus!r}; expected one of {', '.join(CORPORA)}")
    limit = check_limit(limit)
    nlp = spacy.blank("eu" if corpus == "basque" else "en")
    output_dir = output_directory(output_dir)
    rows = []
    for split in SPLITS:
        with warnings.catch_warnings():  # the table reports the count
            warnings.simplefilter("ignore", CorpusWarning)
            items = corpus_items(corpus, split, limit, skip_bad=skip_bad)
        docs = []
        tokens = constituents = 0
        tags, labels = set(), set()
        for item in progress_bar(items, desc=f"{corpus}/{split}", unit="sent", leave=False, disable=None):
            doc = item_to_doc(nlp.vocab, item)
            docs.append(doc)
            tokens += len(doc)
            tags.update(t.tag_ for t in doc if t.tag_)
            labels.update(label for label, value in doc.cats.items() if value)
            constituents += len(doc.spans[SPANS_KEY]) if SPANS_KEY in doc.spans else 0
        path = output_dir / f"{split}.spacy"
        write_docs(docs, path)
        rows.append({"split": split, "sentences": len(items), "skipped": len(items.skipped), "tokens": tokens,
                     "tags": len(tags), "labels": len(labels), "constituents": constituents, "file": str(path)})
        for where in items.skipped:
            msg.warn(f"skipped {where}")
    columns = ("split", "sentences", "skipped", "tokens", "tags", "labels", "constituents", "file")
    msg.table([[r[k] for k in columns] for r in rows], header=columns,
              aligns=("l", "r", "r", "r", "r", "r", "r", "l"), divider=True, title=f"{corpus} corpus")
    return rows


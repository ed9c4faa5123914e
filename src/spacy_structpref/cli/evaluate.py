"""PARSEVAL evaluation of any pipeline that writes ``doc.spans["constituents"]``."""
from pathlib import Path
from typing import Optional

import srsly
from wasabi import msg


def evaluate_parse(model: str, data_path: Path, output: Optional[Path] = None, batch_size: int = 32,
                   max_errors: Optional[int] = 10):
    """EVALB (``COLLINS.prm``) of the pipeline's parses of the gold Docs'
    words; ``max_errors``: EVALB's MAX_ERROR (``None``: never stop). A Doc
    the pipeline gives no constituents is skipped, as EVALB skips an empty
    test line."""
    from dataclasses import replace

    import spacy
    from spacy.tokens import DocBin
    from ..errors import StructPrefError
    from ..progress import progress_bar
    from ..scoring import evalb
    from ..scoring.parseval import COLLINS
    from ..trees.doc import doc_to_tree

    nlp = spacy.load(model)
    gold_docs = [d for d in DocBin().from_disk(data_path).get_docs(nlp.vocab)]
    golds = [doc_to_tree(d) for d in gold_docs]
    if any(g is None for g in golds):
        raise StructPrefError(f"{data_path} has Docs without gold constituents")
    # Parse the gold tokenisation: re-tokenising the text could change the words.
    texts = (_words_doc(nlp, d) for d in gold_docs)
    tests = [doc_to_tree(doc) for doc in progress_bar(nlp.pipe(texts, batch_size=batch_size), total=len(gold_docs),
                                                      desc="parsing", unit="sent")]
    result = evalb(golds, tests, replace(COLLINS, max_error=max_errors))
    msg.divider(f"PARSEVAL: {model} on {data_path}")
    for _, message in result.messages:
        msg.warn(f"EVALB error, sentence {message}")
    print(result.table())
    if output is not None:
        srsly.write_json(output, {"all": result.all.as_dict(), f"len<={result.cutoff}": result.short.as_dict()})
        msg.good(f"Scores written to {output}")
    return result


def _words_doc(nlp, doc):
    from spacy.tokens import Doc

    return Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])

"""PARSEVAL evaluation of any pipeline that writes ``doc.spans["constituents"]``."""
import sys
from pathlib import Path
from typing import Optional

import srsly
from wasabi import msg


def evaluate_parse(model: str, data_path: Path, output: Optional[Path] = None, batch_size: int = 32,
                   max_errors: Optional[int] = 10):
    """EVALB (``COLLINS.prm``) of the pipeline's parses of the gold Docs'
    words; ``max_errors``: EVALB's MAX_ERROR (``None``: never stop). A Doc
    the pipeline gives no constituents is skipped, as EVALB skips an empty
    test line. EVALB's error lines go to stderr as EVALB writes them; where
    EVALB would stop, the :class:`~..scoring.parseval.EvalbStopped` is
    raised after them. A pipeline without a component that writes
    constituents (``doc.spans``) is refused before anything is parsed."""
    from dataclasses import replace

    import spacy
    from ..errors import StructPrefError
    from ..progress import progress_bar
    from ..saving import atomic_file
    from ..scoring import evalb
    from ..scoring.parseval import COLLINS, EvalbStopped
    from ..trees.doc import doc_to_tree, read_docs

    nlp = spacy.load(model)
    if not any("doc.spans" in nlp.get_pipe_meta(name).assigns for name in nlp.pipe_names):
        raise StructPrefError(f"{model} has no component that writes constituents (doc.spans), only "
                              f"{nlp.pipe_names or 'no components'}: add a forest_parser, parse_reranker or "
                              "attachment_predictor")
    gold_docs = read_docs(data_path, nlp.vocab)
    golds = [doc_to_tree(d) for d in gold_docs]
    if any(g is None for g in golds):
        raise StructPrefError(f"{data_path} has Docs without gold constituents")
    # Parse the gold tokenisation: re-tokenising the text could change the words.
    texts = (_words_doc(nlp, d) for d in gold_docs)
    tests = [doc_to_tree(doc) for doc in progress_bar(nlp.pipe(texts, batch_size=batch_size), total=len(gold_docs),
                                                      desc="parsing", unit="sent", disable=None)]
    try:
        result = evalb(golds, tests, replace(COLLINS, max_error=max_errors))
    except EvalbStopped as stop:
        _errors(stop.result)
        raise
    _errors(result)
    msg.divider(f"PARSEVAL: {model} on {data_path}")
    print(result.table())
    if output is not None:
        with atomic_file(output) as tmp:
            srsly.write_json(tmp, {"all": result.all.as_dict(), f"len<={result.cutoff}": result.short.as_dict()})
        msg.good(f"Scores written to {output}")
    return result


def _errors(result) -> None:
    """EVALB's error lines, on stderr as EVALB writes them."""
    for _, message in result.messages:
        print(message, file=sys.stderr)


def _words_doc(nlp, doc):
    from spacy.tokens import Doc

    return Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])

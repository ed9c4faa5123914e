"""PARSEVAL evaluation of any pipeline that writes ``doc.spans["constituents"]``."""
from pathlib import Path
from typing import Optional

import srsly
from wasabi import msg


def evaluate_parse(model: str, data_path: Path, output: Optional[Path] = None, batch_size: int = 32):
    import spacy
    from spacy.tokens import DocBin
    from tqdm import tqdm

    from ..errors import StructPrefError
    from ..scoring import evalb
    from ..trees.doc import doc_to_tree

    nlp = spacy.load(model)
    gold_docs = [d for d in DocBin().from_disk(data_path).get_docs(nlp.vocab)]
    golds = [doc_to_tree(d) for d in gold_docs]
    if any(g is None for g in golds):
        raise StructPrefError(f"{data_path} has Docs without gold constituents")
    # Parse the gold tokenisation: re-tokenising the text could change the words.
    texts = (_words_doc(nlp, d) for d in gold_docs)
    tests = [doc_to_tree(doc) for doc in tqdm(nlp.pipe(texts, batch_size=batch_size), total=len(gold_docs),
                                              desc="parsing", unit="sent", disable=None)]
    result = evalb(golds, tests)
    msg.divider(f"PARSEVAL: {model} on {data_path}")
    print(result.table())
    if output is not None:
        srsly.write_json(output, {"all": result.all.as_dict(), f"len<={result.cutoff}": result.short.as_dict()})
        msg.good(f"Scores written to {output}")
    return result


def _words_doc(nlp, doc):
    from spacy.tokens import Doc

    return Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])

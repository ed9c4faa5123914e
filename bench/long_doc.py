"""A 10,000-token Doc through the whole pipeline: ``distro_tagger``,
``forest_parser`` (PCFG), ``parse_reranker`` and ``attachment_predictor``,
each with its default length bound, so that the Doc is tagged (linear time)
and then falls back at the parser's ``max_length`` (100: the flat tree, one
candidate, which the reranker keeps unscored) and at the attachment
predictor's (300: the flat tree of the tags, every word a fallback step).

The components are small and quickly trained on the first ``--n-train``
short PTB-sample training trees (the tagger for ``--epochs`` passes, the
reranker's jackknifed lists over 2 folds); the pipeline is saved, then a
fresh process loads it and runs the Doc (PTB-sample dev words, repeated to
``--tokens``), so that its peak resident memory is that of using the
pipeline. The last line reads

    TOKENS tokens: X.X s, peak Y MB (load and run); fallbacks: parser too long P, reranked lists of one R,
    attachment too long A (W fallback words)

    NLTK_DATA=../shared/nltk_data python bench/long_doc.py [--tokens 10000] [--n-train 200] [--model DIR]
"""
import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import spacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.corpora import corpus_docs


def train(n_train: int, epochs: int):
    """The four components, trained on ``n_train`` short PTB-sample trees."""
    nlp = spacy.blank("en")
    nlp.add_pipe("distro_tagger")
    nlp.add_pipe("forest_parser", config={"k": 5, "store_forest": False})
    nlp.add_pipe("parse_reranker", config={"k": 5, "n_folds": 2, "n_jobs": 1})
    nlp.add_pipe("attachment_predictor")
    gold = [d for d in corpus_docs("ptb", "train", nlp.vocab) if len(d) <= 15][:n_train]
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in gold]
    nlp.initialize(lambda: examples)
    for _ in range(epochs):
        for b in range(0, len(examples), 20):
            nlp.update(examples[b:b + 20], losses={})
    return nlp


def run(model: Path, tokens: int) -> None:
    """Load ``model`` and parse one Doc of ``tokens`` dev words (this process's peak memory is the figure)."""
    from spacy_structpref.components.attachment_predictor import FALLBACK_KEY as ATTACH_FLAG
    from spacy_structpref.components.forest_parser import FALLBACK_KEY as PARSER_FLAG

    nlp = spacy.load(model)
    words = [t.text for d in corpus_docs("ptb", "dev", nlp.vocab) for t in d]
    words = (words * (tokens // len(words) + 1))[:tokens]
    start = time.perf_counter()
    doc = nlp(Doc(nlp.vocab, words=words))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    unscored = int(doc._.rerank is not None and len(doc._.rerank["scores"]) == 1)
    print(f"{len(doc)} tokens: {seconds:.1f} s, peak {peak:.0f} MB (load and run); fallbacks: parser too long "
          f"{int(doc.user_data.get(PARSER_FLAG) == 'too long')}, reranked lists of one {unscored}, attachment "
          f"too long {int(doc.user_data.get(ATTACH_FLAG) == 'too long')} ({doc._.attach_fallbacks} fallback words)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=10_000)
    ap.add_argument("--n-train", type=int, default=200, help="short training trees for every component")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--model", type=Path, default=None, help="a trained pipeline to use instead")
    ap.add_argument("--run", action="store_true", help=argparse.SUPPRESS)  # the measuring process
    args = ap.parse_args()
    if args.run:
        run(args.model, args.tokens)
        return
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            start = time.process_time()
            model = Path(tmp) / "pipeline"
            train(args.n_train, args.epochs).to_disk(model)
            print(f"trained on {args.n_train} trees in {time.process_time() - start:.0f} CPU-s")
        subprocess.run([sys.executable, __file__, "--run", "--model", str(model), "--tokens", str(args.tokens)],
                       check=True)


if __name__ == "__main__":
    main()

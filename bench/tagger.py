"""Tagging speed of the DISTRO tagger against spaCy's ``tagger`` with the same
tok2vec, measured in the same run, and sparse DISTRO's speed; optionally the
effective rank of A of trained DISTRO pipelines against their λ2.

    NLTK_DATA=/work/shared/nltk_data python bench/tagger.py [--rounds 5] \
        [--ranks training/run1/model-best training/run2/model-best ...]

The machine is shared: each model is timed ``--rounds`` times, interleaved,
and the best round counts; the ratio is the figure to read.
"""
import argparse
import time
from pathlib import Path

import spacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structpref.components.distro_tagger  # noqa: F401  (registers the factory)
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.models.distro import effective_rank

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def pipeline_from(config_path: Path, spacy_tagger: bool = False):
    """A blank pipeline from one of our configs; with ``spacy_tagger``, spaCy's
    ``tagger`` over the very same tok2vec block instead of the distro_tagger."""
    config = spacy.util.load_config(config_path, interpolate=True)
    if spacy_tagger:
        tok2vec = config["components"]["distro_tagger"]["model"]["tok2vec"]
        config["components"] = {"tagger": {"factory": "tagger", "model": {
            "@architectures": "spacy.Tagger.v2", "nO": None, "normalize": False,
            "tok2vec": tok2vec}}}
        config["nlp"]["pipeline"] = ["tagger"]
        config["training"]["score_weights"] = {"tag_acc": 1.0}
    return spacy.util.load_model_from_config(config, auto_fill=True, validate=True)


def initialized(nlp, train_docs):
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in train_docs]
    nlp.initialize(lambda: examples)
    return nlp


def time_pipe(nlp, words, batch_size=256):
    docs = [Doc(nlp.vocab, words=w) for w in words]
    start = time.perf_counter()
    for _ in nlp.pipe(docs, batch_size=batch_size):
        pass
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ranks", nargs="*", default=[], help="trained DISTRO pipelines")
    args = parser.parse_args()

    vocab = spacy.blank("en").vocab
    train = corpus_docs("ptb", "train", vocab, limit=200)
    words = [[t.text for t in d] for d in corpus_docs("ptb", "test", vocab)]
    n_words = sum(len(w) for w in words)
    models = {
        "distro (tok2vec)": initialized(pipeline_from(CONFIGS / "distro_tok2vec.cfg"), train),
        "spaCy tagger (same tok2vec)": initialized(
            pipeline_from(CONFIGS / "distro_tok2vec.cfg", spacy_tagger=True), train),
        "distro (sparse)": initialized(pipeline_from(CONFIGS / "distro_sparse.cfg"), train),
    }
    for nlp in models.values():  # warm-up
        time_pipe(nlp, words[:50])
    best = {name: float("inf") for name in models}
    for _ in range(args.rounds):
        for name, nlp in models.items():
            best[name] = min(best[name], time_pipe(nlp, words))
    print(f"PTB test: {len(words)} sentences, {n_words} words; best of {args.rounds} rounds")
    for name in models:
        print(f"{name:30s} {n_words / best[name]:10.0f} words/s")
    ratio = best["spaCy tagger (same tok2vec)"] / best["distro (tok2vec)"]
    print(f"ratio distro / spaCy tagger (words/s): {ratio:.3f}")

    if args.ranks:
        print("\nlambda2    rank d   effective rank of A   model")
        for path in args.ranks:
            nlp = spacy.load(path)
            tagger = nlp.get_pipe("distro_tagger")
            A = tagger.label_matrix
            print(f"{tagger.cfg['nuclear_lambda']:<10g} {A.shape[0]:<8d} "
                  f"{effective_rank(A):<21d} {path}")


if __name__ == "__main__":
    main()

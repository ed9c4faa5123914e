"""Tagging speed of the DISTRO tagger against spaCy's ``tagger`` with the same
tok2vec, measured in the same run, and sparse DISTRO's speed; on Brown's fine
tagset (437 tags), sparse DISTRO and the one-hot SSVM with and without the tag
dictionary; optionally the effective rank of A of trained DISTRO pipelines
against their λ2.

    NLTK_DATA=../shared/nltk_data python bench/tagger.py [--rounds 5] [--only ptb|brown|ranks] \
        [--ranks training/run1/model-best training/run2/model-best ...]

``--synthetic`` instead runs the label-family benchmark
(:mod:`spacy_structpref.experiments.label_families`): DISTRO against the
one-hot SSVM, same features, SGD and number of epochs, on the generated
multiclass and sequence tasks of seeds 0, 1, 2, and ends with the line
``synthetic families: DISTRO X, SSVM Y, gain Z`` (test accuracy in %, the
mean over both tasks and the seeds). ``--tune`` first reruns the choice of
the settings on the dev task (seed 100) and uses what it picks.

Everything runs on one core (BLAS threads set to 1). The machine is shared:
each model is timed ``--rounds`` times, interleaved, and the best round
counts. The Brown models are initialized (labels and tag dictionary from all
of corpus/brown/train.spacy) but untrained: decoding work does not depend on
the weights.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core (before numpy is imported)

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import spacy  # noqa: E402
from spacy.tokens import Doc, DocBin  # noqa: E402
from spacy.training import Example  # noqa: E402

import spacy_structpref.components.factories  # noqa: F401,E402  (registers the factories)
from spacy_structpref.corpora import corpus_docs  # noqa: E402
from spacy_structpref.models.distro import effective_rank  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"


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


def best_times(models, words, rounds):
    """Best of ``rounds`` interleaved timings of every pipeline on ``words``."""
    for nlp in models.values():  # warm-up
        time_pipe(nlp, words[:50])
    best = {name: float("inf") for name in models}
    for _ in range(rounds):
        for name, nlp in models.items():
            best[name] = min(best[name], time_pipe(nlp, words))
    return best


def brown_speed(rounds):
    """Words/s on Brown's test split of sparse DISTRO (configs/distro_brown.cfg)
    and the one-hot SSVM (configs/ssvm_brown.cfg), each with the config's tag
    dictionary and without one."""
    vocab = spacy.blank("en").vocab
    train = list(DocBin().from_disk(ROOT / "corpus/brown/train.spacy").get_docs(vocab))
    words = [[t.text for t in d] for d in DocBin().from_disk(ROOT / "corpus/brown/test.spacy").get_docs(vocab)]
    tags = sorted({t.tag_ for d in train for t in d if t.tag_})
    models = {}
    for config in ("distro_brown", "ssvm_brown"):
        for with_dict in (True, False):
            nlp = pipeline_from(CONFIGS / f"{config}.cfg")
            tagger = nlp.get_pipe("distro_tagger")
            min_count = tagger.cfg["tag_dict_min_count"] if with_dict else None
            tagger.cfg["tag_dict_min_count"] = min_count
            examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in train]
            tagger.initialize(lambda: examples, nlp=nlp, labels=tags)
            label = (f"tag dictionary (min_count {min_count}, {len(tagger.tag_dictionary)} words)"
                     if with_dict else "no tag dictionary")
            models[f"{config}, {label}"] = nlp
    best = best_times(models, words, rounds)
    n_words = sum(len(w) for w in words)
    print(f"\nBrown test: {len(words)} sentences, {n_words} words, {len(tags)} tags; one core; "
          f"best of {rounds} rounds")
    for name in models:
        print(f"{name:70s} {n_words / best[name]:10.0f} words/s")


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
    parser.add_argument("--only", choices=("ptb", "brown", "ranks"), default=None,
                        help="time only PTB or only Brown, or nothing (ranks: --ranks only); default: both")
    parser.add_argument("--synthetic", action="store_true", help="the label-family benchmark only")
    parser.add_argument("--tune", action="store_true", help="with --synthetic: choose the settings on dev first")
    parser.add_argument("--seeds", default="0,1,2", help="with --synthetic: the task seeds")
    args = parser.parse_args()
    if args.synthetic:
        synthetic_families([int(s) for s in args.seeds.split(",")], args.tune)
        return
    if args.only in (None, "brown"):
        brown_speed(args.rounds)
    if args.only in (None, "ptb"):
        ptb_speed(args.rounds)
    if args.ranks:
        print_ranks(args.ranks)


def ptb_speed(rounds):
    """DISTRO (tok2vec and sparse) against spaCy's tagger on the PTB test split."""
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
    best = best_times(models, words, rounds)
    print(f"PTB test: {len(words)} sentences, {n_words} words; best of {rounds} rounds")
    for name in models:
        print(f"{name:30s} {n_words / best[name]:10.0f} words/s")
    ratio = best["spaCy tagger (same tok2vec)"] / best["distro (tok2vec)"]
    print(f"ratio distro / spaCy tagger (words/s): {ratio:.3f}")


def synthetic_families(seeds, tune):
    """DISTRO against the SSVM on the generated label-family tasks."""
    from spacy_structpref.corpora.label_families import KINDS
    from spacy_structpref.experiments import label_families as lf

    distro, ssvm = [], []
    for kind in KINDS:
        chosen = dict(lf.CHOSEN[kind])
        if tune:
            grids = {"ssvm": [lf.FamilySettings(lambda1=x) for x in (0.1, 0.3, 1.0, 3.0)],
                     "distro": [lf.FamilySettings(lambda1=x) for x in (1.0, 3.0)]
                     + [lf.FamilySettings(lambda2=x) for x in (0.01, 0.1)]}
            for model, grid in grids.items():
                runs = lf.choose_on_dev(kind, grid, onehot=model == "ssvm")
                for settings, run in runs:
                    print(f"  dev {kind} {model}: lambda1 {settings.lambda1:g}, lambda2 {settings.lambda2:g}: "
                          f"{run.accuracy:.2f}")
                chosen[model] = runs[0][0]
        result = lf.compare_on_family_task(kind, seeds, distro=chosen["distro"], ssvm=chosen["ssvm"])
        d, s = lf.mean_accuracy(result.distro), lf.mean_accuracy(result.ssvm)
        print(f"{kind}: DISTRO {d:.2f} (lambda1 {chosen['distro'].lambda1:g}, lambda2 {chosen['distro'].lambda2:g}; "
              f"effective rank {' '.join(str(r.rank) for r in result.distro)} of {result.distro[0].n_labels}; mean cosine within families "
              f"{sum(r.cosine_within for r in result.distro) / len(seeds):.2f}, across "
              f"{sum(r.cosine_across for r in result.distro) / len(seeds):.2f}), "
              f"SSVM {s:.2f} (lambda1 {chosen['ssvm'].lambda1:g}), gain {d - s:.2f}", flush=True)
        distro += result.distro
        ssvm += result.ssvm
    d, s = lf.mean_accuracy(distro), lf.mean_accuracy(ssvm)
    print(f"synthetic families: DISTRO {d:.2f}, SSVM {s:.2f}, gain {d - s:.2f}")


def print_ranks(paths):
    """λ2, d and the effective rank of A of each trained DISTRO pipeline."""
    print("\nlambda2    rank d   effective rank of A   model")
    for path in paths:
        tagger = spacy.load(path).get_pipe("distro_tagger")
        A = tagger.label_matrix
        print(f"{tagger.cfg['nuclear_lambda']:<10g} {A.shape[0]:<8d} {effective_rank(A):<21d} {path}")


if __name__ == "__main__":
    main()

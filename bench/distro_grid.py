"""Choose DISTRO's λ1 (the optimizer's ``L2``), λ2 (``nuclear_lambda``) and
label dimension d (``model.rank``), or the SSVM's λ1, by a small grid, as
Srikumar & Manning (2014, §5) choose theirs: on dev, or by cross-validation
on the training split, the accuracy of each point averaged over seeds; then
score the chosen point on test.

    NLTK_DATA=../shared/nltk_data python bench/distro_grid.py configs/distro_paper.cfg training/grid_ptb \\
        --lambda1 0.0001,0.001 --lambda2 0.1,1 [--rank null,31] [--seeds 0,1,2] [--jobs 2] \\
        [--folds corpus/ptb_folds] [--corpus basque] [--max-rank-share 0.7] [--use last|best] [--test] \\
        [--json metrics/grid.json] [-- --training.max_epochs 25 ...]

Every point of the grid and seed is one ``spacy train`` of the config
(``--system.seed S``), ``--jobs`` of them at a time, into
``OUTPUT/l1_<λ1>_l2_<λ2>[_rank_<d>]_seed_<S>``; a run whose ``model-last``
exists is read, not trained again. For each it reads the dev accuracy of
``model-best`` (spaCy's best dev checkpoint) and of ``model-last`` (the
end of the schedule), the effective rank of A in the model used (``--use``,
default ``last``: the protocol's output), and the mean cosine of the label
vectors within and across label families
(``scoring.label_space.family_closeness``).

With ``--folds DIR`` (the folds of ``python -m spacy_structpref
fold-corpora corpus/C/train.spacy DIR --folds K``) a point is scored by
cross-validation instead: one run per fold trained on ``fold_F/train.spacy``
(the dev split still picks its checkpoints) into ``.../fold_F``, its model
scored on the fold's held-out part, the accuracy pooled over the K held-out
parts (every training token scored once, where dev holds a few thousand);
the rank shown is the largest of the folds', the cosines their mean.

It prints every run and each point's mean over the seeds, and chooses the
point of the best mean score, among those whose runs all have a rank of at
most ``--max-rank-share`` of the number of labels when that is given. With
``--test`` it scores every seed of the chosen point on the test split
(``spacy evaluate --gold-preproc``; with ``--folds``, after training it on
the whole training split) and prints their mean and standard deviation;
``--json`` writes the runs, the choice and the test accuracies to a metrics
file. Extra arguments after ``--`` go to every ``spacy train``.
"""
import argparse
import itertools
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import mean, pstdev

import spacy

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.cli.common import single_threaded_environment
from spacy_structpref.cli.folds import fold_numbers
from spacy_structpref.scoring.label_space import family_closeness
from spacy_structpref.trees.doc import read_docs


def run_dir(output: Path, point, seed: str) -> Path:
    lambda1, lambda2, rank = point
    rank_part = "" if rank is None else f"_rank_{rank}"
    return output / f"l1_{lambda1}_l2_{lambda2}{rank_part}_seed_{seed}"


def train(config: str, path: Path, train_path: Path, dev_path: Path, point, seed: str, extra, env) -> None:
    if (path / "model-last").exists():
        return
    lambda1, lambda2, rank = point
    rank_override = [] if rank is None else ["--components.distro_tagger.model.rank", rank]
    command = [sys.executable, "-m", "spacy", "train", config, "--output", str(path),
               "--paths.train", str(train_path), "--paths.dev", str(dev_path),
               "--training.optimizer.L2", lambda1, "--components.distro_tagger.nuclear_lambda", lambda2,
               *rank_override, "--system.seed", seed, *extra]
    print(" ".join(command), flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f"{path.name}.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, env=env)


def train_all(jobs: int, config: str, trainings, dev_path: Path, extra) -> None:
    """Every ``(path, train_path, point, seed)`` of ``trainings``, ``jobs`` at a time."""
    env = single_threaded_environment() if jobs > 1 else None
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda t: train(config, t[0], t[1], dev_path, t[2], t[3], extra, env), trainings))


def dev_accuracy(model: Path) -> float:
    return 100 * json.loads((model / "meta.json").read_text())["performance"]["tag_acc"]


def accuracy(model: Path, corpus_path: Path, metrics: Path) -> float:
    """``spacy evaluate --gold-preproc`` of ``model`` on ``corpus_path``, kept in ``metrics``."""
    if not metrics.exists():
        subprocess.run([sys.executable, "-m", "spacy", "evaluate", str(model), str(corpus_path),
                        "--gold-preproc", "--output", str(metrics)], check=True, stdout=subprocess.DEVNULL)
    return 100 * json.loads(metrics.read_text())["tag_acc"]


def n_tokens(corpus_path: Path, vocab) -> int:
    return sum(len(doc) for doc in read_docs(corpus_path, vocab))


def label_space(model: Path) -> dict:
    tagger = spacy.load(model).get_pipe("distro_tagger")
    closeness = family_closeness(tagger.labels, tagger.label_similarities()) or {}
    return {"rank": tagger.effective_rank, "labels": len(tagger.labels),
            "within": closeness.get("cosine_within"), "across": closeness.get("cosine_across")}


def fold_dirs(folds: Path) -> list:
    """The fold folders of ``fold-corpora``, each with its held-out part."""
    dirs = [folds / f"fold_{f}" for f in fold_numbers(folds)]
    missing = [d for d in dirs if not (d / "held_out.spacy").is_file()]
    if missing:
        sys.exit(f"{missing[0]} has no held_out.spacy: make the folds with "
                 f"python -m spacy_structpref fold-corpora corpus/C/train.spacy {folds} --folds K")
    return dirs


def cross_validated(path: Path, folds: list, sizes: list, use: str) -> dict:
    """A point's runs on the folds under ``path``: the held-out accuracy
    pooled over the folds, the largest rank and the mean cosines."""
    models = [path / fold.name / f"model-{use}" for fold in folds]
    scores = [accuracy(m, fold / "held_out.spacy", m.parent / f"held_out_{use}.json") for m, fold in zip(models, folds)]
    spaces = [label_space(m) for m in models]
    cosines = {key: (None if any(s[key] is None for s in spaces) else mean(s[key] for s in spaces))
               for key in ("within", "across")}
    return {"held_out": sum(a * n for a, n in zip(scores, sizes)) / sum(sizes),
            "rank": max(s["rank"] for s in spaces), "labels": spaces[0]["labels"], **cosines}


def mean_sd(values) -> str:
    return f"{mean(values):.2f} ± {pstdev(values):.2f}"


def cosines(run: dict) -> str:
    return "-" if run["within"] is None else f"{run['within']:6.2f}  {run['across']:6.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("output", type=Path)
    parser.add_argument("--corpus", default="ptb")
    parser.add_argument("--lambda1", default="0.0001", help="comma-separated values of the optimizer's L2")
    parser.add_argument("--lambda2", default="1.0", help="comma-separated values of nuclear_lambda")
    parser.add_argument("--rank", default=None,
                        help="comma-separated values of model.rank (the label dimension d; null: one per label); "
                             "left out, the config's")
    parser.add_argument("--seeds", default="0", help="comma-separated values of system.seed, averaged per point")
    parser.add_argument("--folds", type=Path, default=None,
                        help="choose by cross-validation over these folds of the training split (fold-corpora)")
    parser.add_argument("--jobs", type=int, default=1, help="trainings run at a time (one thread each)")
    parser.add_argument("--use", choices=("last", "best"), default="last")
    parser.add_argument("--max-rank-share", type=float, default=None)
    parser.add_argument("--test", action="store_true", help="score the chosen point on the test split")
    parser.add_argument("--json", type=Path, default=None, help="write the grid, the choice and the test score here")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    corpus = Path("corpus") / args.corpus
    args.output.mkdir(parents=True, exist_ok=True)
    ranks = [None] if args.rank is None else args.rank.split(",")
    seeds = args.seeds.split(",")
    points = list(itertools.product(args.lambda1.split(","), args.lambda2.split(","), ranks))
    runs = [(point, seed, run_dir(args.output, point, seed)) for point in points for seed in seeds]
    if args.folds is None:
        train_all(args.jobs, args.config, [(path, corpus / "train.spacy", p, seed) for p, seed, path in runs],
                  corpus / "dev.spacy", extra)
        rows = [{"point": p, "seed": seed, "best": dev_accuracy(path / "model-best"),
                 "last": dev_accuracy(path / "model-last"), **label_space(path / f"model-{args.use}"),
                 "path": path} for p, seed, path in runs]
        key, header = args.use, "dev best   dev last  "
    else:
        folds = fold_dirs(args.folds)
        vocab = spacy.blank("xx").vocab
        sizes = [n_tokens(fold / "held_out.spacy", vocab) for fold in folds]
        train_all(args.jobs, args.config, [(path / fold.name, fold / "train.spacy", p, seed)
                                           for p, seed, path in runs for fold in folds], corpus / "dev.spacy", extra)
        rows = [{"point": p, "seed": seed, **cross_validated(path, folds, sizes, args.use), "path": path}
                for p, seed, path in runs]
        key, header = "held_out", f"held-out ({len(folds)} folds)"
    print(f"\n{args.corpus}, {args.config} (rank and cosines of model-{args.use})")
    print(f"lambda1    lambda2    d      seed  {header}  rank      within  across")
    for r in rows:
        lambda1, lambda2, rank = r["point"]
        score = f"{r['best']:<10.2f} {r['last']:<10.2f}" if args.folds is None else f"{r['held_out']:<21.2f}"
        print(f"{lambda1:<10} {lambda2:<10} {str(rank or '-'):<6} {r['seed']:<5} {score} "
              f"{r['rank']:>3}/{r['labels']:<5} {cosines(r)}")
    by_point = {p: [r for r in rows if r["point"] == p] for p in points}
    print(f"\nmean over seeds {','.join(seeds)}:")
    for p, point_rows in by_point.items():
        print(f"lambda1 {p[0]}, lambda2 {p[1]}, d {p[2] or '-'}: {key} {mean_sd([r[key] for r in point_rows])}, "
              f"ranks {[r['rank'] for r in point_rows]}")
    allowed = [p for p, point_rows in by_point.items()
               if args.max_rank_share is None or all(r["rank"] <= args.max_rank_share * r["labels"]
                                                     for r in point_rows)]
    if not allowed:
        print(f"no point has an effective rank of at most {args.max_rank_share} of the labels")
        return
    score = {p: mean(r[key] for r in by_point[p]) for p in allowed}
    chosen = max(allowed, key=score.get)
    chosen_rows = by_point[chosen]
    print(f"chosen: lambda1 {chosen[0]}, lambda2 {chosen[1]}, d {chosen[2] or '-'} "
          f"({key} {score[chosen]:.2f}, ranks {[r['rank'] for r in chosen_rows]})")
    tests = None
    if args.test:
        paths = [r["path"] for r in chosen_rows]
        if args.folds is not None:
            train_all(args.jobs, args.config, [(path, corpus / "train.spacy", chosen, r["seed"])
                                               for path, r in zip(paths, chosen_rows)], corpus / "dev.spacy", extra)
        tests = [accuracy(path / f"model-{args.use}", corpus / "test.spacy", path / f"test_{args.use}.json")
                 for path in paths]
        print(f"test: {mean_sd(tests)} (seeds {', '.join(f'{s} {t:.2f}' for s, t in zip(seeds, tests))})")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        plain = [{"lambda1": r["point"][0], "lambda2": r["point"][1], "rank_setting": r["point"][2],
                  **{k: str(v) if k == "path" else v for k, v in r.items() if k != "point"}} for r in rows]
        args.json.write_text(json.dumps({
            "corpus": args.corpus, "config": args.config, "use": args.use, "extra": extra, "seeds": seeds,
            "selection": "dev" if args.folds is None else "cross-validation",
            "folds": None if args.folds is None else str(args.folds),
            "grid": plain, "chosen": {"lambda1": chosen[0], "lambda2": chosen[1], "rank_setting": chosen[2],
                                      "score": score[chosen],
                                      "ranks": [r["rank"] for r in chosen_rows], "labels": chosen_rows[0]["labels"]},
            "test_accs": tests, "test_acc": None if tests is None else mean(tests)}, indent=2))


if __name__ == "__main__":
    main()

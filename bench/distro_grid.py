"""Choose DISTRO's λ1 (the optimizer's ``L2``) and λ2 (``nuclear_lambda``),
or the SSVM's λ1, on dev by a small grid, as Srikumar & Manning (2014, §5)
choose theirs; then score the chosen run on test.

    NLTK_DATA=../shared/nltk_data python bench/distro_grid.py configs/distro_paper.cfg training/grid_ptb \\
        --lambda1 0.0001,0.001 --lambda2 0.1,1 [--corpus basque] [--max-rank-share 0.7] \\
        [--use last|best] [--test] [--json metrics/grid.json] [-- --training.max_epochs 25 ...]

Every point of the grid is one ``spacy train`` of the config, run one
after another, into ``OUTPUT/l1_<λ1>_l2_<λ2>``; a point whose ``model-last``
exists is read, not trained again. For each it prints the dev accuracy of
``model-best`` (spaCy's best dev checkpoint) and of ``model-last`` (the
end of the schedule), the effective rank of A in the model used
(``--use``, default ``last``: the protocol's output), and the mean cosine
of the label vectors within and across label families
(``scoring.label_space.family_closeness``). It chooses the point of the
best dev accuracy, among those whose rank is at most ``--max-rank-share``
of the number of labels when that is given, and with ``--test`` scores the
chosen model on the test split (``spacy evaluate --gold-preproc``);
``--json`` writes the grid, the choice and the test accuracy to a metrics
file. Extra arguments after ``--`` go to every ``spacy train``.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import spacy

import spacy_structpref.components.factories  # noqa: F401  (registers the factories)
from spacy_structpref.scoring.label_space import family_closeness


def point_dir(output: Path, lambda1: str, lambda2: str) -> Path:
    return output / f"l1_{lambda1}_l2_{lambda2}"


def train(config: str, path: Path, corpus: str, lambda1: str, lambda2: str, extra) -> None:
    if (path / "model-last").exists():
        return
    command = [sys.executable, "-m", "spacy", "train", config, "--output", str(path),
               "--paths.train", f"corpus/{corpus}/train.spacy", "--paths.dev", f"corpus/{corpus}/dev.spacy",
               "--training.optimizer.L2", lambda1, "--components.distro_tagger.nuclear_lambda", lambda2, *extra]
    print(" ".join(command), flush=True)
    with open(path.parent / f"{path.name}.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)


def dev_accuracy(model: Path) -> float:
    return 100 * json.loads((model / "meta.json").read_text())["performance"]["tag_acc"]


def label_space(model: Path) -> dict:
    tagger = spacy.load(model).get_pipe("distro_tagger")
    closeness = family_closeness(tagger.labels, tagger.label_similarities()) or {}
    return {"rank": tagger.effective_rank, "labels": len(tagger.labels),
            "within": closeness.get("cosine_within"), "across": closeness.get("cosine_across")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("output", type=Path)
    parser.add_argument("--corpus", default="ptb")
    parser.add_argument("--lambda1", default="0.0001", help="comma-separated values of the optimizer's L2")
    parser.add_argument("--lambda2", default="1.0", help="comma-separated values of nuclear_lambda")
    parser.add_argument("--use", choices=("last", "best"), default="last")
    parser.add_argument("--max-rank-share", type=float, default=None)
    parser.add_argument("--test", action="store_true", help="score the chosen point on the test split")
    parser.add_argument("--json", type=Path, default=None, help="write the grid, the choice and the test score here")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    args.output.mkdir(parents=True, exist_ok=True)
    rows = []
    for lambda1 in args.lambda1.split(","):
        for lambda2 in args.lambda2.split(","):
            path = point_dir(args.output, lambda1, lambda2)
            train(args.config, path, args.corpus, lambda1, lambda2, extra)
            space = label_space(path / f"model-{args.use}")
            rows.append({"lambda1": lambda1, "lambda2": lambda2, "best": dev_accuracy(path / "model-best"),
                         "last": dev_accuracy(path / "model-last"), **space, "path": path})
    print(f"\n{args.corpus} dev, {args.config} (rank and cosines of model-{args.use})")
    print("lambda1    lambda2    dev best   dev last   rank      within  across")
    for r in rows:
        cosines = "-" if r["within"] is None else f"{r['within']:6.2f}  {r['across']:6.2f}"
        print(f"{r['lambda1']:<10} {r['lambda2']:<10} {r['best']:<10.2f} {r['last']:<10.2f} "
              f"{r['rank']:>3}/{r['labels']:<5} {cosines}")
    allowed = [r for r in rows if args.max_rank_share is None or r["rank"] <= args.max_rank_share * r["labels"]]
    if not allowed:
        print(f"no point has an effective rank of at most {args.max_rank_share} of the labels")
        return
    chosen = max(allowed, key=lambda r: r[args.use])
    print(f"chosen: lambda1 {chosen['lambda1']}, lambda2 {chosen['lambda2']} (dev {chosen[args.use]:.2f}, "
          f"rank {chosen['rank']}/{chosen['labels']})")
    test = None
    if args.test:
        metrics = chosen["path"] / f"test_{args.use}.json"
        subprocess.run([sys.executable, "-m", "spacy", "evaluate", str(chosen["path"] / f"model-{args.use}"),
                        f"corpus/{args.corpus}/test.spacy", "--gold-preproc", "--output", str(metrics)],
                       check=True, stdout=subprocess.DEVNULL)
        test = 100 * json.loads(metrics.read_text())["tag_acc"]
        print(f"test: {test:.2f}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        plain = [{key: str(value) if key == "path" else value for key, value in r.items()} for r in rows]
        args.json.write_text(json.dumps({"corpus": args.corpus, "config": args.config, "use": args.use,
                                         "extra": extra, "grid": plain, "chosen": plain[rows.index(chosen)],
                                         "test_acc": test}, indent=2))


if __name__ == "__main__":
    main()

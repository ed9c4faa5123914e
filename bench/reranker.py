"""Parse reranking on the PTB sample (Menchetti et al. 2005, §6.3.2 and
Table 3; Collins & Duffy 2002), end to end.

1. k-best lists (and pruned forests): the train split jackknifed
   (``--folds`` folds, each parsed by the grammar of the others), dev and
   test by the grammar of the whole train split; cached under ``--cache``
   (reruns read them). With ``--parser-model`` (a trained pipeline, e.g. the
   span CRF's) dev and test are parsed by its ``forest_parser`` and fold F of
   the train split by ``--fold-models``/fold_F/model-last, trained without
   fold F (``fold-corpora`` cuts the folds, ``spacy train`` trains them).
2. The scorers, each trained on the jackknifed train lists: the kernel voted
   perceptron (VP) with the subset-tree kernel, pairwise and setwise; with
   the composite kernel ``K_λ + b·log p·log p'`` (eq. 17), λ and b tuned on
   dev (setwise) from a small grid; the recursive network with the
   ``a·log p + b`` input, setwise and pairwise; the linear reranker over
   hashed tree features with log p and the constituent count (Charniak &
   Johnson 2005; its L2 penalty on dev), alone and as the mean of
   ``--feature-members`` seeds; epochs chosen on dev. The
   forest kernel (Zhang et al. 2010) and its tempered form (α on dev) over
   each candidate's bracket-compatible sub-forest, beside the tree kernel on
   the same data: the first ``--forest-sentences`` train lists, the top
   ``--forest-k`` candidates (one forest kernel per support item and
   candidate is too slow for all lists).
3. Test: one table in Table 3's form (PCFG 1-best, every scorer, oracle),
   timings (VP training on the whole train split, reranking the 413 test
   lists, the DAG sharing's speed-up over plain kernel evaluation of the
   same candidates), and as the last line the best gain in F1 (≤ 40 words).

    NLTK_DATA=../shared/nltk_data python bench/reranker.py [--cache training/reranker_lists] [--json metrics/reranker.json]

``--max-steps N`` (N > 0) is a smoke run for CI: each split cut to its first
N sentences, no tuning.
"""
import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import srsly
from thinc.api import Adam

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.kernels import TreeBatch, dag_kernel_block, gram
from spacy_structpref.learners import (CompositeKernel, EnsembleLearner, FeatureRanker, ForestKernel,
                                       KernelPerceptron, RecursiveNetLearner, Schedule, TreeKernel, fit)
from spacy_structpref.experiments.reranking_tables import evaluate_row, one_best_row, oracle_row, print_rows
from spacy_structpref.reranking import (FORMAT_VERSION, fold_lists, jackknife_lists, load_items, parse_lists,
                                        parser_from_trees, save_items)
from spacy_structpref.reranking.scorers import candidate_set, first_k, rerank, training_sets
from spacy_structpref.trees import SymbolTable

LAMBDAS, BS = (0.2, 0.3), (0.003, 0.01, 0.03)  # the composite kernel's dev grid
ALPHAS = (0.5, 2.0)  # the tempered forest kernel's dev grid
L2S = (0.001, 0.01)  # the feature ranker's dev grid
SEED_STEP = 1000  # the feature rankers' seeds: 0, 1000, 2000, …


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pipeline_parser(path: Path, samples: int = 0):
    """The parser of a trained pipeline's ``forest_parser``, its lists
    filled from ``samples`` dropout samples (a span CRF's; 0: its k best)."""
    import spacy

    return spacy.load(path, config={"components": {"forest_parser": {"samples": samples}}}).get_pipe(
        "forest_parser").parser


def cached_lists(cache: Path, k: int, n_folds: int, n_jobs: int, limit=None, forests: bool = False,
                 symbols: SymbolTable = None, parser_model: Path = None, fold_models: Path = None, samples: int = 0):
    """``{split: items}``: train jackknifed, dev and test parsed by the train
    grammar (or by the pipelines ``parser_model`` and
    ``fold_models/fold_F/model-last``, each fold's trained to the end of its
    schedule). Read from ``cache`` (``{split}.msgpack`` with forests,
    ``{split}.trees.msgpack`` without: quick to read) when ``meta.json``
    there has these settings, else parsed and saved there. Forests are read
    into ``symbols``. ``samples``: the span CRFs' lists are filled from
    that many dropout samples."""
    meta = {"k": k, "n_folds": n_folds, "limit": limit, "parser": str(parser_model) if parser_model else "pcfg",
            "samples": samples}
    stored = srsly.read_json(cache / "meta.json") if (cache / "meta.json").exists() else {}
    fresh = {key: stored.get(key, 0 if key == "samples" else None) for key in meta} != meta  # caches before samples hold 0
    rescored = stored.get("format") != FORMAT_VERSION  # lists of an older format: scores recomputed on load
    symbols = symbols if symbols is not None else SymbolTable()
    train_trees = ptb_trees("train")[:limit]
    out, parser = {}, None
    for split in ("train", "dev", "test"):
        full, light = cache / f"{split}.msgpack", cache / f"{split}.trees.msgpack"
        t0 = time.perf_counter()
        if not fresh and (light.exists() or full.exists()):
            path = full if forests or not light.exists() else light
            items = load_items(path, symbols)
            print(f"{split}: {len(items)} lists read from {path} ({time.perf_counter() - t0:.0f} s)", flush=True)
            if rescored and path == full:
                save_items(full, items)
            if rescored or not light.exists():
                _save_light(light, items)
            out[split] = items
            continue
        if split == "train" and parser_model:
            parsers = [pipeline_parser(fold_models / f"fold_{f}" / "model-last", samples) for f in range(n_folds)]
            items = fold_lists(train_trees, parsers, k=k, with_forest=True, symbols=symbols)
        elif split == "train":
            items = jackknife_lists(train_trees, n_folds=n_folds, k=k, with_forest=True, n_jobs=n_jobs,
                                    symbols=symbols)
        elif parser_model:
            items = parse_lists(ptb_trees(split)[:limit], pipeline_parser(parser_model, samples), k=k, with_forest=True,
                                progress=True, symbols=symbols)
        else:
            parser = parser or parser_from_trees(train_trees)
            items = parse_lists(ptb_trees(split)[:limit], parser, k=k, with_forest=True, n_jobs=n_jobs,
                                progress=True, symbols=symbols)
        print(f"{split}: {len(items)} lists parsed in {time.perf_counter() - t0:.0f} s (load {load()})", flush=True)
        save_items(full, items)
        _save_light(light, items)
        out[split] = items if forests else [replace(item, forest=None) for item in items]
    if fresh or not rescored or forests:  # old forest files are rewritten only when they are read
        srsly.write_json(cache / "meta.json", {**meta, "format": FORMAT_VERSION})
    return out


def _save_light(path: Path, items) -> None:
    save_items(path, [replace(item, forest=None) for item in items])


# ------------------------------------------------------------------ scorers
def f1_40(row) -> float:
    return row["<=40"]["F1"]


def dev_f1(learner, dev) -> float:
    return f1_40(evaluate_row("dev", dev, rerank(learner, dev)))


def by_epochs(learner, schedule: Schedule, sets, gold, dev, label: str):
    """Train with ``schedule``, scoring dev after each epoch; the learner is
    left as it was after its best dev epoch (``fit`` keeps it). Returns the
    training seconds up to that epoch, the epoch and its dev F1 (≤ 40)."""
    def dev_error(learner) -> float:
        learner.finish_training()  # the perceptron's support packed: dev reranks with one kernel block per list
        score = dev_f1(learner, dev)
        print(f"  dev: {label}, epoch {len(learner.log.seconds)}: F1 ≤ 40 {score:.2f} "
              f"({learner.log.seconds[-1]:.0f} s)", flush=True)
        return -score

    fit(learner, sets, gold, schedule=replace(schedule, patience=0), validation=dev_error)
    best = learner.log.best_epoch
    return learner.log.seconds[best - 1], best, -learner.log.validation[best - 1]


def train_vp(kernel, loss: str, train, dev, epochs: int, gap: float, label: str):
    """A voted perceptron trained on the train lists (the sets shuffled from
    the second epoch on), epochs chosen on dev."""
    learner = KernelPerceptron(kernel, loss=loss)
    sets, gold = training_sets(learner, train, gap)
    return (learner, *by_epochs(learner, Schedule(epochs=epochs, progress=False), sets, gold, dev, label))


def train_rnn(loss: str, train, dev, epochs: int, gap: float, a: float = 1.0):
    """The recursive network with the ``a·log p`` input, epochs chosen on dev."""
    learner = RecursiveNetLearner(loss=loss, log_p_input=True, log_p_a=a)
    sets, gold = training_sets(learner, train, gap)
    schedule = Schedule(epochs=epochs, optimizer=Adam(0.001), progress=False)
    return (learner, *by_epochs(learner, schedule, sets, gold, dev, f"RNN {loss}"))


# ------------------------------------------------------------------ timings
def train_features(train, dev, epochs: int, gap: float, l2: float, seed: int = 0):
    """The feature ranker (Charniak & Johnson 2005) with penalty ``l2``, its
    epochs chosen on dev."""
    learner = FeatureRanker(l2=l2, seed=seed)
    sets, gold = training_sets(learner, train, gap)
    return (learner, *by_epochs(learner, Schedule(epochs=epochs, progress=False), sets, gold, dev,
                                f"features l2={l2} seed {seed}"))


def feature_rows(args, train, dev, test, timings):
    """The feature ranker with l2 chosen on dev, and the mean of
    ``--feature-members`` of them trained alike from other seeds."""
    grid = L2S[:1] if args.max_steps else L2S
    runs = [train_features(train, dev, args.feature_epochs, args.gap, l2) for l2 in grid]
    best = max(range(len(grid)), key=lambda i: runs[i][3])
    l2, (learner, secs, epoch, _) = grid[best], runs[best]
    print(f"feature ranker: l2 = {l2} (dev), {epoch} epoch(s)", flush=True)
    rows = [tested("features (C&J), setwise", learner, test, timings,
                   f"trained in {secs:.0f} s ({epoch} epoch(s), l2 = {l2})")]
    if args.feature_members > 1:
        others = [train_features(train, dev, args.feature_epochs, args.gap, l2, seed=i * SEED_STEP)
                  for i in range(1, args.feature_members)]
        ensemble = EnsembleLearner([learner] + [run[0] for run in others])
        secs += sum(run[1] for run in others)
        rows.append(tested(f"features (C&J) ×{args.feature_members} seeds", ensemble, test, timings,
                           f"trained in {secs:.0f} s"))
    return rows


def dag_speedup(learner, items, n: int = 20):
    """Seconds to score ``n`` lists' candidates against the trained support
    of a composite-kernel perceptron, with its weights folded into the
    support's DAG (what the reranker does) and as a plain kernel matrix
    between the same support trees (converted once) and candidates; and the
    lists' own kernel blocks (pairwise updates), on DAGs and plain."""
    kernel, chunk = learner.kernel.tree_kernel, learner.chunks[0]
    coef = learner._coefficients(chunk, learner.average)
    support = TreeBatch([tree for tree, _ in chunk.items], kernel.symbols)
    sample = [item for item in items if len(item) > 1][:n]
    times = {}
    t0 = time.perf_counter()
    for item in sample:
        kernel.weighted_sums([(chunk.prepared[0], coef)],
                             candidate_set(learner, item.candidates, item.log_probs).trees)
    times["support, DAG"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for item in sample:
        coef @ gram(support, TreeBatch(item.candidates, kernel.symbols), lam=kernel.lam, n_threads=1, progress=False)
    times["support, plain"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for item in sample:
        dag_kernel_block(candidate_set(learner, item.candidates, item.log_probs).trees, None, kernel.lam,
                         normalize=True)
    times["blocks, DAG"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for item in sample:
        gram(TreeBatch(item.candidates, kernel.symbols), lam=kernel.lam, n_threads=1, progress=False)
    times["blocks, plain"] = time.perf_counter() - t0
    return (f"DAG sharing on {len(sample)} test lists: against the {len(support)} support trees "
            f"{times['support, plain']:.2f} s plain, {times['support, DAG']:.2f} s on DAGs "
            f"({times['support, plain'] / times['support, DAG']:.1f}x); the lists' own blocks "
            f"{times['blocks, plain']:.2f} s plain, {times['blocks, DAG']:.2f} s on DAGs "
            f"({times['blocks, plain'] / times['blocks, DAG']:.1f}x)")


def tested(name, learner, test, timings, note):
    """The learner's test row; the seconds it takes to rerank the test lists go to ``timings``."""
    t0 = time.perf_counter()
    row = evaluate_row(name, test, rerank(learner, test))
    timings.append(f"{name}: {note}; reranked {len(test)} test lists in {time.perf_counter() - t0:.1f} s")
    print(timings[-1], flush=True)
    return row


def forest_rows(args, lam, b, timings):
    """The forest-kernel rows (Zhang et al. 2010; tempered by α, an extension
    of this package) and the tree kernel on the same data: a forest kernel
    costs one evaluation per support forest and candidate, so these train on
    the first ``--forest-sentences`` train lists, rerank the top
    ``--forest-k``, and choose α on the first 100 dev lists."""
    symbols = SymbolTable()
    lists = cached_lists(args.cache, args.k, args.folds, args.n_jobs, args.max_steps or None, forests=True,
                         symbols=symbols, parser_model=args.parser_model, fold_models=args.fold_models,
                         samples=args.samples)
    n, k = args.forest_sentences, args.forest_k
    train, dev, test = first_k(lists["train"][:n], k), first_k(lists["dev"][:100], k), first_k(lists["test"], k)
    tag = f"{len(train)}s k{k}"
    rows = []
    learner, secs, epoch, _ = train_vp(CompositeKernel(TreeKernel(lam, symbols=symbols), b), "setwise", train,
                                       dev, 1, args.gap, f"tree kernel, {tag}")
    rows.append(tested(f"VP tree ({tag})", learner, test, timings, f"trained in {secs:.0f} s"))
    tuned = []
    for alpha in (1.0, *ALPHAS):
        learner, secs, epoch, score = train_vp(CompositeKernel(ForestKernel(lam, alpha, symbols=symbols), b),
                                               "setwise", train, dev, 1, args.gap, f"forest kernel α={alpha}, {tag}")
        if alpha == 1.0:
            rows.append(tested(f"VP forest ({tag})", learner, test, timings, f"trained in {secs:.0f} s"))
        elif not tuned or score > tuned[0]:
            tuned = [score, alpha, learner, secs]
    score, alpha, learner, secs = tuned
    rows.append(tested(f"VP forest α={alpha} ({tag})", learner, test, timings, f"trained in {secs:.0f} s"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path("training/reranker_lists"))
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--n-jobs", type=int, default=os.cpu_count())
    ap.add_argument("--epochs", type=int, default=2, help="most VP epochs (the best on dev is kept)")
    ap.add_argument("--rnn-epochs", type=int, default=6, help="most RNN epochs (the best on dev is kept)")
    ap.add_argument("--feature-epochs", type=int, default=6,
                    help="most epochs of the feature ranker (the best on dev is kept)")
    ap.add_argument("--feature-members", type=int, default=3,
                    help="feature rankers (seeds) averaged in the ensemble row (1: no such row)")
    ap.add_argument("--b-grid", default=",".join(map(str, BS)),
                    help="the composite kernel's b values tried on dev (with λ in 0.2, 0.3); the product "
                         "log p·log p' scales with the parser's log-probabilities")
    ap.add_argument("--composite", default=None, metavar="LAM,B",
                    help="the composite kernel's λ and b (default: chosen on dev from the grid)")
    ap.add_argument("--gap", type=float, default=0.05,
                    help="candidates within this F1 of the target are not trained against")
    ap.add_argument("--forest-sentences", type=int, default=200, help="0: no forest-kernel rows")
    ap.add_argument("--forest-k", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=0, help="> 0: a smoke run on that many sentences per split")
    ap.add_argument("--lists-only", action="store_true", help="build the cached lists and stop")
    ap.add_argument("--parser-model", type=Path, default=None,
                    help="a trained pipeline whose forest_parser parses dev and test (default: the PCFG)")
    ap.add_argument("--fold-models", type=Path, default=None,
                    help="with --parser-model: DIR/fold_F/model-last parses fold F of train (F < --folds)")
    ap.add_argument("--samples", type=int, default=0,
                    help="with --parser-model: lists keep the k // 2 best and fill up from this many dropout samples")
    ap.add_argument("--json", type=Path, default=None, help="write the table's rows here")
    args = ap.parse_args()
    if args.max_steps > 0:  # a smoke run: few folds, one epoch, no tuning
        args.folds, args.epochs, args.rnn_epochs = min(args.folds, args.max_steps), 1, 1
        args.feature_epochs, args.feature_members = 1, min(args.feature_members, 2)
        args.forest_sentences = min(args.forest_sentences, args.max_steps)
    if (args.parser_model is None) != (args.fold_models is None):
        ap.error("--parser-model and --fold-models go together")
    if args.samples and args.parser_model is None:
        ap.error("--samples needs span CRFs (--parser-model and --fold-models)")
    lists = cached_lists(args.cache, args.k, args.folds, args.n_jobs, args.max_steps or None,
                         parser_model=args.parser_model, fold_models=args.fold_models, samples=args.samples)
    if args.lists_only:
        return
    train, dev, test = (first_k(lists[s], args.k) for s in ("train", "dev", "test"))
    print(f"load {load()}; {len(train)} train, {len(dev)} dev, {len(test)} test lists, k = {args.k}", flush=True)

    rows, timings = [one_best_row(test, f"{'span CRF' if args.parser_model else 'PCFG'} 1-best")], []
    best = None  # the setwise composite perceptron of the best dev F1 over the (λ, b) grid
    grid = [(lam, float(b)) for lam in LAMBDAS for b in args.b_grid.split(",")]
    grid = grid[:1] if args.max_steps else grid
    if args.composite:
        grid = [tuple(float(x) for x in args.composite.split(","))]
    for lam, b in grid:
        learner, secs, epoch, score = train_vp(CompositeKernel(TreeKernel(lam), b), "setwise", train, dev,
                                               args.epochs, args.gap, f"composite λ={lam} b={b}")
        if best is None or score > best[0]:
            best = (score, lam, b, learner, secs, epoch)
    _, lam, b, composite, secs, epoch = best
    print(f"composite kernel: λ = {lam}, b = {b} ({'given' if args.composite else 'dev'}), {epoch} epoch(s) (dev)",
          flush=True)
    for name, kernel in (("tree", lambda: TreeKernel(lam)), ("composite", lambda: CompositeKernel(TreeKernel(lam), b))):
        for loss in ("pairwise", "setwise"):
            if loss == "setwise" and name == "composite":
                learner, train_secs, n_epochs = composite, secs, epoch  # trained while tuning
            else:
                learner, train_secs, n_epochs, _ = train_vp(kernel(), loss, train, dev, args.epochs, args.gap,
                                                            f"{name}, {loss}")
            rows.append(tested(f"VP {name}, {loss}", learner, test, timings,
                               f"trained on {len(train)} lists in {train_secs:.0f} s ({n_epochs} epoch(s), "
                               f"{learner.n_updates} updates, {learner.n_support} support trees)"))
    for loss in ("setwise", "pairwise"):
        learner, train_secs, n_epochs, _ = train_rnn(loss, train, dev, args.rnn_epochs, args.gap)
        rows.append(tested(f"RNN + log p, {loss}", learner, test, timings,
                           f"trained in {train_secs:.0f} s ({n_epochs} epoch(s))"))
    rows.extend(feature_rows(args, train, dev, test, timings))
    if args.forest_sentences:
        rows.extend(forest_rows(args, lam, b, timings))
    rows.append(oracle_row(test))
    timings.append(dag_speedup(composite, test))

    print(f"\nload {load()}")
    for line in timings:
        print(line)
    print(f"\nVP: kernel voted perceptron, λ = {lam}; composite: K_λ + b·log p·log p', b = {b} ({'given' if args.composite else 'dev'}); "
          f"forest: the composite kernel over bracket-compatible sub-forests, (Ns kK): trained on the first N "
          f"train lists, reranking the top K; candidates within {args.gap} F1 of the target are not trained against")
    print_rows(rows)
    if args.json is not None:
        srsly.write_json(args.json, {"rows": rows, "timings": timings, "lambda": lam, "b": b, "gap": args.gap})
    base, top = f1_40(rows[0]), max(rows[1:-1], key=f1_40)
    print(f"best gain over 1-best, F1 <= 40: {f1_40(top) - base:+.2f} ({top['name']})")


if __name__ == "__main__":
    main()

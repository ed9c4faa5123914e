"""Parse reranking on the PTB sample (Menchetti et al. 2005, §6.3.2 and
Table 3; Collins & Duffy 2002), end to end.

1. k-best lists (and pruned forests): the train split jackknifed
   (``--folds`` folds, each parsed by the grammar of the others), dev and
   test by the grammar of the whole train split; cached under ``--cache``
   (reruns read them).
2. The scorers, each trained on the jackknifed train lists: the kernel voted
   perceptron (VP) with the subset-tree kernel, pairwise and setwise; with
   the composite kernel ``K_λ + b·log p·log p'`` (eq. 17), λ and b tuned on
   dev (setwise) from a small grid; the recursive network with the
   ``a·log p + b`` input, setwise and pairwise, its epoch chosen on dev.
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

import numpy as np
import srsly
from thinc.api import Adam

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.kernels import dag_kernel_block, gram
from spacy_structpref.learners import CompositeKernel, KernelPerceptron, RecursiveNetLearner, TreeKernel
from spacy_structpref.reranking import (evaluate_row, jackknife_lists, load_items, one_best_row, oracle_row,
                                        parse_lists, parser_from_trees, print_rows, save_items)
from spacy_structpref.reranking.scorers import RerankSets, candidate_set, first_k, rerank, training_sets
from spacy_structpref.trees import SymbolTable

LAMBDAS, BS = (0.3, 0.4), (0.001, 0.01, 0.1)  # the dev grid of the composite kernel


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cached_lists(cache: Path, k: int, n_folds: int, n_jobs: int, limit=None, forests: bool = False):
    """``{split: items}``: train jackknifed, dev and test parsed by the train
    grammar. Read from ``cache`` (``{split}.msgpack`` with forests,
    ``{split}.trees.msgpack`` without: quick to read) when ``meta.json``
    there has these settings, else parsed and saved there."""
    meta = {"k": k, "n_folds": n_folds, "limit": limit}
    fresh = not (cache / "meta.json").exists() or srsly.read_json(cache / "meta.json") != meta
    symbols = SymbolTable()
    train_trees = ptb_trees("train")[:limit]
    out, parser = {}, None
    for split in ("train", "dev", "test"):
        full, light = cache / f"{split}.msgpack", cache / f"{split}.trees.msgpack"
        t0 = time.perf_counter()
        if not fresh and (light.exists() or full.exists()):
            path = full if forests or not light.exists() else light
            items = load_items(path, symbols)
            print(f"{split}: {len(items)} lists read from {path} ({time.perf_counter() - t0:.0f} s)", flush=True)
            if not light.exists():
                _save_light(light, items)
            out[split] = items
            continue
        if split == "train":
            items = jackknife_lists(train_trees, n_folds=n_folds, k=k, with_forest=True, n_jobs=n_jobs,
                                    symbols=symbols)
        else:
            parser = parser or parser_from_trees(train_trees)
            items = parse_lists(ptb_trees(split)[:limit], parser, k=k, with_forest=True, n_jobs=n_jobs,
                                progress=True, symbols=symbols)
        print(f"{split}: {len(items)} lists parsed in {time.perf_counter() - t0:.0f} s (load {load()})", flush=True)
        save_items(full, items)
        _save_light(light, items)
        out[split] = items if forests else [replace(item, forest=None) for item in items]
    srsly.write_json(cache / "meta.json", meta)
    return out


def _save_light(path: Path, items) -> None:
    save_items(path, [replace(item, forest=None) for item in items])


# ------------------------------------------------------------------ scorers
def train_vp(kernel, loss: str, train, epochs: int = 1):
    """A voted perceptron trained on the train lists; returns it and the seconds it took."""
    t0 = time.perf_counter()
    learner = KernelPerceptron(kernel, loss=loss, epochs=epochs, progress=False)
    learner.fit(*training_sets(learner, train))
    return learner, time.perf_counter() - t0


def f1_40(row) -> float:
    return row["<=40"]["F1"]


def tune_composite(train, dev, epochs: int):
    """λ and b of the composite kernel with the best dev F1 (≤ 40), setwise."""
    best = None
    for lam in LAMBDAS:
        for b in BS:
            learner, secs = train_vp(CompositeKernel(TreeKernel(lam), b), "setwise", train, epochs)
            score = f1_40(evaluate_row("dev", dev, rerank(learner, dev)))
            print(f"  dev: composite λ = {lam}, b = {b}: F1 ≤ 40 {score:.2f} ({secs:.0f} s)", flush=True)
            if best is None or score > best[0]:
                best = (score, lam, b)
    return best[1], best[2]


def train_rnn(loss: str, train, dev, epochs: int, a: float = 1.0):
    """The recursive network with the log p input, one epoch at a time; the
    weights of the epoch with the best dev F1 (≤ 40) are kept."""
    learner = RecursiveNetLearner(loss=loss, epochs=1, optimizer=Adam(0.001), progress=False,
                                  log_p_input=True, log_p_a=a)
    sets, gold = training_sets(learner, train)
    best = None
    t0 = time.perf_counter()
    for epoch in range(epochs):
        learner.fit(sets, gold)
        score = f1_40(evaluate_row("dev", dev, rerank(learner, dev)))
        print(f"  dev: RNN {loss} epoch {epoch + 1}: F1 ≤ 40 {score:.2f}", flush=True)
        if best is None or score > best[0]:
            best = (score, learner.to_bytes())
    learner.from_bytes(best[1])
    return learner, time.perf_counter() - t0


# ------------------------------------------------------------------ timings
def dag_speedup(learner, items, n: int = 20):
    """Seconds to score ``n`` lists' candidates against the trained support:
    with the weights folded into the support's DAG (what the reranker does)
    and as a plain kernel matrix over the same support and candidate trees."""
    kernel = learner.kernel.tree_kernel if isinstance(learner.kernel, CompositeKernel) else learner.kernel
    chunk = learner.chunks[0]
    coef = learner._coefficients(chunk, True)
    support = [tree for tree, _ in chunk.items] if isinstance(learner.kernel, CompositeKernel) else chunk.items
    sample = [item for item in items if len(item) > 1][:n]
    t0 = time.perf_counter()
    for item in sample:
        dag = candidate_set(learner, item.candidates, item.log_probs)
        kernel.weighted_sum(chunk.prepared[0] if isinstance(learner.kernel, CompositeKernel) else chunk.prepared,
                            coef, getattr(dag, "trees", dag))
    with_dag = time.perf_counter() - t0
    t0 = time.perf_counter()
    for item in sample:
        coef @ gram(support, item.candidates, lam=kernel.lam, normalize=True, n_threads=1, progress=False)
    plain = time.perf_counter() - t0
    # the sets' own blocks (pairwise updates): DAG vs plain
    t0 = time.perf_counter()
    for item in sample:
        dag = candidate_set(learner, item.candidates, item.log_probs)
        dag_kernel_block(getattr(dag, "trees", dag), None, kernel.lam, normalize=True)
    block_dag = time.perf_counter() - t0
    t0 = time.perf_counter()
    for item in sample:
        gram(item.candidates, lam=kernel.lam, normalize=True, n_threads=1, progress=False)
    block_plain = time.perf_counter() - t0
    return len(sample), len(support), with_dag, plain, block_dag, block_plain


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path("training/reranker_lists"))
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--n-jobs", type=int, default=os.cpu_count())
    ap.add_argument("--epochs", type=int, default=1, help="VP epochs")
    ap.add_argument("--rnn-epochs", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=0, help="> 0: a smoke run on that many sentences per split")
    ap.add_argument("--lists-only", action="store_true", help="build the cached lists and stop")
    ap.add_argument("--json", type=Path, default=None, help="write the table's rows here")
    args = ap.parse_args()
    smoke = args.max_steps > 0
    folds = min(args.folds, args.max_steps) if smoke else args.folds
    lists = cached_lists(args.cache, args.k, folds, args.n_jobs, args.max_steps or None)
    if args.lists_only:
        return
    train, dev, test = (first_k(lists[s], args.k) for s in ("train", "dev", "test"))
    print(f"load {load()}; {len(train)} train, {len(dev)} dev, {len(test)} test lists, k = {args.k}", flush=True)

    lam, b = (0.3, 0.01) if smoke else tune_composite(train, dev, args.epochs)
    print(f"composite kernel: λ = {lam}, b = {b} (dev)", flush=True)
    rows, timings, learners = [one_best_row(test)], [], {}
    specs = [("VP tree kernel, pairwise", lambda: TreeKernel(0.4), "pairwise"),
             ("VP tree kernel, setwise", lambda: TreeKernel(0.4), "setwise"),
             (f"VP composite λ={lam} b={b}, pairwise", lambda: CompositeKernel(TreeKernel(lam), b), "pairwise"),
             (f"VP composite λ={lam} b={b}, setwise", lambda: CompositeKernel(TreeKernel(lam), b), "setwise")]
    for name, kernel, loss in specs:
        learner, secs = train_vp(kernel(), loss, train, args.epochs)
        t0 = time.perf_counter()
        chosen = rerank(learner, test)
        rerank_secs = time.perf_counter() - t0
        rows.append(evaluate_row(name, test, chosen))
        learners[name] = learner
        timings.append(f"{name}: trained in {secs:.0f} s ({learner.n_updates} updates, {learner.n_support} "
                       f"support trees); reranked {len(test)} test lists in {rerank_secs:.1f} s")
        print(timings[-1], flush=True)
    for loss in ("setwise", "pairwise"):
        name = f"RNN + log p, {loss}"
        learner, secs = train_rnn(loss, train, dev, 1 if smoke else args.rnn_epochs)
        t0 = time.perf_counter()
        rows.append(evaluate_row(name, test, rerank(learner, test)))
        timings.append(f"{name}: trained in {secs:.0f} s; reranked {len(test)} test lists in "
                       f"{time.perf_counter() - t0:.1f} s")
        print(timings[-1], flush=True)
    rows.append(oracle_row(test))

    composite = learners[specs[3][0]]
    n, n_support, with_dag, plain, block_dag, block_plain = dag_speedup(composite, test)
    timings.append(f"DAG sharing, {n} test lists against {n_support} support trees: {plain:.2f} s plain, "
                   f"{with_dag:.2f} s on DAGs ({plain / max(with_dag, 1e-9):.1f}x); the lists' own blocks: "
                   f"{block_plain:.2f} s plain, {block_dag:.2f} s on DAGs ({block_plain / max(block_dag, 1e-9):.1f}x)")
    print(f"\nload {load()}")
    for line in timings:
        print(line)
    print()
    print_rows(rows)
    if args.json is not None:
        srsly.write_json(args.json, {"rows": rows, "timings": timings, "lambda": lam, "b": b})
    base = f1_40(rows[0])
    best = max(rows[1:-1], key=f1_40)
    print(f"best gain over 1-best, F1 <= 40: {f1_40(best) - base:+.2f} ({best['name']})")


if __name__ == "__main__":
    main()

"""Scale-out benchmark: the dask jobs of spacy_structpref.distributed
on a LocalCluster of 1 and of 2 worker processes on this machine, measured in
one run, against the in-process path.

Jobs: parsing the 3,914 PTB-sample sentences with the forest_parser of the
train split (50-best lists and pruned forests, written as DocBin shards), and
the normalised subset-tree Gram matrix of the 3,914 gold trees (λ = 0.4).
For each job it prints the times, the overhead of 1 worker against the
in-process path (same cores: one), and the line

    speed-up, 2 workers vs 1, JOB: X.XX

Every cluster result is checked against the in-process one (Docs equal
field for field; Gram to 1e-12); a mismatch prints ``differ``. Cluster
start and worker warm-up (importing the package) are timed apart: a running
cluster pays them once. Wall times depend on what else runs on the machine,
so each job also prints the CPU seconds it took (this process, which holds
the LocalCluster's scheduler, plus the workers) and the load average: the
CPU overhead of the cluster path does not depend on the load. ``--costs``
adds the in-process CPU costs of the other jobs (a jackknife fold's
grammar, a rerank list, candidate sets, a perceptron's training and
utilities) and their growth with the training set, for docs/scaling.md;
``--costs-only`` measures just those.

    NLTK_DATA=../shared/nltk_data python bench/distributed.py [--limit N] [--costs | --costs-only] [--json PATH]
"""
import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this file's folder: the file would stand in for the dask package of its name

import numpy as np
import spacy
import srsly
from spacy.tokens import Doc
from spacy.training import Example

from spacy_structpref import distributed as dist
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.kernels import gram
from spacy_structpref.trees import to_bracketed, tree_to_doc

SHARD_SIZE = 50


def doc_content(doc):
    spans = {key: [(s.start, s.end, s.label_) for s in group] for key, group in doc.spans.items()}
    return [t.text for t in doc], [t.tag_ for t in doc], spans, doc.user_data


def same_parses(a: Path, b: Path) -> bool:
    return all(doc_content(x) == doc_content(y) for x, y in zip(dist.read_parsed(a), dist.read_parsed(b), strict=True))


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def cpu_timed(cluster, fn, *args, **kwargs):
    """(wall s, CPU s of this process and of ``cluster``'s workers, result)."""
    def cpu():
        workers = sum(cluster.run(time.process_time).values()) if cluster is not None else 0.0
        return time.process_time() + workers

    before = cpu()
    wall, out = timed(fn, *args, **kwargs)
    return wall, cpu() - before, out


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir())


def start_cluster(n_workers: int, stack):
    """A warm LocalCluster: (client, start seconds, warm-up seconds)."""
    t_start, client = timed(stack.enter_context, dist.local_cluster(n_workers))
    modules = ["spacy_structpref.components.forest_parser", "spacy_structpref.distributed.tasks",
               "spacy_structpref.kernels", "spacy_structpref.reranking.data"]
    t_warm, _ = timed(lambda: [client.run(importlib.import_module, m) for m in modules])
    return client, t_start, t_warm


def report(job: str, runs: dict, ok: bool, rows: dict, unit_items: int, unit: str):
    """``runs``: {0 (in process), 1, 2 workers: (wall s, CPU s, load average)}."""
    (t_in, c_in, _), (t1, c1, _), (t2, c2, _) = runs[0], runs[1], runs[2]
    print(f"{job}: in-process {t_in:.1f} s, 1 worker {t1:.1f} s (overhead {100 * (t1 / t_in - 1):+.1f} %), "
          f"2 workers {t2:.1f} s; {1e6 * t_in / unit_items:.2f} µs/{unit} in process")
    print(f"{job}: CPU in-process {c_in:.1f} s, 1 worker {c1:.1f} s (overhead {100 * (c1 / c_in - 1):+.1f} %), "
          f"2 workers {c2:.1f} s (overhead {100 * (c2 / c_in - 1):+.1f} %); load average "
          + " / ".join(f"{runs[n][2]:.1f}" for n in (0, 1, 2)))
    if not ok:
        print(f"{job}: results differ from the in-process ones: differ")
    print(f"speed-up, 2 workers vs 1, {job}: {t1 / t2:.2f}")
    rows[job] = {"in_process_s": t_in, "workers_1_s": t1, "workers_2_s": t2, "overhead_1": t1 / t_in - 1,
                 "speedup_2_vs_1": t1 / t2, "cpu_s": [c_in, c1, c2], "load_average": [runs[n][2] for n in (0, 1, 2)],
                 "same": ok, "items": unit_items, "unit": unit}


def cpu_seconds(fn, *args, **kwargs):
    """(CPU seconds of this process, result): per-item costs that do not
    depend on what else runs on the machine."""
    start = time.process_time()
    out = fn(*args, **kwargs)
    return time.process_time() - start, out


def slope(xs, ys) -> float:
    """The exponent b of ``y ∝ x^b`` fitted by least squares on logs."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def per_item_costs(rows: dict) -> None:
    """In-process CPU costs of the jobs the 1-vs-2 comparison does not time,
    and how they grow with the training set (grammar, CP inventory): the
    exponents docs/scaling.md extrapolates with."""
    from spacy_structpref.incremental import CandidateSets, CPInventory
    from spacy_structpref.learners.kernels import TreeKernel
    from spacy_structpref.learners.perceptron import KernelPerceptron
    from spacy_structpref.learners.training import Schedule, fit
    from spacy_structpref.reranking import parser_from_trees
    from spacy_structpref.reranking.data import _assemble, _parse_items

    train = ptb_trees("train")
    dev = ptb_trees("dev")[:100]
    growth = []
    for n in (len(train) // 4, len(train) // 2, len(train) * 9 // 10):  # the last: a 10-fold jackknife grammar
        t_grammar, parser = cpu_seconds(parser_from_trees, train[:n])
        t_parse, part = cpu_seconds(_parse_items, parser, dev, 50, True, 0)
        inventory = CPInventory.from_trees(train[:n])
        sets = dist.candidate_sets(train[:300], inventory, n_workers=0, progress=False)
        growth.append({"trees": n, "grammar_s": t_grammar, "binary_rules": len(parser.grammar.binary),
                       "parse_ms": 1e3 * t_parse / len(dev), "cp_types": len(inventory),
                       "candidates_per_set": sum(len(x) for x in sets) / len(sets)})
        print(f"cost, grammar of {n} trees: {t_grammar:.1f} s, {len(parser.grammar.binary)} binary rules, parse "
              f"(k = 50, forests) {1e3 * t_parse / len(dev):.0f} ms/sentence; CP inventory {len(inventory)} types, "
              f"{growth[-1]['candidates_per_set']:.1f} candidates/set")
    n = [g["trees"] for g in growth]
    exponents = {key: slope(n, [g[key] for g in growth])
                 for key in ("grammar_s", "binary_rules", "parse_ms", "cp_types", "candidates_per_set")}
    print("growth with the training trees, exponent b of x ∝ trees^b: "
          + ", ".join(f"{key} {b:.2f}" for key, b in exponents.items()))
    rows["growth"], rows["growth_exponents"] = growth, exponents
    rows["cost_fold_grammar_s"] = growth[-1]["grammar_s"]
    rows["cost_lists_parse_ms"] = growth[-1]["parse_ms"]
    t_join, items = cpu_seconds(_assemble, [part], None)  # what the caller does alone: one table for all forests
    item_bytes = sum(len(srsly.msgpack_dumps(it.to_dict())) for it in items) / len(items)
    print(f"cost, rerank lists (k = 50, forests): joined by the caller {1e3 * t_join / len(dev):.2f} ms/sentence, "
          f"{item_bytes / 1e3:.0f} kB/sentence as msgpack")
    rows.update(cost_lists_join_ms=1e3 * t_join / len(dev), list_kb=item_bytes / 1e3)
    inventory = CPInventory.from_trees(train)
    t, sets = cpu_seconds(dist.candidate_sets, train[:300], inventory, n_workers=0, progress=False)
    n_cands = sum(len(s) for s in sets)
    lazy = CandidateSets(sets, TreeKernel(lam=0.5).symbols, reduced=True)
    t_dag, _ = cpu_seconds(lambda: [lazy[i] for i in range(len(lazy))])
    print(f"cost, candidate sets: {1e6 * t / n_cands:.2f} µs/candidate (+ {1e6 * t_dag / n_cands:.2f} µs/candidate "
          f"as reduced DAGs); {n_cands / len(sets):.1f} candidates/set, {len(sets) / 300:.1f} sets/sentence")
    rows["cost_candidates_us"] = 1e6 * t / n_cands
    rows["cost_candidate_dags_us"] = 1e6 * t_dag / n_cands
    rows["candidates_per_set"] = n_cands / len(sets)
    rows["sets_per_sentence"] = len(sets) / 300
    vp = KernelPerceptron(TreeKernel(lam=0.5))
    train_sets = sets[:2000]
    t_fit, _ = cpu_seconds(fit, vp, CandidateSets(train_sets, vp.kernel.symbols, reduced=True),
                           [s.gold for s in train_sets], schedule=Schedule(progress=False))
    test_sets = dist.candidate_sets(ptb_trees("dev")[:40], inventory, n_workers=0, progress=False)
    n_test = sum(len(s) for s in test_sets)
    t, _ = cpu_seconds(dist.set_utilities, vp, test_sets, reduced=True, n_workers=0, progress=False)
    per = t / n_test / vp.n_support
    support_kb = len(vp.to_bytes()) / vp.n_support / 1e3
    print(f"cost, perceptron training: {t_fit:.1f} s for {len(train_sets)} sets, {vp.n_support} support trees")
    print(f"cost, perceptron utilities: {1e6 * t / n_test:.1f} µs/candidate against {vp.n_support} support "
          f"trees ({1e9 * per:.1f} ns/candidate/support tree); the support sent as {support_kb:.2f} kB/tree")
    rows["cost_fit_s"], rows["fit_sets"] = t_fit, len(train_sets)
    rows["cost_utilities_ns_per_candidate_support"] = 1e9 * per
    rows["support"] = vp.n_support
    rows["support_kb_per_tree"] = support_kb


def compare(args, rows: dict) -> None:
    """Parsing and the Gram matrix: in process, then on 1 and 2 workers."""
    from contextlib import ExitStack

    train = ptb_trees("train")
    trees = (train + ptb_trees("dev") + ptb_trees("test"))[: args.limit]
    print(f"{len(trees)} sentences; grammar from {len(train)} train trees; shards of {SHARD_SIZE}")
    nlp = spacy.blank("en")
    nlp.add_pipe("forest_parser", config={"k": 50})
    nlp.initialize(lambda: [Example(d, d) for d in (tree_to_doc(nlp.vocab, t) for t in train)])
    sentences = [Doc(nlp.vocab, words=t.leaves()) for t in trees]
    brackets = [to_bracketed(t) for t in trees]
    rows["sentences"] = len(trees)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        parse, grams, diff = {}, {}, {}
        wall, cpu, _ = cpu_timed(None, dist.parse_corpus, nlp, sentences, tmp / "in", shard_size=SHARD_SIZE,
                                 n_workers=0, progress=False)
        parse[0] = (wall, cpu, os.getloadavg()[0])
        wall, cpu, K_in = cpu_timed(None, gram, brackets, lam=0.4, n_threads=1, progress=False)
        grams[0] = (wall, cpu, os.getloadavg()[0])
        t_gram_in2, _ = timed(gram, brackets, lam=0.4, n_threads=2, progress=False)
        for n in (1, 2):
            with ExitStack() as stack:
                client, t_start, t_warm = start_cluster(n, stack)
                print(f"LocalCluster of {n} worker(s): start {t_start:.1f} s, warm-up {t_warm:.1f} s")
                wall, cpu, _ = cpu_timed(client, dist.parse_corpus, nlp, sentences, tmp / f"w{n}",
                                         shard_size=SHARD_SIZE, client=client, progress=False)
                parse[n] = (wall, cpu, os.getloadavg()[0])
                wall, cpu, K = cpu_timed(client, dist.gram, brackets, lam=0.4, block_size=args.block_size,
                                         client=client, progress=False)
                grams[n] = (wall, cpu, os.getloadavg()[0])
                diff[n] = float(np.abs(K - K_in).max())
                print(f"  {n} worker(s): parse {parse[n][0]:.1f} s, gram {grams[n][0]:.1f} s (max |ΔK| {diff[n]:.1e})")
        same = all(same_parses(tmp / "in", tmp / f"w{n}") for n in (1, 2))
        report("parse", parse, same, rows, len(trees), "sentence")
        shard_bytes = directory_bytes(tmp / "in") / len(trees)
        print(f"parse: {shard_bytes / 1e3:.1f} kB/sentence written (DocBin with 50-best list and forest)")
        rows["parse"]["kb_per_sentence"] = shard_bytes / 1e3
        n_pairs = len(trees) * (len(trees) + 1) // 2
        report("gram", grams, all(diff[n] <= 1e-12 for n in (1, 2)), rows, n_pairs, "pair")
        print(f"gram: in-process on 2 threads {t_gram_in2:.1f} s")
        rows["gram"]["in_process_2_threads_s"] = t_gram_in2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="Only the first N sentences (a quick run)")
    ap.add_argument("--block-size", type=int, default=500, help="Gram block rows/columns")
    ap.add_argument("--costs", action="store_true", help="Also the per-item costs of the other jobs")
    ap.add_argument("--costs-only", action="store_true", help="Only the per-item costs of the other jobs")
    ap.add_argument("--json", type=Path, default=None, help="Write the figures as JSON")
    args = ap.parse_args()

    rows: dict = {}
    if not args.costs_only:
        compare(args, rows)
    if args.costs or args.costs_only:
        per_item_costs(rows)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

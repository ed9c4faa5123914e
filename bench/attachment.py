"""First-pass attachment (Menchetti et al. 2005, §5 and §6.1): the paper's
small-data experiment (§6.3.1, Table 2) on the PTB sample. Disjoint subsets of
training sentences each train one learner on the preference sets (CP inventory
from the whole train split), built from a learner config: the kernel voted
perceptron with the subset-tree kernel (``--learner vp``:
configs/learners/vp.cfg) or the recursive neural network (``--learner rnn``:
configs/learners/rnn.cfg), or any config file with a ``[learner]`` block. Every
model is evaluated on the test split (``--split``) with L_1/L_2/L_5 (%), then mean ± std.

``--specialise`` trains one learner per foot class of the incoming word. A
learner that stops early on validation sets (the recursive net, as Menchetti
et al. stopped on section 24) stops on the sets of dev sentences
(``--validation-sentences``: all of dev for a test evaluation, the first 200
for a dev one, which then starts after them; 0: none), as
``attachment-tables`` does.

With the recursive net (a config whose learner is
``RecursiveNetLearner.v1``), every subset is trained twice at the same seed:
with the batched network and node by node (``batched = false``, the slow
reference), and both training times (the whole of ``fit``: building the
sets' DAGs, the epochs, the validation) and L_r figures are printed, with
the line ``rnn training: X s (node by node: Y s), speed-up Y/X``, and the
same in CPU seconds of this process (on a machine shared with other jobs,
the two runs may see different loads: their CPU times compare fairer).

Paper (WSJ, reduction): 100 sentences, 5 subsets: L_1 VP 26.7 ± 0.4, RNN
26.0 ± 1.0; with specialisation, 2,000 sentences: VP 18.3, RNN 17.3.

    NLTK_DATA=../shared/nltk_data python bench/attachment.py [--learner vp] [--subsets 5] [--size 100] [--full-trees] [--specialise] [--validation-sentences N]
"""
import argparse
import statistics
import time
from pathlib import Path

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.errors import StructPrefError
from spacy_structpref.incremental import CPInventory, preference_sets_of
from spacy_structpref.experiments.attachment_tables import (DEV_VALIDATION_SENTENCES, fit_attachment_learner, held_out_trees,
                                                learner_from_config)
from spacy_structpref.learners import KernelPerceptron, RecursiveNetLearner, TreeKernel, loss_at_r
from spacy_structpref.trees import SymbolTable

R = (1, 2, 5)
CONFIGS = Path(__file__).resolve().parent.parent / "configs" / "learners"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subsets", type=int, default=5)
    parser.add_argument("--size", type=int, default=100, help="training sentences per subset")
    parser.add_argument("--split", default="test", choices=["dev", "test"])
    parser.add_argument("--eval-sentences", type=int, default=None, help="default: the whole split")
    parser.add_argument("--full-trees", action="store_true", help="no tree reduction")
    parser.add_argument("--specialise", action="store_true", help="one learner per foot class")
    parser.add_argument("--learner", default="vp",
                        help="learner config: a file, or the name of one in configs/learners (vp, rnn)")
    parser.add_argument("--loss", default=None, choices=["setwise", "pairwise"],
                        help="default: the config's")
    parser.add_argument("--lam", type=float, default=None, help="default: the config's")
    parser.add_argument("--epochs", type=int, default=None, help="default: the config's")
    parser.add_argument("--validation-sentences", type=int, default=None,
                        help="dev sentences an early-stopping learner stops on (default: all of dev for "
                             f"test, the first {DEV_VALIDATION_SENTENCES} for dev; 0: none)")
    args = parser.parse_args()
    reduced = not args.full_trees
    config_path = Path(args.learner)
    if not config_path.is_file():
        config_path = CONFIGS / f"{args.learner}.cfg"
        if not config_path.is_file():
            parser.error(f"no learner config {args.learner} (nor {config_path})")
    given = {"learner.loss": args.loss, "schedule.epochs": args.epochs, "learner.kernel.lam": args.lam}
    overrides = {key: value for key, value in given.items() if value is not None}

    def make_learner(seed: int, batched: bool = True):
        """The config's learner, seeded (one subset each), and its schedule, with the command line's
        overrides; ``batched=False``: a recursive net node by node."""
        return learner_from_config(config_path, {**overrides, "learner.seed": seed,
                                                 **({} if batched else {"learner.batched": False})})

    train = ptb_trees("train")
    if args.subsets * args.size > len(train):
        parser.error(f"{args.subsets} × {args.size} sentences exceed the {len(train)} of train")
    inventory = CPInventory.from_trees(train)
    try:
        valid_trees, eval_trees = held_out_trees(args.split, args.validation_sentences, args.eval_sentences)
    except StructPrefError as error:
        parser.error(str(error))
    evaluation = preference_sets_of(eval_trees, inventory)
    eval_gold = [s.gold for s in evaluation]
    first, schedule = make_learner(0)
    validation = preference_sets_of(valid_trees, inventory) if schedule.patience is not None else None
    kernel = getattr(first, "kernel", None)
    print(f"{len(evaluation)} {args.split} preference sets, "
          f"{sum(len(s) for s in evaluation) / len(evaluation):.1f} candidates on average, "
          f"{100 * sum(g is None for g in eval_gold) / len(eval_gold):.2f}% without a correct one; "
          f"{'reduced' if reduced else 'full'} trees, {config_path.stem}, {first.loss} loss"
          + (f", λ = {kernel.lam}" if isinstance(kernel, TreeKernel) else "")
          + (", one learner per foot class" if args.specialise else "")
          + (f", stopping early on {len(valid_trees)} dev sentences" if validation else ""))

    # a recursive net is also trained node by node, at the same seed: its reference implementation
    variants = [True, False] if isinstance(first, RecursiveNetLearner) else [True]
    print(f"{'subset':>6s} {'net':>7s} {'sets':>6s} {'updates':>8s} {'support':>8s} {'train s':>8s} "
          f"{'epochs s':>8s} {'eval s':>7s} " + " ".join(f"{'L' + str(r):>6s}" for r in R))
    results = {batched: [] for batched in variants}
    seconds = {batched: [0.0, 0.0, 0.0] for batched in variants}  # fit, its epochs' gradient steps, fit's CPU
    for k in range(args.subsets):
        subset = train[k * args.size:(k + 1) * args.size]
        sets = preference_sets_of(subset, inventory)
        for batched in variants:
            prototype, schedule = make_learner(k, batched)
            # the kernel's table for the candidate DAGs (the recursive net reads any table)
            symbols = (prototype.kernel.symbols if isinstance(prototype, KernelPerceptron)
                       else SymbolTable())
            t0, cpu0 = time.perf_counter(), time.process_time()
            trained, scorer = fit_attachment_learner(prototype, schedule, sets, symbols, reduced, args.specialise,
                                                     validation)
            learners = list(trained.learners.values()) if args.specialise else [trained]
            t1, cpu1 = time.perf_counter(), time.process_time()
            # evaluation sets are built one at a time, straight into hash-consed DAGs:
            # all of them at once take gigabytes
            L = loss_at_r([scorer(s.dag(symbols, reduced), s.foot) for s in evaluation], eval_gold, R)
            t2 = time.perf_counter()
            results[batched].append(L)
            epochs = sum(sum(x.log.seconds[-1:]) for x in learners)
            seconds[batched][0] += t1 - t0
            seconds[batched][1] += epochs
            seconds[batched][2] += cpu1 - cpu0
            updates, support = ((sum(x.n_updates for x in learners), sum(x.n_support for x in learners))
                                if isinstance(prototype, KernelPerceptron) else ("-", "-"))
            print(f"{k:6d} {'batched' if batched else 'nodes':>7s} {len(sets):6d} {updates:>8} {support:>8} "
                  f"{t1 - t0:8.1f} {epochs:8.1f} {t2 - t1:7.1f} " + " ".join(f"{100 * L[r]:6.2f}" for r in R),
                  flush=True)
    for batched in variants:
        for r in R:
            values = [100 * L[r] for L in results[batched]]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            print(f"L_{r}: {statistics.mean(values):.2f} ± {spread:.2f} % (mean ± std over "
                  f"{len(values)} subsets of {args.size} sentences"
                  + ("" if len(variants) == 1 else ", batched net" if batched else ", net node by node") + ")")
    if len(variants) == 2:
        (fit_s, epochs_s, cpu_s), (fit_nodes, epochs_nodes, cpu_nodes) = seconds[True], seconds[False]
        print(f"rnn training: {fit_s:.1f} s (node by node: {fit_nodes:.1f} s), speed-up {fit_nodes / fit_s:.1f}")
        print(f"rnn training CPU: {cpu_s:.1f} s (node by node: {cpu_nodes:.1f} s), speed-up {cpu_nodes / cpu_s:.1f}")
        print(f"rnn epochs' gradient steps: {epochs_s:.1f} s (node by node: {epochs_nodes:.1f} s), "
              f"speed-up {epochs_nodes / epochs_s:.1f}")


if __name__ == "__main__":
    main()

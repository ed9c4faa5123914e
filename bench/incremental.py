"""First-pass attachment data (Menchetti et al. 2005, §6.1) on the PTB sample:
the CP inventory of the training trees, its coverage of dev, the size of the
preference sets (the paper: 120 alternatives per word on average, 2 – 2,000 on
WSJ) and of their trees with and without tree reduction, and the time to build
them: the candidate DAGs as the learners get them (``PreferenceSet.dag``)
against the candidate trees built and hash-consed
(``TreeSetDAG(pset.trees(reduced))``, the reference they equal node for
node), on the same sets in one process, one line each way of reduction:

    candidate DAGs (reduced): ours X ms a set, trees hash-consed Y ms a set, ratio R

    NLTK_DATA=../shared/nltk_data python bench/incremental.py [--train 3068] [--dev 433]
"""
import argparse
import statistics
import time
from collections import Counter

from tqdm import tqdm

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.incremental import CPInventory, foot_class, preference_sets_of
from spacy_structpref.trees import SymbolTable, TreeSetDAG


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=None, help="training sentences (default all)")
    parser.add_argument("--dev", type=int, default=None, help="dev sentences (default all)")
    args = parser.parse_args()
    train = ptb_trees("train")[: args.train]
    dev = ptb_trees("dev")[: args.dev]

    t0 = time.perf_counter()
    inventory = CPInventory.from_trees(train)
    t_inventory = time.perf_counter() - t0
    kinds = Counter(cp.kind for cp in inventory.counts)
    print(f"inventory from {len(train)} train sentences: {len(inventory)} CP types "
          f"({kinds['attach']} attach, {kinds['lift']} lift), {t_inventory:.2f} s")

    t0 = time.perf_counter()
    sets = preference_sets_of(tqdm(dev, desc="preference sets", leave=False), inventory)
    t_sets = time.perf_counter() - t0
    sizes = [len(s) for s in sets]
    covered = sum(s.gold is not None for s in sets)
    print(f"dev: {len(dev)} sentences, {len(sets)} preference sets in {t_sets:.2f} s; "
          f"gold CP in the inventory for {100 * covered / len(sets):.2f}%")
    print(f"candidates per word: mean {statistics.mean(sizes):.1f}, median "
          f"{statistics.median(sizes):.0f}, min {min(sizes)}, max {max(sizes)}")

    by_class = {}
    for s in sets:
        by_class.setdefault(foot_class(s.foot), []).append(len(s))
    print(f"{'foot class':14s} {'sets':>6s} {'mean size':>9s}")
    for name, n in sorted(by_class.items(), key=lambda kv: -len(kv[1])):
        print(f"{name:14s} {len(n):6d} {statistics.mean(n):9.1f}")

    sample = sets[:: max(1, len(sets) // 300)]
    for reduced in (False, True):
        t0 = time.perf_counter()
        nodes = [len(t.treepositions()) for s in sample for t in s.trees(reduced=reduced)]
        elapsed = time.perf_counter() - t0
        print(f"{'reduced' if reduced else 'full':8s} candidate trees: {statistics.mean(nodes):.1f} "
              f"nodes on average (incl. words), {1e6 * elapsed / len(nodes):.0f} µs per tree "
              f"({len(sample)} sets)")

    for reduced in (True, False):
        symbols = SymbolTable()  # one table, as a learner's: each side finds the other's productions
        ours = reference = 0.0
        rounds = 3
        for _ in range(rounds):  # the two in turn, so that a change of load falls on both
            t0 = time.process_time()
            for s in sample:
                s.dag(symbols, reduced)
            t1 = time.process_time()
            for s in sample:
                TreeSetDAG(s.trees(reduced), symbols)
            ours, reference = ours + t1 - t0, reference + time.process_time() - t1
        per_set = 1e3 / (rounds * len(sample))
        print(f"candidate DAGs ({'reduced' if reduced else 'full'}): ours {ours * per_set:.2f} ms a set, "
              f"trees hash-consed {reference * per_set:.2f} ms a set, ratio {ours / reference:.2f}")


if __name__ == "__main__":
    main()

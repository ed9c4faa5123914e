"""EVALB counts of every candidate of a split's k-best lists against its
gold tree, the two ways the scorer offers, in one process: a list at a time
(``candidate_stats``: the gold side prepared once, each candidate read as
EVALB reads a test line), as the reranker's training lists are scored, and
one candidate at a time (``sentence_stats`` of the candidate read as a
tree). Both must give the same counts. The last line reads

    list scoring: L lists, C candidates; a list at a time X.XX s, one by one Y.YY s (CPU, best of R), ratio Z.ZZ

    python bench/list_scoring.py [--lists training/span_reranker_lists/dev.trees.msgpack] [--repeats 3]

The lists are a rerank-lists step's (``spacy project run span-rerank-lists``
or ``rerank-lists``); the bench reads their candidates and gold trees only.
"""
import argparse
import time
from pathlib import Path

from spacy_structpref.reranking.data import load_items
from spacy_structpref.scoring.parseval import candidate_stats, sentence_stats
from spacy_structpref.trees import parse_bracketed, to_bracketed


def best_time(func, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        start = time.process_time()
        out = func()
        times.append(time.process_time() - start)
    return min(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lists", type=Path, default=Path("training/span_reranker_lists/dev.trees.msgpack"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not args.lists.exists():
        raise SystemExit(f"{args.lists} does not exist: make the lists first (python -m spacy project run "
                         "span-rerank-lists)")
    items = [item for item in load_items(args.lists, None) if item.gold is not None]
    if not items:
        raise SystemExit(f"{args.lists} holds no list with a gold tree")
    golds = [parse_bracketed(to_bracketed(item.gold)) for item in items]  # escaped, as the candidates are

    def by_list():
        return [candidate_stats(gold, item.candidates) for gold, item in zip(golds, items)]

    def one_by_one():
        return [[sentence_stats(gold, parse_bracketed(text)) for text in item.candidates]
                for gold, item in zip(golds, items)]

    fast, fast_stats = best_time(by_list, args.repeats)
    slow, slow_stats = best_time(one_by_one, args.repeats)
    if fast_stats != slow_stats:
        raise SystemExit("the two ways give different counts")
    n = sum(len(item) for item in items)
    print(f"list scoring: {len(items)} lists, {n} candidates; a list at a time {fast:.2f} s, one by one "
          f"{slow:.2f} s (CPU, best of {args.repeats}), ratio {fast / slow:.2f}")


if __name__ == "__main__":
    main()

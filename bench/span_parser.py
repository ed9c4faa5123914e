"""Benchmark of the span-CRF parser trained from scratch on the PTB-sample
train split (wsj_0001–0139) on CPU.

Trains with Adam (linear warm-up, then the learning rate halved whenever dev
F1 has not risen for ``--patience`` epochs), gradient clipping and dropout;
after each epoch parses the dev split (wsj_0140–0169, CKY 1-best) and scores it
with the EVALB-exact scorer, keeping the best-dev model. Training stops at
``--epochs`` or when the next epoch would pass ``--budget`` CPU-seconds of
training (updates and dev parses together). The best-dev model then parses
the test split (wsj_0170–0199) with forests and ``--k``-best lists (timed),
and the bench prints

    SpanCRF: F1 <= 40 X.XX, all Y.YY, oracle@50 Z.ZZ, train T s, parse P s

(train: CPU-seconds of training; parse: CPU-seconds for the test sentences
with forests and k-best lists; F1 of the most probable tree in the forest,
the parser's default decoding), then the CKY 1-best F1 and time alone and
the EVALB tables. Sentences EVALB rejects (a predicted punctuation tag on a word that
is not punctuation in gold, or the reverse) are counted as EVALB counts them
and reported.

    NLTK_DATA=../shared/nltk_data OPENBLAS_NUM_THREADS=1 python bench/span_parser.py [--budget 1800]
"""
import argparse
import os
import random
import time

from thinc.api import Adam, fix_random_seed
from tqdm import tqdm

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.models.span_crf import SpanCRF
from spacy_structpref.parsing.span_parser import SpanParser
from spacy_structpref.scoring.parseval import EvalbParams, evalb, sentence_stats
from spacy_structpref.trees.brackets import parse_bracketed

# every sentence scored, as EVALB -e with a large bound: the error count is reported
SCORE_ALL = EvalbParams(max_error=None)


def cky(parser):
    """The parser with CKY (best derivation) decoding: no forest for 1-best."""
    return SpanParser(parser.model, parser.labels, parser.tags, vocab=parser.vocab, decode="derivation")


def score(parser, gold, k=1, with_forest=False):
    """(EVALB result, parse results, CPU-seconds of parsing)."""
    c0 = time.process_time()
    results = parser.parse_many([tree.leaves() for tree in gold], k=k, with_forest=with_forest)
    cpu = time.process_time() - c0
    return evalb(gold, [r.tree for r in results], SCORE_ALL), results, cpu


def oracle(gold, results):
    """EVALB result of the best tree (sentence F1) of each k-best list."""
    picked = []
    for g, r in zip(gold, results):
        def f1(tree):
            s = sentence_stats(g, tree, SCORE_ALL)
            return 2 * s.matched / (s.gold + s.test) if s.gold + s.test else 0.0
        picked.append(max((parse_bracketed(text) for _, text in r.nbest), key=f1))
    return evalb(gold, picked, SCORE_ALL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=1800.0, help="training CPU-seconds")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=300, help="steps of linear warm-up")
    ap.add_argument("--patience", type=int, default=2, help="epochs without a dev gain before halving the rate")
    ap.add_argument("--clip", type=float, default=5.0, help="gradient norm clipping")
    ap.add_argument("--lstm-width", type=int, default=400)
    ap.add_argument("--lstm-depth", type=int, default=2)
    ap.add_argument("--hidden-width", type=int, default=250)
    ap.add_argument("--embed-width", type=int, default=100)
    ap.add_argument("--char-width", type=int, default=100)
    ap.add_argument("--dropout", type=float, default=0.3)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="first n training trees (quick runs)")
    ap.add_argument("--output", default=None, help="write the best-dev parser's bytes here (at each new best)")
    ap.add_argument("--load", default=None, help="skip training: test the parser saved by --output")
    args = ap.parse_args()

    fix_random_seed(args.seed)
    train, dev, test = list(ptb_trees("train"))[:args.limit], ptb_trees("dev"), ptb_trees("test")
    model = SpanCRF(lstm_width=args.lstm_width, lstm_depth=args.lstm_depth, hidden_width=args.hidden_width,
                    embed_width=args.embed_width, char_width=args.char_width, dropout=args.dropout)
    parser = SpanParser.from_trees(train, model)
    print(f"{len(train)} training trees, {len(parser.labels)} span labels, {len(parser.tags)} tags; {vars(args)}",
          flush=True)
    if args.load:
        with open(args.load, "rb") as f:
            parser.from_bytes(f.read())
        spent = train_wall = float("nan")
    else:
        spent, train_wall = train_parser(parser, train, dev, args)
    test_parser(parser, test, args, spent, train_wall)


def train_parser(parser, train, dev, args):
    """Train, keeping the best-dev parser; (training CPU-seconds, wall-seconds)."""
    rng = random.Random(args.seed)
    opt = Adam(args.lr, grad_clip=args.clip)
    peak, step, best, best_bytes, since, spent = args.lr, 0, -1.0, None, 0, 0.0
    w0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        c0 = time.process_time()
        rng.shuffle(train)
        loss = 0.0
        bar = tqdm(range(0, len(train), args.batch_size), desc=f"epoch {epoch}", mininterval=30, leave=False)
        for b in bar:
            step += 1
            opt.learn_rate = peak * min(1.0, step / args.warmup)
            loss += parser.update(train[b:b + args.batch_size], opt)
        result, _, _ = score(cky(parser), dev)
        took = time.process_time() - c0
        spent += took
        f1 = result.short.f1
        if f1 > best:
            best, best_bytes, since = f1, parser.to_bytes(), 0
            if args.output:
                with open(args.output, "wb") as f:
                    f.write(best_bytes)
        else:
            since += 1
            if since >= args.patience:
                peak, since = peak / 2, 0
        print(f"epoch {epoch}: loss/sentence {loss / len(train):.2f}, dev F1 <= 40 {f1:.2f} (all "
              f"{result.all.f1:.2f}, {result.short.errors} EVALB errors), best {best:.2f}, lr {peak:.2e}, "
              f"{took:.0f} s CPU ({spent:.0f} s in all, {time.perf_counter() - w0:.0f} s wall), "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
        if spent + took > args.budget:
            break
    parser.from_bytes(best_bytes)
    print(f"best dev F1 (<= 40) {best:.2f}", flush=True)
    return spent, time.perf_counter() - w0


def test_parser(parser, test, args, spent, train_wall):
    one, _, one_cpu = score(cky(parser), test)
    print(f"test CKY 1-best alone: F1 <= 40 {one.short.f1:.2f}, all {one.all.f1:.2f} ({one_cpu:.1f} s CPU)",
          flush=True)
    full, results, full_cpu = score(parser, test, k=args.k, with_forest=True)
    best_k = oracle(test, results)
    n_edges = sum(r.forest.n_edges for r in results if r.forest is not None)
    print(f"\ntest: {len(test)} sentences, CKY 1-best alone {one_cpu:.1f} s CPU, "
          f"with forests and {args.k}-best {full_cpu:.1f} s CPU, {n_edges / len(test):.0f} forest "
          f"hyperedges/sentence, {full.short.errors} EVALB errors; load {os.getloadavg()[0]:.2f}")
    print("\n1-best\n" + full.table())
    print(f"\n{args.k}-best oracle\n" + best_k.table())
    print(f"\nSpanCRF: F1 <= 40 {full.short.f1:.2f}, all {full.all.f1:.2f}, oracle@{args.k} {best_k.short.f1:.2f}, "
          f"train {spent:.0f} s, parse {full_cpu:.1f} s   (train wall {train_wall:.0f} s)")


if __name__ == "__main__":
    main()

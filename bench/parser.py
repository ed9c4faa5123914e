"""Benchmark of the PCFG forest parser, the reranker's base parser, on the
PTB-sample test split (wsj_0170–0199).

Trains the grammar on the train split, parses all 413 test sentences with
forests and 50-best lists (timed, one core: the parser is single-threaded),
prints PARSEVAL (EVALB conventions) for the 1-best and the 50-best oracle, and
the speed ratio against NLTK's ViterbiParser with the same grammar on 20 short
test sentences, measured in the same run.

    NLTK_DATA=../shared/nltk_data python bench/parser.py [--k 50] [--nltk 20]
"""
import argparse
import math
import os
import time

from nltk.grammar import PCFG, Nonterminal, ProbabilisticProduction
from nltk.parse import ViterbiParser

from spacy_structpref.corpora import ptb_trees
from spacy_structpref.parsing.grammar import Annotation, estimate_grammar
from spacy_structpref.parsing.parser import Parser
from spacy_structpref.scoring.parseval import evalb, sentence_stats
from spacy_structpref.trees.brackets import parse_bracketed


def nltk_grammar(grammar, sentences):
    """The same binarised PCFG as an nltk PCFG: binary rules, each collapsed
    chain as one unary rule top -> bottom, and the lexical rules of the words
    of ``sentences``. nltk wants each tag's word distribution to sum to at
    most one, so every lexical probability is multiplied by one factor
    ``scale`` (a tree's probability changes by ``scale ** n_words``, the same
    for all trees of a sentence) and each tag's leftover mass goes to a dummy
    word. Returns (pcfg, scale)."""
    names = [s.replace(" ", "_") for s in grammar.states]
    nt = [Nonterminal(s) for s in names]
    prods = [ProbabilisticProduction(nt[a], [nt[b], nt[c]], prob=p) for a, b, c, p in grammar.binary]
    prods += [ProbabilisticProduction(nt[ch[0]], [nt[ch[-1]]], prob=p) for ch, p in grammar.chains]
    lexical = {}
    for words in sentences:
        for i, w in enumerate(words):
            ids, probs = grammar.tag_scores(w, i)
            for t, p in zip(ids.tolist(), probs.tolist()):
                lexical.setdefault((t, w), p)
    mass = {}
    for (t, w), p in lexical.items():
        mass[t] = mass.get(t, 0.0) + p
    scale = min(1.0, 0.999 / max(mass.values()))
    for (t, w), p in lexical.items():
        prods.append(ProbabilisticProduction(nt[t], [w], prob=p * scale))
    for t, m in mass.items():
        if m * scale < 1.0:
            prods.append(ProbabilisticProduction(nt[t], [f"<other:{names[t]}>"], prob=1.0 - m * scale))
    return PCFG(nt[grammar.root], prods), scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--nltk", type=int, default=20, help="short sentences for the NLTK comparison")
    ap.add_argument("--beam", type=float, default=1e-4)
    ap.add_argument("--threshold", type=float, default=1e-5)
    ap.add_argument("--merit", type=float, default=1e-6, help="merit_threshold (relative to the best tree)")
    ap.add_argument("--h", type=int, default=2)
    ap.add_argument("--v", type=int, default=2)
    ap.add_argument("--rare", type=int, default=2, help="rare_threshold of the lexicon")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()

    t0 = time.perf_counter()
    grammar = estimate_grammar(ptb_trees("train"), Annotation(horizontal_markov=args.h, vertical_markov=args.v),
                               rare_threshold=args.rare)
    print(f"grammar: {grammar.n_states} states, {len(grammar.binary)} binary rules, "
          f"{len(grammar.chains)} chain rules ({time.perf_counter() - t0:.1f} s)")
    parser = Parser(grammar, beam=args.beam, threshold=args.threshold, merit_threshold=args.merit)
    gold = ptb_trees("test")[:args.limit]

    t0, c0 = time.perf_counter(), time.process_time()
    results = [parser.parse(tree.leaves(), k=args.k) for tree in gold]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n_edges = sum(r.forest.n_edges for r in results if r.forest is not None)
    fallbacks = sum(r.fallback for r in results)
    print(f"\nparsed {len(gold)} sentences with forests and {args.k}-best lists: {wall:.1f} s wall, "
          f"{cpu:.1f} s CPU ({cpu / len(gold) * 1000:.0f} ms/sentence), {fallbacks} fallbacks, "
          f"{n_edges / len(gold):.0f} forest hyperedges/sentence, load {os.getloadavg()[0]:.2f}")

    best = evalb(gold, [r.tree for r in results])
    oracle_trees = []
    for g, r in zip(gold, results):
        cands = [parse_bracketed(text) for _, text in r.nbest]

        def f1(t):
            s = sentence_stats(g, t)
            return 2 * s.matched / (s.gold + s.test) if s.gold + s.test else 1.0
        oracle_trees.append(max(cands, key=f1))
    oracle = evalb(gold, oracle_trees)
    print("\n1-best")
    print(best.table())
    print(f"\n{args.k}-best oracle")
    print(oracle.table())
    print(f"\nF1 <=40: 1-best {best.short.f1:.2f}, oracle {oracle.short.f1:.2f};  "
          f"all: 1-best {best.all.f1:.2f}, oracle {oracle.all.f1:.2f}")

    if args.nltk:
        short = sorted((t for t in gold if 4 <= len(t.leaves()) <= 10), key=lambda t: len(t.leaves()))[:args.nltk]
        sents = [t.leaves() for t in short]
        pcfg, scale = nltk_grammar(grammar, sents)
        vit = ViterbiParser(pcfg, max_time=None)
        exact = Parser(grammar, beam=0.0, threshold=args.threshold)
        t0 = time.perf_counter()
        ours = [exact.parse(s, k=1) for s in sents]
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        theirs = [next(iter(vit.parse(s)), None) for s in sents]
        t_nltk = time.perf_counter() - t0
        ln2 = 0.6931471805599453  # nltk's logprob() is base 2
        diffs = [t.logprob() * ln2 - len(s) * math.log(scale) - o.log_prob
                 for s, o, t in zip(sents, ours, theirs) if t is not None]
        agree = sum(abs(d) < 1e-6 for d in diffs)
        higher = sum(d >= 1e-6 for d in diffs)
        print(f"\nNLTK ViterbiParser, same grammar, {len(sents)} sentences of {len(sents[0])}-{len(sents[-1])} words: "
              f"ours (no beam, forest + Viterbi) {t_ours:.2f} s, NLTK {t_nltk:.2f} s: {t_nltk / t_ours:.0f}x faster; "
              f"same best log-probability in {agree}/{len(sents)}, NLTK higher in {higher} (its PCFG lets a "
              f"collapsed chain's bottom start another chain, which ours does not), lower in "
              f"{len(sents) - agree - higher}")

if __name__ == "__main__":
    main()

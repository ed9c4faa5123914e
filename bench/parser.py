"""Benchmark of the forest_parser's two models, the PCFG and the span CRF,
on the PTB-sample test split (wsj_0170–0199), in one run.

PCFG: trains the grammar on the train split, parses all 413 test sentences
with forests and 50-best lists (timed, one core: the parser is
single-threaded), prints PARSEVAL (EVALB conventions) for the 1-best and the
50-best oracle, and the speed ratio against NLTK's ViterbiParser with the
same grammar on 20 short test sentences, measured in the same run.

Span CRF: trains from scratch on CPU exactly as the project does, by
spaCy's own training loop (``spacy train configs/span_parser.cfg``, in
this process, timed) on the train split (wsj_0001–0139) converted to
``.spacy`` files, with the static vectors the config names
(``corpus/vectors``: ``spacy project run train-vectors`` makes them),
keeping the best model on the dev split (wsj_0140–0169);
``--span-model DIR`` loads a pipeline trained that way instead (e.g.
``training/span_parser/model-best``; with ``--train-seconds`` the time its
training took, else the line says nan). The model then parses the test split
with forests and ``--k``-best lists (timed); its F1 is that of the 1-best
(CKY) tree, the most probable treebank tree under the CRF, every sentence
scored (sentences EVALB rejects, a predicted punctuation tag on a word that
is not punctuation in gold or the reverse, counted as EVALB counts them and
reported).

The last two lines, one per model, read

    MODEL: F1 <= 40 X.XX, all Y.YY, oracle@50 Z.ZZ, train T s, parse P s

(train: CPU-seconds of training, the grammar's estimation for the PCFG;
wall-seconds of ``spacy train`` for the span CRF; parse: CPU-seconds for the
test sentences with forests and k-best lists). With ``--samples S`` the span
CRF's lists are made again with S dropout samples (``forest_parser``'s
``samples``: its k // 2 best trees, the rest from S forward passes with
dropout on), and one line before the last two reads

    SpanCRF, S dropout samples: oracle@50 Z.ZZ, parse P s

    NLTK_DATA=../shared/nltk_data OPENBLAS_NUM_THREADS=1 python bench/parser.py [--k 50] [--nltk 20]
        [--span-model DIR [--train-seconds S]] [--span-overrides "--training.max_epochs 2"] [--samples 8]
"""
import argparse
import math
import os
import shlex
import tempfile
import time
from pathlib import Path

from nltk.grammar import PCFG, Nonterminal, ProbabilisticProduction
from nltk.parse import ViterbiParser
from spacy_structpref.cli.convert import convert
from spacy_structpref.corpora import ptb_trees
from spacy_structpref.parsing.grammar import Annotation, estimate_grammar
from spacy_structpref.parsing.parser import Parser
from spacy_structpref.scoring.parseval import EvalbParams, evalb, sentence_stats
from spacy_structpref.trees.brackets import parse_bracketed

# every sentence scored, as EVALB -e with a large bound: the error count is reported
SCORE_ALL = EvalbParams(max_error=None)


def summary(model, best, oracle_result, k, train_s, parse_s):
    """The bench's line for one model."""
    return (f"{model}: F1 <= 40 {best.short.f1:.2f}, all {best.all.f1:.2f}, oracle@{k} {oracle_result.short.f1:.2f}, "
            f"train {train_s:.0f} s, parse {parse_s:.1f} s")


def oracle(gold, results, params=None):
    """EVALB result of the best tree (sentence F1) of each k-best list."""
    picked = []
    for g, r in zip(gold, results):
        def f1(tree):
            s = sentence_stats(g, tree, *([params] if params else []))
            return 2 * s.matched / (s.gold + s.test) if s.gold + s.test else 1.0
        picked.append(max((parse_bracketed(text) for _, text in r.nbest), key=f1))
    return evalb(gold, picked, *([params] if params else []))


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
    ap.add_argument("--span-model", type=Path, default=None,
                    help="skip the span CRF's training: a pipeline trained by spacy train (its model-best)")
    ap.add_argument("--train-seconds", type=float, default=float("nan"),
                    help="with --span-model: the wall-seconds its training took")
    ap.add_argument("--span-config", type=Path, default=Path(__file__).parent.parent / "configs" / "span_parser.cfg")
    ap.add_argument("--span-overrides", default="", help="spacy train overrides, e.g. '--training.max_epochs 2'")
    ap.add_argument("--output", type=Path, default=None, help="where spacy train writes (default: a temporary dir)")
    ap.add_argument("--nltk", type=int, default=20, help="short sentences for the NLTK comparison")
    ap.add_argument("--beam", type=float, default=1e-4)
    ap.add_argument("--threshold", type=float, default=1e-5)
    ap.add_argument("--merit", type=float, default=1e-6, help="merit_threshold (relative to the best tree)")
    ap.add_argument("--h", type=int, default=2)
    ap.add_argument("--v", type=int, default=2)
    ap.add_argument("--rare", type=int, default=2, help="rare_threshold of the lexicon")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--samples", type=int, default=0, help="> 0: the span CRF's lists again with this many dropout "
                                                           "samples")
    args = ap.parse_args()
    lines = [bench_pcfg(args), bench_span_crf(args)]
    print("\n" + "\n".join(lines))


def bench_pcfg(args):
    """The PCFG's figures; returns its summary line."""
    t0, c0 = time.perf_counter(), time.process_time()
    grammar = estimate_grammar(ptb_trees("train"), Annotation(horizontal_markov=args.h, vertical_markov=args.v),
                               rare_threshold=args.rare)
    print(f"grammar: {grammar.n_states} states, {len(grammar.binary)} binary rules, "
          f"{len(grammar.chains)} chain rules ({time.perf_counter() - t0:.1f} s)")
    train_cpu = time.process_time() - c0
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
    oracle_result = oracle(gold, results)
    print("\n1-best")
    print(best.table())
    print(f"\n{args.k}-best oracle")
    print(oracle_result.table())
    print(f"\nF1 <=40: 1-best {best.short.f1:.2f}, oracle {oracle_result.short.f1:.2f};  "
          f"all: 1-best {best.all.f1:.2f}, oracle {oracle_result.all.f1:.2f}")

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
    return summary("PCFG", best, oracle_result, args.k, train_cpu, cpu)


def score(parser, gold, k=1, with_forest=False):
    """(EVALB result, parse results, CPU-seconds of parsing)."""
    c0 = time.process_time()
    results = parser.parse_many([tree.leaves() for tree in gold], k=k, with_forest=with_forest)
    cpu = time.process_time() - c0
    return evalb(gold, [r.tree for r in results], SCORE_ALL), results, cpu


def bench_span_crf(args):
    """The span CRF's figures; returns its summary line."""
    import spacy

    test = ptb_trees("test")
    if args.span_model is None:
        with tempfile.TemporaryDirectory() as tmp:
            out = args.output or Path(tmp) / "span_parser"
            args.span_model, args.train_seconds = train_span_crf(args.span_config, Path(tmp) / "ptb", out,
                                                                 shlex.split(args.span_overrides))
            return test_parser(spacy.load(args.span_model).get_pipe("forest_parser").parser, test, args)
    return test_parser(spacy.load(args.span_model).get_pipe("forest_parser").parser, test, args)


def train_span_crf(config: Path, corpus: Path, output: Path, overrides):
    """``spacy train config`` on the PTB-sample splits, in this process:
    (the model-best directory, wall-seconds of the training)."""
    from spacy.cli._util import parse_config_overrides
    from spacy.cli.train import train

    convert("ptb", corpus)
    settings = {"paths.train": str(corpus / "train.spacy"), "paths.dev": str(corpus / "dev.spacy"),
                **parse_config_overrides(overrides)}
    t0, c0 = time.perf_counter(), time.process_time()
    train(config, output, overrides=settings)
    wall = time.perf_counter() - t0
    print(f"span CRF training (spacy train {config.name}): {wall:.0f} s wall, {time.process_time() - c0:.0f} s CPU, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    return output / "model-best", wall


def test_parser(parser, test, args):
    one, _, one_cpu = score(parser, test)
    print(f"test CKY 1-best alone: F1 <= 40 {one.short.f1:.2f}, all {one.all.f1:.2f} ({one_cpu:.1f} s CPU)",
          flush=True)
    full, results, full_cpu = score(parser, test, k=args.k, with_forest=True)
    best_k = oracle(test, results, SCORE_ALL)
    n_edges = sum(r.forest.n_edges for r in results if r.forest is not None)
    print(f"\ntest: {len(test)} sentences, CKY 1-best alone {one_cpu:.1f} s CPU, "
          f"with forests and {args.k}-best {full_cpu:.1f} s CPU, {n_edges / len(test):.0f} forest "
          f"hyperedges/sentence, {full.short.errors} EVALB errors; load {os.getloadavg()[0]:.2f}")
    print("\n1-best\n" + full.table())
    print(f"\n{args.k}-best oracle\n" + best_k.table())
    if args.samples:
        parser.samples = args.samples
        _, sampled, sampled_cpu = score(parser, test, k=args.k, with_forest=True)
        parser.samples = 0
        sampled_k = oracle(test, sampled, SCORE_ALL)
        print(f"\n{args.k}-best oracle, lists with {args.samples} dropout samples\n" + sampled_k.table())
        print(f"\nSpanCRF, {args.samples} dropout samples: oracle@{args.k} {sampled_k.short.f1:.2f}, "
              f"parse {sampled_cpu:.1f} s")
    return summary("SpanCRF", full, best_k, args.k, args.train_seconds, full_cpu)


if __name__ == "__main__":
    main()

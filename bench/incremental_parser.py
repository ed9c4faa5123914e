"""Incremental parsing (Menchetti et al. 2005, §6.1): the
``attachment_predictor`` component trained on the PTB-sample train split (the
kernel voted perceptron, one per foot class, reduced trees: the component's
default learner, or any config with an ``attachment_predictor``), or loaded
with ``--model``, parses the test split greedily and with a beam. Prints
PARSEVAL (EVALB conventions, F1 on all sentences and on those of ≤ 40
words), the learner's first-pass error L_1/L_2/L_5 (%) on the test
preference sets (gold prefixes; independent of the search), fallback words
and parsing time (wall, and the CPU time of a single process); the last
two lines are

    greedy: F1 <= 40 X.XX, L_1 Y.YY, Z s
    beam: F1 <= 40 X.XX, L_1 Y.YY, Z s

with Z the time to parse the test sentences with gold tags; ``--tagger``
adds the same rows with the tags of a tagger pipeline. Before parsing,
the scale of the beam's softmax is fitted on dev sentences
(``AttachmentPredictor.fit_softmax_scale``; ``--keep-scale`` keeps the
pipeline's).

    NLTK_DATA=../shared/nltk_data python bench/incremental_parser.py [--train-size 3068] [--beam-width 4]
        [--save DIR] [--model DIR] [--tagger DIR] [--n-process 1] [--output JSON]
"""
import argparse
import time
from pathlib import Path
from typing import Optional

import spacy
import srsly
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import load_model_from_config
from thinc.api import Config

from spacy_structpref.components.attachment_predictor import FACTORY, find_attachment_predictor
from spacy_structpref.corpora import corpus_docs
from spacy_structpref.scoring import evalb
from spacy_structpref.trees import doc_to_tree

R = (1, 2, 5)
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "attachment_predictor.cfg"


def train(config_path: Path, size, epochs: Optional[int], batch_size: int):
    """A blank pipeline from the config, trained on the first ``size`` train
    sentences: ``initialize``, then ``epochs`` passes of ``update`` (None:
    the config's ``[training] max_epochs``, the perceptron's passes)."""
    config = Config().from_disk(config_path)
    if epochs is None:
        epochs = config["training"]["max_epochs"]
    if epochs < 1:
        raise SystemExit(f"{config_path}: [training] max_epochs is {epochs}, not a number of passes: "
                         "give --epochs")
    nlp = load_model_from_config(config, auto_fill=True)
    pipe = find_attachment_predictor(nlp)
    examples = [Example(doc, doc) for doc in corpus_docs("ptb", "train", nlp.vocab, limit=size)]
    sgd = nlp.initialize(lambda: examples)  # [training.optimizer]: a recursive net's steps
    losses = {}
    for _ in range(epochs):
        for i in range(0, len(examples), batch_size):
            pipe.update(examples[i:i + batch_size], sgd=sgd, losses=losses)
    return nlp, len(examples), losses[pipe.name]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None,
                        help=f"a saved pipeline with an {FACTORY} (default: train one)")
    parser.add_argument("--config", type=Path, default=CONFIG, help="training config (without --model)")
    parser.add_argument("--train-size", type=int, default=None, help="training sentences (default all)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="passes of update (default: the config's [training] max_epochs)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per update")
    parser.add_argument("--save", type=Path, default=None, help="save the trained pipeline here")
    parser.add_argument("--beam-width", type=int, default=4)
    parser.add_argument("--test-size", type=int, default=0, help="test sentences (0: all)")
    parser.add_argument("--n-process", type=int, default=1,
                        help="parsing processes (nlp.pipe's n_process; cpu s is shown for 1 only)")
    parser.add_argument("--tagger", type=Path, default=None,
                        help="also parse with the tags of this pipeline (e.g. a distro_tagger's)")
    parser.add_argument("--keep-scale", action="store_true",
                        help="keep the pipeline's softmax_scale (default: fit it on dev)")
    parser.add_argument("--scale-sentences", type=int, default=100,
                        help="dev sentences to fit softmax_scale on (one parameter: a few thousand sets)")
    parser.add_argument("--output", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args()

    t0 = time.perf_counter()
    if args.model is not None:
        nlp = spacy.load(args.model)
        trained = f"loaded {args.model}"
    else:
        nlp, n, loss = train(args.config, args.train_size, args.epochs, args.batch_size)
        trained = f"trained on {n} sentences ({loss:.0f} loss)"
    pipe = find_attachment_predictor(nlp)
    t_train = time.perf_counter() - t0
    print(f"{FACTORY}: {trained} in {t_train:.1f} s; {type(pipe.prototype).__name__}, "
          f"{'reduced' if pipe.cfg['reduced'] else 'full'} trees"
          + (", one learner per foot class" if pipe.cfg["specialise"] else "")
          + f"; {len(pipe.inventory)} CP types", flush=True)
    if not args.keep_scale:
        t0 = time.perf_counter()
        scale = pipe.fit_softmax_scale(corpus_docs("ptb", "dev", nlp.vocab, limit=args.scale_sentences))
        print(f"softmax_scale {scale:.3g}, fitted on {args.scale_sentences} dev sentences in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    if args.save is not None:
        nlp.to_disk(args.save)

    gold = corpus_docs("ptb", "test", nlp.vocab, limit=args.test_size or None)
    gold_trees = [doc_to_tree(d) for d in gold]
    sources = {"gold": [Doc(nlp.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]) for d in gold]}
    if args.tagger is not None:
        tagger = spacy.load(args.tagger)
        sources[str(args.tagger)] = list(tagger.pipe(Doc(tagger.vocab, words=[t.text for t in d])
                                                     for d in gold))

    t0 = time.perf_counter()
    L = pipe.attachment_loss(gold, R)
    t_loss = time.perf_counter() - t0
    print(f"first-pass attachment on {len(gold)} test sentences: "
          + ", ".join(f"L_{r} {100 * L[r]:.2f}%" for r in R) + f" ({t_loss:.1f} s)", flush=True)

    print(f"\n{len(gold)} test sentences, {sum(len(d) for d in gold)} words; PCFG 1-best for comparison: "
          "python bench/parser.py")
    head = (f"{'tags':24s} {'search':6s} {'width':>5s} {'F1 all':>7s} {'F1 ≤40':>7s} {'exact':>6s} "
            f"{'tag acc':>7s} {'fallbk':>6s} {'parse s':>8s} {'cpu s':>7s}")
    print(head + "\n" + "-" * len(head), flush=True)
    rows = []
    for tags, inputs in sources.items():
        for search, width in (("greedy", 1), ("beam", args.beam_width)):
            pipe.beam_width = width
            docs = [d.copy() for d in inputs]
            t0, c0 = time.perf_counter(), time.process_time()
            parsed = list(nlp.pipe(docs, batch_size=16, n_process=args.n_process,
                                   disable=[name for name in nlp.pipe_names if name != pipe.name]))
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            result = evalb(gold_trees, [doc_to_tree(d) for d in parsed])
            row = {"tags": tags, "search": search, "beam_width": width, "f1": result.all.f1,
                   "f1_40": result.short.f1, "exact": result.all.exact_match,
                   "tagging_accuracy": result.all.tagging_accuracy,
                   "fallbacks": sum(d._.attach_fallbacks for d in parsed), "seconds": elapsed,
                   "cpu_seconds": cpu if args.n_process == 1 else None}
            rows.append(row)
            print(f"{tags[-24:]:24s} {search:6s} {width:5d} {row['f1']:7.2f} {row['f1_40']:7.2f} "
                  f"{row['exact']:6.2f} {row['tagging_accuracy']:7.2f} {row['fallbacks']:6d} {elapsed:8.1f} "
                  + (f"{cpu:7.1f}" if args.n_process == 1 else f"{'-':>7s}"), flush=True)
    if args.output is not None:
        srsly.write_json(args.output, {"model": trained, "train_seconds": t_train,
                                       "softmax_scale": pipe.softmax_scale, "sentences": len(gold),
                                       "L": {str(r): 100 * L[r] for r in R}, "rows": rows})
    print()
    for row in rows[:2]:  # gold tags
        print(f"{row['search']}: F1 <= 40 {row['f1_40']:.2f}, L_1 {100 * L[1]:.2f}, {row['seconds']:.1f} s")


if __name__ == "__main__":
    main()

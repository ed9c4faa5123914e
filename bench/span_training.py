"""The span CRF's training step with its dropout masks (single-precision
draws, ``spacy_structpref.models.dropout``) against the same step with
Thinc's (``Ops.get_dropout_mask``), in one process: blocks of ``--steps``
updates on the same batches, the two kinds of mask in turn, CPU time per
step (median over the blocks; the ratio is the median of each pair of
blocks' ratio, so that the machine's drift cancels) and the time spent
drawing masks. The last
line is

    span CRF training step: ours X ms, Thinc's masks Y ms, ratio R (masks A ms against B ms)

Needs the project's corpora and vectors (``spacy project run convert-ptb
train-vectors``), or ``--no-vectors``.

    python bench/span_training.py [--config configs/span_parser.cfg] [--steps 10] [--blocks 8]
"""
import argparse
import random
import statistics
import time
from pathlib import Path

from spacy.training import Corpus
from spacy.training.initialize import init_nlp
from spacy.util import load_model_from_config
from thinc.api import Adam, Config, fix_random_seed

import spacy_structpref.models.dropout as dropout
import spacy_structpref.models.span_crf as span_crf

ROOT = Path(__file__).resolve().parent.parent


def thincs_mask(ops, shape, rate):
    return ops.get_dropout_mask(shape, rate)


class TimedMasks:
    """Every dropout of the span CRF draws its masks with ``mask`` while
    this is installed; ``spent`` sums the CPU seconds of the draws."""

    def __init__(self, mask):
        self.mask, self.spent = mask, 0.0

    def __call__(self, ops, shape, rate):
        start = time.process_time()
        out = self.mask(ops, shape, rate)
        self.spent += time.process_time() - start
        return out

    def install(self) -> None:
        dropout.dropout_mask = span_crf.dropout_mask = self


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "span_parser.cfg")
    parser.add_argument("--train", type=Path, default=ROOT / "corpus" / "ptb" / "train.spacy")
    parser.add_argument("--no-vectors", action="store_true", help="train without the static vectors")
    parser.add_argument("--steps", type=int, default=10, help="updates per block")
    parser.add_argument("--blocks", type=int, default=8, help="blocks of each kind, in turn")
    args = parser.parse_args()
    config = Config().from_disk(args.config)
    if args.no_vectors:
        config["paths"]["vectors"] = None
        config["components"]["forest_parser"]["model"]["include_static_vectors"] = False
    fix_random_seed(0)
    nlp = init_nlp(load_model_from_config(config, auto_fill=True).config)
    batch = config["training"]["batcher"]["size"]
    examples = list(Corpus(str(args.train), gold_preproc=True)(nlp))
    random.Random(0).shuffle(examples)
    batches = [examples[i:i + batch] for i in range(0, batch * args.steps, batch)]
    sgd = Adam(0.001)
    ours = dropout.dropout_mask
    times = {"ours": [], "thinc": []}
    spent = {"ours": 0.0, "thinc": 0.0}
    for block in range(args.blocks):
        kinds = [("ours", ours), ("thinc", thincs_mask)]
        for name, mask in kinds if block % 2 == 0 else kinds[::-1]:
            timed = TimedMasks(mask)
            timed.install()
            start = time.process_time()
            for b in batches:
                nlp.update(b, sgd=sgd)
            times[name].append((time.process_time() - start) / args.steps * 1000)
            spent[name] += timed.spent / args.steps * 1000 / args.blocks
    median = {k: statistics.median(v) for k, v in times.items()}
    ratio = statistics.median(a / b for a, b in zip(times["ours"], times["thinc"]))  # pair by pair: drift cancels
    print(f"blocks of {args.steps} steps of {batch} sentences, CPU ms a step: ours "
          f"{[round(t) for t in times['ours']]}, Thinc's masks {[round(t) for t in times['thinc']]}")
    print(f"span CRF training step: ours {median['ours']:.0f} ms, Thinc's masks {median['thinc']:.0f} ms, "
          f"ratio {ratio:.2f} (masks {spent['ours']:.1f} ms against {spent['thinc']:.1f} ms)")


if __name__ == "__main__":
    main()

"""The span CRF's training step as shipped against the same step with one of
its parts put back as Thinc runs it, in one process: blocks of ``--steps``
updates on the same batches, the shipped step and the reference in turn,
CPU time per step (median over the blocks; the ratio is the median of each
pair of blocks' ratio, so that the machine's drift cancels). The
references:

- ``masks``: Thinc's dropout masks (``Ops.get_dropout_mask``) in place of
  the single-precision draws of ``spacy_structpref.models.dropout``;
- ``layers``: the label MLP's ReLU, layer norm and dropout as three layers
  in turn (``_span_layer_layers``) in place of the one pass per span
  (``_span_layer_fused``);
- ``optimizer``: Thinc's ``Adam.v1`` in place of the config's optimizer
  (``spacy_structpref.Adam.v1``: the same weights, its averages in one pass).

One line per reference:

    span CRF training step: ours X ms, REFERENCE Y ms, ratio R

(the masks' line ends with ``(masks A ms against B ms)``, the time spent
drawing them). Needs the project's corpora and vectors (``spacy project run
convert-ptb train-vectors``), or ``--no-vectors``.

    python bench/span_training.py [--config configs/span_parser.cfg] [--steps 10] [--blocks 8]
        [--against masks layers optimizer]
"""
import argparse
import random
import statistics
import time
from pathlib import Path

from spacy.training import Corpus
from spacy.training.initialize import init_nlp
from spacy.util import load_model_from_config, registry
from thinc.api import Config, fix_random_seed

import spacy_structpref.models.dropout as dropout
import spacy_structpref.models.span_crf as span_crf

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = {"masks": "Thinc's masks", "layers": "layered span layer", "optimizer": "Thinc's Adam"}


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


def optimizers(config: Config):
    """The config's optimizer and Thinc's ``Adam.v1`` with its arguments."""
    section = dict(config["training"]["optimizer"])
    section["learn_rate"] = 0.001  # a constant: the blocks of both take the same steps
    ours = registry.resolve({"o": section})["o"]
    section["@optimizers"] = "Adam.v1"
    return ours, registry.resolve({"o": section})["o"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "span_parser.cfg")
    parser.add_argument("--train", type=Path, default=ROOT / "corpus" / "ptb" / "train.spacy")
    parser.add_argument("--no-vectors", action="store_true", help="train without the static vectors")
    parser.add_argument("--steps", type=int, default=10, help="updates per block")
    parser.add_argument("--blocks", type=int, default=8, help="blocks of each kind, in turn")
    parser.add_argument("--against", nargs="+", choices=sorted(REFERENCES), default=list(REFERENCES))
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
    our_sgd, thincs_sgd = optimizers(config)
    shipped = {"mask": dropout.dropout_mask, "layer": span_crf._span_layer, "sgd": our_sgd}
    variants = {"masks": dict(shipped, mask=thincs_mask), "optimizer": dict(shipped, sgd=thincs_sgd),
                "layers": dict(shipped, layer=span_crf._span_layer_layers)}
    for reference in args.against:
        times = {"ours": [], reference: []}
        spent = {"ours": 0.0, reference: 0.0}
        kinds = [("ours", shipped), (reference, variants[reference])]
        for block in range(args.blocks):
            for name, parts in kinds if block % 2 == 0 else kinds[::-1]:
                timed = TimedMasks(parts["mask"])
                timed.install()
                span_crf._span_layer = parts["layer"]
                start = time.process_time()
                for b in batches:
                    nlp.update(b, sgd=parts["sgd"])
                times[name].append((time.process_time() - start) / args.steps * 1000)
                spent[name] += timed.spent / args.steps * 1000 / args.blocks
        span_crf._span_layer = shipped["layer"]
        median = {k: statistics.median(v) for k, v in times.items()}
        ratio = statistics.median(a / b for a, b in zip(times["ours"], times[reference]))  # pair by pair
        print(f"blocks of {args.steps} steps of {batch} sentences, CPU ms a step: ours "
              f"{[round(t) for t in times['ours']]}, {REFERENCES[reference]} {[round(t) for t in times[reference]]}")
        masks = f" (masks {spent['ours']:.1f} ms against {spent[reference]:.1f} ms)" if reference == "masks" else ""
        print(f"span CRF training step: ours {median['ours']:.0f} ms, {REFERENCES[reference]} "
              f"{median[reference]:.0f} ms, ratio {ratio:.2f}{masks}")


if __name__ == "__main__":
    main()

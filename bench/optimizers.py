"""The fused optimizers against Thinc's, on the parameter that dominates a
linear tagger's training: a hashed feature table whose minibatch gradient
touches few rows but whose weight decay and running average touch them all.

    python bench/optimizers.py [--rows 262144] [--width 45] [--steps 50] [--rounds 3]

For each setting (the paper protocol's plain SGD with weight decay, the
shipped configs' Adam without it and Brown DISTRO's Adam with it; all keep
averages) it runs the same
``--steps`` updates through Thinc's optimizer and through
``spacy_structpref``'s, interleaved ``--rounds`` times (the best round
counts), checks that the weights and averages agree bit for bit, and prints
``SETTING: fused X ms a step (Thinc: Y ms), speed-up Z``. One core.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy  # noqa: E402
from thinc.optimizers import SGD, Adam  # noqa: E402

from spacy_structpref.models.optimizers import FusedAdam, FusedSGD  # noqa: E402

SETTINGS = {
    "SGD, L2 1e-4, averages": (SGD, FusedSGD, dict(learn_rate=0.1, L2=1e-4, grad_clip=0.0)),
    "Adam, averages": (Adam, FusedAdam, dict(learn_rate=0.002, L2=0.0, grad_clip=0.0)),
    "Adam, L2 0.3, averages": (Adam, FusedAdam, dict(learn_rate=0.002, L2=0.3, grad_clip=0.0)),
}


def run(factory, kwargs, rows, width, steps, touched):
    """Seconds a step, the final weights and averages."""
    rng = numpy.random.default_rng(0)
    optimizer = factory(**kwargs)
    weights = numpy.zeros((rows, width), dtype="f")
    gradient = numpy.zeros_like(weights)
    batches = [(rng.integers(0, rows, touched), rng.normal(size=(touched, width)).astype("f"))
               for _ in range(steps)]
    seconds = 0.0
    for ids, values in batches:
        numpy.add.at(gradient, ids, values)
        start = time.perf_counter()
        weights, gradient = optimizer((0, "E"), weights, gradient)
        seconds += time.perf_counter() - start
    return seconds / steps, weights, optimizer.averages[(0, "E")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=262144)
    parser.add_argument("--width", type=int, default=45)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--touched", type=int, default=12000, help="table rows a minibatch's gradient touches")
    args = parser.parse_args()
    for name, (thinc_factory, fused_factory, kwargs) in SETTINGS.items():
        best = {"thinc": float("inf"), "fused": float("inf")}
        results = {}
        for _ in range(args.rounds):
            for which, factory in (("thinc", thinc_factory), ("fused", fused_factory)):
                seconds, weights, averages = run(factory, kwargs, args.rows, args.width, args.steps, args.touched)
                best[which] = min(best[which], seconds)
                results[which] = (weights, averages)
        same = all(numpy.array_equal(a, b) for a, b in zip(results["thinc"], results["fused"]))
        if not same:
            raise SystemExit(f"{name}: the fused optimizer's weights differ from Thinc's")
        print(f"{name}: fused {1000 * best['fused']:.1f} ms a step (Thinc: {1000 * best['thinc']:.1f} ms), "
              f"speed-up {best['thinc'] / best['fused']:.1f}", flush=True)


if __name__ == "__main__":
    main()

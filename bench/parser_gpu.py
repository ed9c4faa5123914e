"""The span CRF on a GPU against the CPU, the user's way: ``spacy train
configs/span_parser.cfg`` for the same number of steps with ``--gpu-id -1``
and ``--gpu-id G``, each timed, then ``spacy evaluate`` of each model on the
dev split with the same device, timed. The BiLSTM, the label MLP and the
optimizer run on the device; the tree CRF (inside, outside, k-best, forests)
runs on the host either way, so the ratio says what a GPU buys for this
model, not for a span CRF in general.

Without static vectors (``--vectors PATH`` adds them) so that it needs only
the converted corpus. The last lines read

    CPU: train N steps T s (W words/s), F1 <= 40 X.XX, parse P s
    GPU: train N steps T s (W words/s), F1 <= 40 X.XX, parse P s
    GPU / CPU speed: train R x, parse Q x

(train: wall seconds of ``spacy train``, its evaluations at steps 0 and N
on 20 dev sentences included; parse: wall seconds of ``spacy evaluate`` on
the dev split or ``--eval``, k-best lists and forests included.)

    python bench/parser_gpu.py [--corpus corpus/ptb] [--eval FILE.spacy] [--steps 400] [--gpu-id 0]
        [--vectors corpus/vectors]
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import spacy
from spacy.tokens import DocBin

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "span_parser.cfg"


def run(argv):
    """``argv`` in a fresh interpreter (each device's run starts clean), its
    wall time; its output passes through."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", *argv], check=True)
    return time.perf_counter() - start


def one_device(gpu_id: int, args, out: Path, mean_length: float):
    vectors = ["--paths.vectors", str(args.vectors)] if args.vectors else [
        "--paths.vectors", "null", "--components.forest_parser.model.include_static_vectors", "false"]
    train_s = run(["spacy", "train", str(CONFIG), "--output", str(out), "--gpu-id", str(gpu_id),
                   "--paths.train", str(args.corpus / "train.spacy"), "--paths.dev", str(args.corpus / "dev.spacy"),
                   "--training.max_steps", str(args.steps), "--training.max_epochs", "0",
                   "--training.eval_frequency", str(args.steps), "--corpora.dev.limit", "20", *vectors])
    metrics = out / "dev.json"
    parse_s = run(["spacy", "evaluate", str(out / "model-last"), str(args.eval or args.corpus / "dev.spacy"),
                   "--gpu-id", str(gpu_id), "--output", str(metrics), "--gold-preproc"])
    f1 = json.loads(metrics.read_text())["parseval_f_40"] * 100
    # words seen: steps × batches of 16 sentences of the train split's mean length
    return train_s, args.steps * 16 * mean_length / train_s, f1, parse_s


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("corpus/ptb"), help="holds train.spacy and dev.spacy")
    parser.add_argument("--eval", type=Path, default=None, help="the file to evaluate on (default: the dev split)")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--gpu-id", type=int, default=0)
    parser.add_argument("--vectors", type=Path, default=None)
    args = parser.parse_args()
    docs = list(DocBin().from_disk(args.corpus / "train.spacy").get_docs(spacy.blank("en").vocab))
    mean_length = sum(len(doc) for doc in docs) / len(docs)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, gpu_id in (("CPU", -1), ("GPU", args.gpu_id)):
            rows[name] = one_device(gpu_id, args, Path(tmp) / name, mean_length)
    for name, (train_s, wps, f1, parse_s) in rows.items():
        print(f"{name}: train {args.steps} steps {train_s:.0f} s ({wps:.0f} words/s), F1 <= 40 {f1:.2f}, "
              f"parse {parse_s:.1f} s")
    print(f"GPU / CPU speed: train {rows['CPU'][0] / rows['GPU'][0]:.2f} x, "
          f"parse {rows['CPU'][3] / rows['GPU'][3]:.2f} x")


if __name__ == "__main__":
    main()

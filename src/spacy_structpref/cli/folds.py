"""Jackknife folds for parsers trained by ``spacy train``: the fold corpora
and the fold trainings, side by side."""
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List, Optional, Sequence

from wasabi import msg

from ..errors import StructPrefError
from .common import single_threaded_environment


def fold_corpora(train_path: Path, output_dir: Path, n_folds: int) -> None:
    """``output_dir/fold_F/{train,held_out}.spacy`` for each fold F of
    :func:`~spacy_structpref.reranking.fold_assignment` (contiguous blocks, in
    corpus order), with a table of their sizes."""
    import spacy

    from ..reranking import fold_assignment
    from ..trees.doc import read_docs, write_docs

    docs = read_docs(train_path, spacy.blank("xx").vocab)
    folds = fold_assignment(len(docs), n_folds).tolist()
    rows = []
    for f in range(n_folds):
        parts = {"train": [d for d, g in zip(docs, folds) if g != f],
                 "held_out": [d for d, g in zip(docs, folds) if g == f]}
        for part, subset in parts.items():
            path = Path(output_dir) / f"fold_{f}" / f"{part}.spacy"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_docs(subset, path)
        rows.append((f, len(parts["train"]), len(parts["held_out"]), str(Path(output_dir) / f"fold_{f}")))
    msg.table(rows, header=("fold", "train docs", "held-out docs", "directory"), divider=True)


def fold_numbers(folds_dir: Path) -> List[int]:
    """The folds ``0 ... N`` that :func:`fold_corpora` wrote under ``folds_dir``
    (each ``fold_F`` with its ``train.spacy``); none, or a gap, is an error."""
    folds = sorted(int(p.name[len("fold_"):]) for p in Path(folds_dir).glob("fold_*")
                   if (p / "train.spacy").is_file() and p.name[len("fold_"):].isdigit())
    if not folds or folds != list(range(len(folds))):
        raise StructPrefError(f"{folds_dir} holds no fold_0 ... fold_N/train.spacy (run fold-corpora first)")
    return folds


def train_folds(config: Path, folds_dir: Path, output_dir: Path, overrides: Sequence[str] = (),
                n_jobs: int = 1, only: Optional[Sequence[int]] = None) -> List[int]:
    """``python -m spacy train CONFIG --paths.train FOLDS_DIR/fold_F/train.spacy
    --output OUTPUT_DIR/fold_F OVERRIDES`` for every fold F that
    :func:`fold_corpora` wrote (or those in ``only``), ``n_jobs`` at a time
    (side by side: with one BLAS thread each), each logging to ``OUTPUT_DIR/fold_F.log``; a
    table of their exit statuses. A failed fold is an error naming its log."""
    folds = fold_numbers(folds_dir)
    if only is not None:
        absent = sorted(set(only) - set(folds))
        if absent or not only:
            raise StructPrefError(f"--only: {folds_dir} has folds 0 to {folds[-1]}, not {absent or 'none'}")
        folds = sorted(set(only))
    if n_jobs < 1:
        raise StructPrefError(f"n_jobs must be at least 1, got {n_jobs}")
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    env = single_threaded_environment() if n_jobs > 1 else None

    def one(fold: int) -> int:
        cmd = [sys.executable, "-m", "spacy", "train", str(config), "--output", str(Path(output_dir) / f"fold_{fold}"),
               "--paths.train", str(Path(folds_dir) / f"fold_{fold}" / "train.spacy"), *overrides]
        with open(Path(output_dir) / f"fold_{fold}.log", "w", encoding="utf8") as log:
            return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode

    msg.info(f"training {len(folds)} folds, {n_jobs} at a time (logs: {output_dir}/fold_F.log)")
    with ThreadPoolExecutor(max_workers=n_jobs) as pool:
        status = list(pool.map(one, folds))
    msg.table([(f, s, str(Path(output_dir) / f"fold_{f}")) for f, s in zip(folds, status)],
              header=("fold", "exit status", "model"), divider=True)
    failed = [f for f, s in zip(folds, status) if s]
    if failed:
        raise StructPrefError(f"fold(s) {failed} failed: see {output_dir}/fold_{failed[0]}.log")
    return status

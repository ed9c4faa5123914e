"""Commands that run on a dask cluster (:mod:`spacy_structpref.distributed`):
``parse-corpus``, ``jackknife-lists``, ``attachment-utilities`` and
``gram``. Each runs on ``--scheduler tcp://HOST:PORT``, or on a
LocalCluster of ``--n-workers`` processes started for the command
(default: one per core, or this process for a small input; 0: this
process). dask is imported only when a command runs on a cluster."""
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import StructPrefError
from .common import command, output_directory, output_file

SCHEDULER_HELP = "Address of a running dask scheduler (tcp://HOST:PORT); default: a LocalCluster for the command"
WORKERS_HELP = "Worker processes of the LocalCluster (default: one per core, or this process for a small input; 0: this process)"


@command("parse-corpus")
def parse_corpus_cli(
    model: str = typer.Argument(..., help="Pipeline name or path (e.g. a trained forest_parser)"),
    output_dir: Path = typer.Argument(..., help="Where the shards (DocBins) and shards.json go"),
    inputs: List[Path] = typer.Argument(..., help=".spacy files or bracket files (one tree a line)"),
    shard_size: int = typer.Option(100, "--shard-size", help="Sentences per task and per shard file"),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    n_workers: Optional[int] = typer.Option(None, "--n-workers", help=WORKERS_HELP),
):
    """Parse a corpus on a dask cluster into DocBin shards: each Doc with the
    pipeline's annotations (a forest_parser's k-best list in doc._.nbest and
    pruned forest in doc._.forest), the Docs one process would give."""
    from ..distributed import parse_corpus

    output_directory(output_dir)
    paths = parse_corpus(model, inputs, output_dir, shard_size=shard_size, scheduler=scheduler,
                         n_workers=n_workers)
    typer.echo(f"wrote {len(paths)} shards and shards.json to {output_dir}")


@command("jackknife-lists")
def jackknife_lists_cli(
    trees: Path = typer.Argument(..., help="Gold training trees: .spacy with constituents or a bracket file"),
    output: Path = typer.Argument(..., help="Rerank items to write (msgpack, reranking.save_items)"),
    n_folds: int = typer.Option(10, "--folds", help="Jackknife folds"),
    k: int = typer.Option(50, "--k", help="Candidates per sentence"),
    forests: bool = typer.Option(True, "--forests/--no-forests", help="Keep each sentence's pruned forest"),
    shard_size: int = typer.Option(50, "--shard-size", help="Held-out sentences per task"),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    n_workers: Optional[int] = typer.Option(None, "--n-workers", help=WORKERS_HELP),
):
    """The reranker's jackknifed k-best lists (each fold parsed by the
    forest_parser grammar of the other folds) on a dask cluster."""
    from ..distributed import jackknife_lists, read_trees
    from ..reranking import count_fallbacks, save_items

    output_file(output)
    items = jackknife_lists(read_trees(trees), n_folds=n_folds, k=k, with_forest=forests, shard_size=shard_size,
                            scheduler=scheduler, n_workers=n_workers)
    save_items(output, items)
    typer.echo(f"wrote {len(items)} lists ({count_fallbacks(items)} fallbacks) to {output}")


@command("attachment-utilities")
def attachment_utilities_cli(
    model: str = typer.Argument(..., help="Trained pipeline with an attachment_predictor"),
    trees: Path = typer.Argument(..., help="Gold trees: .spacy with constituents or a bracket file"),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Write every set's utilities and gold index as JSON"),
    r: str = typer.Option("1,2,3,4,5", "--r", help="Comma-separated ranks of the L_r table"),
    shard_size: int = typer.Option(100, "--shard-size", help="Trees (then preference sets) per task"),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    n_workers: Optional[int] = typer.Option(None, "--n-workers", help=WORKERS_HELP),
):
    """First-pass attachment on a dask cluster: the candidate sets of the gold
    trees (shards of sentences) and the trained learner's utilities of them
    (its support sent once), with L_r (Menchetti et al. 2005, §5): the
    fraction of words whose gold candidate is not among the r best."""
    import json

    from wasabi import msg

    from ..distributed import attachment_utilities, read_trees
    from ..learners.metrics import loss_at_r
    from ..saving import atomic_file
    from .common import parse_numbers

    ranks = parse_numbers(r, int, "--r")
    if output is not None:
        output_file(output, "--output")
    utilities, gold = attachment_utilities(model, read_trees(trees), shard_size=shard_size, scheduler=scheduler,
                                           n_workers=n_workers)
    if not gold:
        raise StructPrefError(f"{trees} gives no preference set (every sentence has one word)")
    losses = loss_at_r(utilities, gold, ranks)
    n_candidates = sum(len(u) for u in utilities)
    msg.table([("sets", len(gold)), ("candidates", n_candidates), ("no gold candidate", gold.count(None))]
              + [(f"L_{k}", f"{100 * v:.2f} %") for k, v in losses.items()], header=("", str(trees)))
    if output is not None:  # the standard json module: floats written exactly (srsly's keep 10 digits)
        with atomic_file(output) as tmp:
            tmp.write_text(json.dumps({"loss": {str(k): v for k, v in losses.items()}, "gold": gold,
                                       "utilities": [[float(x) for x in u] for u in utilities]}), encoding="utf8")
        typer.echo(f"wrote {output}")


@command("gram")
def gram_cli(
    trees: Path = typer.Argument(..., help="Trees: .spacy with constituents or a bracket file (one tree a line)"),
    output: Path = typer.Argument(..., help="The matrix as a .npy file"),
    columns: Optional[Path] = typer.Option(None, "--columns", help="Trees of the columns (default: the rows)"),
    lam: float = typer.Option(0.4, "--lam", help="Decay λ in (0, 1]"),
    sigma: int = typer.Option(1, "--sigma", help="1: subset-tree kernel, 0: subtree kernel"),
    raw: bool = typer.Option(False, "--raw", help="No cosine normalisation"),
    block_size: int = typer.Option(500, "--block-size", help="Rows and columns per block task"),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    n_workers: Optional[int] = typer.Option(None, "--n-workers", help=WORKERS_HELP),
):
    """A tree-kernel Gram matrix (Collins & Duffy 2002) in blocks on a dask
    cluster: kernels.gram's matrix to 1e-12. Trees are taken as written."""
    import numpy as np

    from ..distributed import gram, read_trees
    from ..saving import atomic_file

    output_file(output)
    rows = read_trees(trees, normalize=False)
    cols = read_trees(columns, normalize=False) if columns is not None else None
    K = gram(rows, cols, lam=lam, sigma=sigma, normalize=not raw, block_size=block_size, scheduler=scheduler,
             n_workers=n_workers)
    with atomic_file(output) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, K)
    typer.echo(f"wrote the {K.shape[0]} × {K.shape[1]} matrix to {output}")

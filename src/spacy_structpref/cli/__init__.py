"""Command line: ``python -m spacy_structpref COMMAND`` (also ``spacy-structpref``
and, through the ``spacy_cli`` entry point, ``python -m spacy structpref-COMMAND``)."""
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import StructPrefError
from .common import DATA_HELP, MAX_ERRORS_HELP, SCORE_ALL_HELP, app, command, data_root, output_file, parse_numbers
from .project_steps import TIMINGS

@command("fetch-data")
def fetch_data_cli(
    dest: Path = typer.Argument(..., help="Directory that becomes an NLTK data root"),
    offline: bool = typer.Option(False, "--offline", help="Never download; copy from $NLTK_DATA only"),
):
    """Copy (from $NLTK_DATA) or download the corpus zips, checksum-verified."""
    from ..corpora.assets import fetch_nltk_data

    for line in fetch_nltk_data(dest, offline=offline):
        typer.echo(line)


@command("convert")
def convert_cli(
    corpus: str = typer.Argument(..., help="ptb, basque, brown, qc-coarse or qc-fine (TREC question classes)"),
    output_dir: Path = typer.Argument(..., help="Where train/dev/test .spacy files go"),
    data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N sentences of each split (0: all)"),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="Leave out bad sentences (counted) rather than fail"),
):
    """Convert a corpus to train/dev/test .spacy files and print a summary table."""
    from .convert import convert

    data_root(data)
    convert(corpus, output_dir, limit=limit, skip_bad=skip_bad)


@command("fold-corpora")
def fold_corpora_cli(
    train_path: Path = typer.Argument(..., help=".spacy training corpus"),
    output_dir: Path = typer.Argument(..., help="Where fold_F/train.spacy and fold_F/held_out.spacy go"),
    n_folds: int = typer.Option(4, "--folds", help="Jackknife folds (contiguous blocks of the corpus)"),
):
    """Cut a training corpus into jackknife folds: per fold, the other folds
    to train on and the fold itself to parse (rerank lists of parsers that
    never saw the sentence)."""
    from .folds import fold_corpora

    fold_corpora(train_path, output_dir, n_folds)


@command("train-vectors")
def train_vectors_cli(
    output: Path = typer.Argument(..., help="Directory for the blank pipeline holding the vectors"),
    corpora: List[Path] = typer.Argument(..., help=".spacy corpora whose tokens the vectors are trained on"),
    dim: int = typer.Option(300, "--dim", help="Dimensions"),
    window: int = typer.Option(2, "--window", help="Context words on each side (weighted 1/distance)"),
    min_count: int = typer.Option(2, "--min-count", help="Rarer words get no vector"),
    spelling: str = typer.Option("LOWER", "--spelling", help="Tokens trained as their ORTH, LOWER or NORM form"),
    lang: str = typer.Option("en", "--lang", help="Language of the blank pipeline"),
    seed: int = typer.Option(0, "--seed", help="Seed of the randomized SVD"),
):
    """Static word vectors from the corpora's own text (PPMI of word and
    context, truncated SVD; Levy, Goldberg & Dagan 2015), saved as a blank
    pipeline for a config's [initialize] vectors."""
    from .vectors import train_vectors

    train_vectors(output, corpora, lang=lang, spelling=spelling, dim=dim, window=window, min_count=min_count, seed=seed)


@command("train-folds", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train_folds_cli(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="spaCy training config"),
    folds_dir: Path = typer.Argument(..., help="What fold-corpora wrote"),
    output_dir: Path = typer.Argument(..., help="Where OUTPUT_DIR/fold_F/model-best go"),
    n_jobs: int = typer.Option(1, "--n-jobs", help="Fold trainings side by side"),
    only: Optional[str] = typer.Option(None, "--only", help="Train these folds alone, e.g. 0,1 (default: all)"),
):
    """Train one pipeline per jackknife fold with spacy train (extra options,
    e.g. --training.max_epochs 12, go to every training)."""
    from .folds import train_folds

    train_folds(config, folds_dir, output_dir, ctx.args, n_jobs,
                only=None if only is None else parse_numbers(only, int, "--only"))


@command("evaluate-parse")
def evaluate_parse_cli(
    model: str = typer.Argument(..., help="Pipeline name or path that writes constituents"),
    data_path: Path = typer.Argument(..., help=".spacy file with gold constituents"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON"),
    batch_size: int = typer.Option(32, "--batch-size"),
    max_errors: int = typer.Option(10, "--max-errors", "-e", help=MAX_ERRORS_HELP),
    score_all: bool = typer.Option(False, "--score-all", help=SCORE_ALL_HELP),
):
    """Parse the gold Docs' words and print the EVALB (PARSEVAL) table; EVALB's
    error lines go to stderr, and a run EVALB would stop ends in a failure."""
    from .evaluate import evaluate_parse

    if output is not None:
        output_file(output, "--output")
    evaluate_parse(model, data_path, output=output, batch_size=batch_size,
                   max_errors=None if score_all else max_errors)


@command("evalb")
def evalb_cli(
    gold: Path = typer.Argument(..., help="Gold trees, one bracketed tree a line"),
    test: Path = typer.Argument(..., help="Test trees, line by line with the gold file"),
    max_errors: int = typer.Option(10, "--max-errors", "-e", help=MAX_ERRORS_HELP),
    cutoff: int = typer.Option(40, "--cutoff", "-c", help="Length cut-off of the second summary"),
    score_all: bool = typer.Option(False, "--score-all", help=SCORE_ALL_HELP),
):
    """EVALB with COLLINS.prm (evalb -p COLLINS.prm GOLD TEST): its table on
    stdout, its errors on stderr, character for character; where EVALB stops
    (its MAX_ERROR), what it printed until then and exit status 1."""
    from dataclasses import replace

    from ..scoring.parseval import COLLINS, EvalbStopped, evalb_files

    try:
        result = evalb_files(gold, test, replace(COLLINS, cutoff_length=cutoff,
                                                 max_error=None if score_all else max_errors))
    except EvalbStopped as stop:
        result = stop.result
    for _, message in result.messages:
        typer.echo(message, err=True)
    typer.echo(result.report(), nl=False)
    if result.stopped:
        raise typer.Exit(1)


@command("draw-tree")
def draw_tree_cli(
    source: str = typer.Argument(..., help="A bracketed tree, or a .spacy file with constituents"),
    output: Path = typer.Argument(..., help="SVG file to write"),
    index: int = typer.Option(0, "--index", "-i", help="Which Doc of a .spacy file"),
):
    """Draw a constituency tree as SVG."""
    from ..saving import atomic_file
    from ..trees.brackets import parse_bracketed
    from ..trees.draw import tree_to_svg

    output_file(output)
    if source.endswith(".spacy"):
        import spacy

        from ..trees.doc import read_docs

        docs = read_docs(source, spacy.blank("xx").vocab)
        if not 0 <= index < len(docs) or docs[index]._.parse is None:
            raise StructPrefError(f"{source} has no Doc {index} with constituents ({len(docs)} Docs)")
        tree = docs[index]._.parse
    else:
        tree = parse_bracketed(source)
    with atomic_file(output) as tmp:
        tmp.write_text(tree_to_svg(tree), encoding="utf8")
    typer.echo(f"wrote {output}")


@command("label-map")
def label_map_cli(
    model: Path = typer.Argument(..., help="Trained pipeline with a distro_tagger"),
    output: Path = typer.Argument(..., help="Picture to write (.png or .svg)"),
):
    """Draw the label similarity map of a trained distro_tagger."""
    from .label_map import draw_label_map

    path, label_space = draw_label_map(model, output)
    typer.echo(f"wrote {path}: {label_space}")


@command("rerank-table")
def rerank_table_cli(
    table_json: Path = typer.Argument(..., help="A reranking experiment's rows (bench/reranker.py --json)"),
):
    """Print a reranking experiment in the form of Menchetti et al. (2005),
    Table 3, with each scorer's F1 gain (≤ 40 words) over the base parser's
    1-best (the PCFG's or the span CRF's)."""
    from ..experiments.reranking_tables import format_gains, format_rows, read_rows

    rows = read_rows(table_json)
    typer.echo(format_rows(rows))
    typer.echo(format_gains(rows))


@command("learning-curve", context_settings={"allow_extra_args": True,
                                              "ignore_unknown_options": True})
def learning_curve_cli(
    ctx: typer.Context,
    output_dir: Path = typer.Argument(..., help="Where subsets, runs, JSON and plot go"),
    configs: List[Path] = typer.Option(..., "--config", "-c", help="A training config (repeat: one curve each)"),
    train: Path = typer.Option(..., "--train", help="Training .spacy file to take fractions of"),
    test: Path = typer.Option(..., "--test", help=".spacy file every run is evaluated on"),
    fractions: str = typer.Option("0.125,0.25,0.5,1", "--fractions", help="Comma-separated, in (0, 1]"),
    seeds: str = typer.Option("0,1,2", "--seeds", help="Comma-separated seeds per point"),
    n_jobs: int = typer.Option(1, "--n-jobs", "-j", help="Trainings run in parallel"),
    metric: Optional[str] = typer.Option(None, "--metric", help="Score to plot (default: the config's main score)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Picture to write (.png or .svg)"),
):
    """Train configs on nested fractions of the training data with several seeds,
    evaluate on a test set, print a mean ± std table and draw the curves.
    Extra arguments (--training.max_epochs 10) go to every `spacy train`."""
    from .learning_curve import learning_curve

    result = learning_curve(configs, output_dir, train_path=train, test_path=test,
                            fractions=parse_numbers(fractions, float, "--fractions"),
                            seeds=parse_numbers(seeds, int, "--seeds"), n_jobs=n_jobs,
                            overrides=list(ctx.args), metric=metric, plot=plot)
    typer.echo(result["table"])
    typer.echo(f"wrote {output_dir / 'learning_curve.json'} and {result['plot']}")


@command("timed", context_settings={"ignore_unknown_options": True})
def timed_cli(
    step: str = typer.Argument(..., help="Name of the project step this command belongs to"),
    cmd: List[str] = typer.Argument(..., help="The command, after --"),
    timings: Path = typer.Option(TIMINGS, "--timings", help="Where step times are recorded"),
):
    """Run a command of a project step, print its time and record it (for `summary`).
    The command's exit status is this command's."""
    from .project_steps import run_timed

    status = run_timed(step, list(cmd), timings)
    if status:
        raise typer.Exit(status)


@command("side-by-side", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def side_by_side_cli(
    ctx: typer.Context,
    steps: List[str] = typer.Argument(..., help="Commands of project.yml, the long ones first"),
    n_jobs: int = typer.Option(2, "--n-jobs", "-j", help="Steps run at a time"),
    project_dir: Path = typer.Option(Path("."), "--project", help="Directory of project.yml"),
    force: bool = typer.Option(False, "--force", help="Run steps whose deps and outputs are unchanged"),
):
    """Run project steps N at a time, in the order their deps and outputs
    allow, each as `spacy project run STEP` would (logs in logs/STEP.log);
    pass every variable they use as --vars.NAME VALUE."""
    from .side_by_side import run_side_by_side, split_arguments

    steps, overrides = split_arguments([*steps, *ctx.args])
    run_side_by_side(steps, n_jobs, overrides, project_dir, force=force)


@command("summary")
def summary_cli(
    project_dir: Path = typer.Option(Path("."), "--project", help="Directory of project.yml"),
    workflow: str = typer.Option("all", "--workflow", help="Workflow whose steps to list"),
    timings: Path = typer.Option(TIMINGS, "--timings", help="Step times recorded by `timed`"),
):
    """Print every step of a project workflow with its time and key figure."""
    from .project_steps import summary

    typer.echo(summary(project_dir, workflow, timings))


from . import scale_out  # noqa: E402,F401  (registers parse-corpus, jackknife-lists, attachment-utilities, gram)
from . import attachment  # noqa: E402,F401  (registers attachment-tables, attachment-pca, attachment-alternatives)
from . import report  # noqa: E402,F401  (registers report: the results page)
from . import package  # noqa: E402,F401  (registers select-parser, package-meta: the pipeline package)
from . import ensemble  # noqa: E402,F401  (registers ensemble-span-parser)


def main() -> None:
    app()

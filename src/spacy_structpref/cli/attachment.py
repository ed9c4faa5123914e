"""Commands for first-pass attachment (Menchetti et al. 2005, §6.3): the
paper's tables on the PTB sample (``attachment-tables``) and pictures of one
word's alternatives (``attachment-pca``, their Fig. 2, and
``attachment-alternatives``)."""
from pathlib import Path
from typing import Optional

import srsly
import typer

from ..errors import StructPrefError
from .common import DATA_HELP, command, data_root

VP_CONFIG = Path("configs") / "learners" / "vp.cfg"
RNN_CONFIG = Path("configs") / "learners" / "rnn.cfg"
SMOKE_SUBSETS, SMOKE_EPOCHS = 2, 2  # what --max-steps leaves of the subsets and the RNN's epochs


def _log(line: str) -> None:
    typer.echo(line, err=True)


@command("attachment-tables")
def attachment_tables_cli(
    output: Path = typer.Argument(..., help="JSON file to write every figure to"),
    tables: str = typer.Option("1,2,4,5", "--tables", help="Which of the paper's tables (1, 2, 4, 5)"),
    sizes: str = typer.Option("100,500,2000,all", "--sizes", help="Table 1's training sizes (sentences; all: 3,068)"),
    subsets: int = typer.Option(5, "--subsets", help="Tables 2, 4, 5: disjoint training subsets"),
    subset_size: int = typer.Option(100, "--subset-size", help="Tables 2, 4, 5: sentences per subset"),
    eval_sentences: int = typer.Option(0, "--eval-sentences", help="Evaluate on the first N sentences (0: all)"),
    split: str = typer.Option("test", "--split", help="Evaluation split (dev or test)"),
    vp_config: Path = typer.Option(VP_CONFIG, "--vp-config", help="The VP's learner config"),
    rnn_config: Path = typer.Option(RNN_CONFIG, "--rnn-config", help="The RNN's learner config"),
    rnn_epochs: int = typer.Option(0, "--rnn-epochs", help="Override the RNN config's epochs (0: keep)"),
    rnn_members: int = typer.Option(1, "--rnn-members",
                                    help="Each RNN an ensemble of N nets seeded 1,000 apart, utilities averaged "
                                         "(1: one net, as the paper's; Table 4 needs 1)"),
    validation_sentences: Optional[int] = typer.Option(
        None, "--validation-sentences",
        help="The first N dev sentences, on whose preference sets the RNN stops early (0: none; default: all "
             "433 for a test evaluation, as the paper stopped on a held-out section, and 200 for a dev "
             "evaluation, which is scored on the rest)"),
    learners: str = typer.Option("vp,rnn", "--learners", help="Which learners to train (vp, rnn; Table 4 needs both)"),
    sampling: str = typer.Option("random", "--sampling",
                                 help="Training sentences at random from train, as the paper drew them (random: "
                                      "a permutation seeded --sample-seed; sizes nested, subsets disjoint), or "
                                      "in corpus order (first)"),
    sample_seed: int = typer.Option(0, "--sample-seed", help="Seed of the random sampling order"),
    max_steps: int = typer.Option(0, "--max-steps", help="A smoke run: cap every training size, the subset "
                                                         "size and the evaluation at N sentences, the subsets at "
                                                         f"{SMOKE_SUBSETS} and the RNN epochs at {SMOKE_EPOCHS} "
                                                         "(0: no cap)"),
    data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
):
    """Train and evaluate the first-pass attachment learners in the form of
    Menchetti et al. (2005), Tables 1, 2, 4 and 5 (L_1 by foot class and
    training size; 5 × 100-sentence subsets, VP vs RNN; a linear VP on the
    RNN's root states; pairwise vs setwise training and evaluation), print
    them and write them as JSON."""
    from ..experiments.attachment_tables import AttachmentExperiments, format_tables, parse_sizes, parse_tables

    if split not in ("dev", "test"):
        raise StructPrefError(f"--split is dev or test, got {split!r}")
    if max_steps < 0 or eval_sentences < 0 or rnn_epochs < 0 or (validation_sentences or 0) < 0:
        raise StructPrefError("--max-steps, --eval-sentences, --rnn-epochs and --validation-sentences are >= 0")
    if rnn_members < 1:
        raise StructPrefError(f"--rnn-members is at least 1, got {rnn_members}")
    chosen, size_list = parse_tables(tables), parse_sizes(sizes)
    data_root(data)
    if max_steps:
        size_list = sorted({min(s or max_steps, max_steps) for s in size_list})
        subset_size = min(subset_size, max_steps)
        eval_sentences = min(eval_sentences or max_steps, max_steps)
        subsets = min(subsets, SMOKE_SUBSETS)
        rnn_epochs = min(rnn_epochs or SMOKE_EPOCHS, SMOKE_EPOCHS)
        validation_sentences = min(max_steps if validation_sentences is None else validation_sentences, max_steps)
    experiments = AttachmentExperiments(vp_config, rnn_config, split=split, eval_sentences=eval_sentences or None,
                                        rnn_epochs=rnn_epochs or None, validation_sentences=validation_sentences,
                                        learners=[x.strip() for x in learners.split(",") if x.strip()],
                                        sampling=sampling, sample_seed=sample_seed, rnn_members=rnn_members,
                                        log=_log)
    output.parent.mkdir(parents=True, exist_ok=True)
    result = experiments.run(chosen, size_list, subsets, subset_size, save=lambda part: srsly.write_json(output, part))
    typer.echo(format_tables(result))
    typer.echo(f"wrote {output} ({result['seconds']:.0f} s)")


SOURCE_HELP = ("The sentence: a bracketed tree, ptb:SPLIT (with --index), a .spacy file with constituents "
               "(with --index) or tagged text 'word/TAG word/TAG …' (then the prefix is the model's parse)")
MODEL_HELP = "A trained pipeline with an attachment_predictor (default: train a learner with --config)"
WORD_HELP = "Which word's alternatives (0-based, as doc[i]; at least 1)"
INDEX_HELP = "Which sentence of ptb:SPLIT or a .spacy file"
CONFIG_HELP, TRAIN_HELP = "Learner config to train without --model", "Train sentences to train on without --model"


def _attachment_predictor(path: Path):
    """The ``attachment_predictor`` of the saved pipeline at ``path``."""
    import spacy

    from ..components.attachment_predictor import find_attachment_predictor

    if not Path(path).exists():
        raise StructPrefError(f"no trained pipeline at {str(path)!r}")
    return find_attachment_predictor(spacy.load(path))


def _alternatives(source: str, word: int, index: int, model: Optional[Path], config: Path, train_sentences: int,
                  data: Optional[Path]):
    from ..experiments.attachment_pictures import AttachmentModel, read_sentence, word_alternatives

    data_root(data)
    words, tags, tree = read_sentence(source, index)
    if model is not None:
        trained = AttachmentModel.from_predictor(_attachment_predictor(model), str(model))
    else:
        _log(f"training {config} on {train_sentences} train sentences (give --model to use a trained pipeline)")
        trained = AttachmentModel.train(config, train_sentences)
    return word_alternatives(trained, words, tags, word, tree)


def _report(path: Path, alts) -> None:
    from ..learners.metrics import gold_rank

    if alts.gold is None:
        typer.echo(f"wrote {path}: {len(alts.edits)} alternatives (gold unknown)")
        return
    typer.echo(f"wrote {path}: {len(alts.edits)} alternatives; gold ranked {gold_rank(alts.utilities, alts.gold):.0f} "
               f"(ties count against it), " + ("predicted" if alts.predicted == alts.gold else "not predicted"))


@command("attachment-pca")
def attachment_pca_cli(
    source: str = typer.Argument(..., help=SOURCE_HELP),
    word: int = typer.Argument(..., help=WORD_HELP),
    output: Path = typer.Argument(..., help="Picture to write (.png or .svg)"),
    index: int = typer.Option(0, "--index", "-i", help=INDEX_HELP),
    model: Optional[Path] = typer.Option(None, "--model", help=MODEL_HELP + "; its learner must be the RNN"),
    config: Path = typer.Option(RNN_CONFIG, "--config", help=CONFIG_HELP),
    train_sentences: int = typer.Option(100, "--train-sentences", help=TRAIN_HELP),
    data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
):
    """Menchetti et al. (2005), Fig. 2: the recursive net's root-state vectors
    of one word's alternatives projected on their first two principal
    components, gold (×) and predicted (○) marked, coloured by utility."""
    from ..experiments.attachment_pictures import draw_state_pca

    alts = _alternatives(source, word, index, model, config, train_sentences, data)
    path = draw_state_pca(alts, output)
    _report(path, alts)


@command("attachment-alternatives")
def attachment_alternatives_cli(
    source: str = typer.Argument(..., help=SOURCE_HELP),
    word: int = typer.Argument(..., help=WORD_HELP),
    output: Path = typer.Argument(..., help="SVG file to write"),
    index: int = typer.Option(0, "--index", "-i", help=INDEX_HELP),
    model: Optional[Path] = typer.Option(None, "--model", help=MODEL_HELP),
    config: Path = typer.Option(VP_CONFIG, "--config", help=CONFIG_HELP),
    train_sentences: int = typer.Option(100, "--train-sentences", help=TRAIN_HELP),
    top: int = typer.Option(8, "--top", help="Alternatives to draw, highest utility first (and the gold one)"),
    columns: int = typer.Option(2, "--columns", help="Alternatives per row"),
    data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
):
    """Draw one word's first-pass attachment alternatives as SVG: the best by
    utility, each with its connection path and anchor coloured, the gold
    alternative framed green and the predicted one orange."""
    from ..experiments.attachment_pictures import write_alternatives_svg

    alts = _alternatives(source, word, index, model, config, train_sentences, data)
    path = write_alternatives_svg(alts, output, top=top, columns=columns)
    _report(path, alts)

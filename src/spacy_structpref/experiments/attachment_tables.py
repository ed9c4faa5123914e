"""The first-pass attachment experiments of Menchetti et al. (2005, §6.3)
on the PTB sample, in the form of their tables:

- **Table 1**: the error ``L_1`` (%, eq. 8) of the kernel voted perceptron
  (VP) and the recursive neural network (RNN), reduced trees, one learner
  per foot class, by foot class and training size, with each class's share
  of the evaluation sets;
- **Table 2**: ``L_1`` of the VP and the RNN trained on disjoint subsets of
  the training sentences (the paper: 5 of 100), reduced trees, one learner
  for all classes, with mean ± std;
- **Table 4**: the same subsets, a VP with a *linear* kernel on the trained
  RNN's root-state vectors ``u(root(x))`` (eq. 6) beside the tree-kernel VP;
- **Table 5**: pairwise vs setwise training (the losses of eqs. 13 and 10;
  our VP has a setwise form too, an extension of this package) × pairwise
  vs setwise evaluation (the pairwise error of eq. 14, ``L_1`` = eq. 15),
  mean ± std over the subsets.

Training sentences are drawn as the paper drew them, at random from the
train split (``sampling="random"``: one seeded permutation of it; Table 1's
sizes are its first N sentences, so nested, and the subsets its consecutive
blocks, so disjoint); ``sampling="first"`` takes the train split in corpus
order instead (sentences of the same articles together); the CP inventory is
read off the whole train split; evaluation is on every preference set of the
test split (or its first sentences). The RNN stops early as the paper's did
(on 1,000 held-out sentences): each epoch's weights are scored by ``L_1`` on
the preference sets of the dev split (all of it for a test evaluation; for a
dev evaluation its first ``validation_sentences``, left out of the
evaluation) and the best epoch's kept (with specialisation, each foot class's
net on that class's validation sets). Learners and their training schedules
are built from config files (``configs/learners/vp.cfg`` and ``rnn.cfg``);
subset ``k`` seeds its learners with ``k``. Every candidate set is built once per evaluation and
scored by all the models trained at that point.
"""
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from spacy.util import registry
from thinc.api import Config

from ..errors import StructPrefError
from ..incremental.candidates import CandidateSets, CPInventory, PreferenceSet, learner_inputs, preference_sets_of
from ..incremental.classes import FOOT_CLASSES, OTHERS, foot_class, set_classes
from ..trees.arrays import SymbolTable

TABLES = (1, 2, 4, 5)
CLASSES = list(FOOT_CLASSES) + [OTHERS]
# the paper's column heads
CLASS_HEADS = {"Nouns": "Noun", "Verbs": "Verb", "Prepositions": "Prep.", "Articles": "Article",
               "Punctuation": "Punc.", "Adjectives": "Adjec.", "Adverbs": "Adverb", "Conjunctions": "Conj.",
               "Possessives": "Poss.", "Others": "Other"}
LEARNERS = ("vp", "rnn")
# a dev evaluation stops the RNN early on the first 200 dev sentences and is scored on the rest
DEV_VALIDATION_SENTENCES = 200
SAMPLINGS = ("random", "first")  # the order training sentences are taken in
NAMES = {"vp": "VP", "rnn": "RNN"}
LOSS_CODE = {"pairwise": "P", "setwise": "S"}
# Menchetti et al. (2005), WSJ: the figures beside which ours are printed
PAPER = {
    "table1_total": {"VP": {100: 27.3, 500: 21.3, 2000: 18.3, 10000: 15.3, 40000: 13.4},
                     "RNN": {100: 26.6, 500: 19.4, 2000: 17.3, 10000: 14.5, 40000: 12.6}},
    "table2": {"VP": "26.7 ± 0.4", "RNN": "26.0 ± 1.0"},
    "table4": {"VP on RNN state": "27.1 ± 1.1", "VP": "26.7 ± 0.4"},
    "table5": {("P", "P"): ("1.79 ± 0.12", "2.32 ± 0.09"), ("P", "S"): ("29.1 ± 1.8", "26.7 ± 0.4"),
               ("S", "P"): ("1.50 ± 0.20", "NA"), ("S", "S"): ("26.0 ± 1.0", "NA")},
}

Scorer = Callable[[object, str], np.ndarray]  # (candidate DAG, foot tag) -> utilities


def fit_attachment_learner(learner, schedule, psets: Sequence[PreferenceSet], symbols: SymbolTable,
                           reduced: bool = True, specialise: bool = False,
                           validation: Optional[Sequence[PreferenceSet]] = None) -> Tuple[object, Scorer]:
    """Train a preference learner with ``schedule`` (:func:`~..learners.fit`)
    on the candidates of first-pass attachment sets (built on access over
    ``symbols``, a VP's ``kernel.symbols``; with tree reduction when
    ``reduced``), one clone per foot class when ``specialise`` (Menchetti et
    al. 2005, §6.3.1). ``validation``: held-out preference sets to stop
    early on (per foot class when specialised). Returns the trained learner
    and its scorer ``(candidate DAG, foot tag) -> utilities``."""
    from ..learners import SpecialisedLearner, fit

    trained = SpecialisedLearner(learner) if specialise else learner
    # every epoch passes over the same sets: their DAGs are kept (compactly) after the first
    held = learner_inputs(validation, symbols, reduced, specialise, keep=True) if validation else None
    fit(trained, *learner_inputs(psets, symbols, reduced, specialise, keep=True), schedule=schedule,
        validation=held)
    if specialise:
        return trained, lambda dag, foot: trained.utilities(dag, foot_class(foot))
    return trained, lambda dag, foot: trained.utilities(dag)


def validation_count(requested: Optional[int], split: str, n_dev: int) -> int:
    """How many of the ``n_dev`` dev sentences an early-stopping learner
    stops on: ``requested``, or by default all of dev for a test evaluation
    and the first ``DEV_VALIDATION_SENTENCES`` for a dev one, which is
    scored on the dev sentences after them (so some must be left)."""
    if requested is None:
        requested = DEV_VALIDATION_SENTENCES if split == "dev" else n_dev
    if not 0 <= requested <= n_dev - (split == "dev"):
        raise StructPrefError(f"validation sentences must be between 0 and the {n_dev} dev sentences "
                              f"(fewer when evaluating on dev), got {requested}")
    return requested


def held_out_trees(split: str, validation_sentences: Optional[int] = None,
                   eval_sentences: Optional[int] = None) -> Tuple[List, List]:
    """The dev trees an early-stopping learner stops on (``validation_count``
    of them) and the ``split`` trees it is evaluated on (on dev, those after
    the validation ones; at most ``eval_sentences``)."""
    from ..corpora import ptb_trees

    dev = ptb_trees("dev")
    n_valid = validation_count(validation_sentences, split, len(dev))
    evaluation = dev[n_valid:] if split == "dev" else ptb_trees(split)
    return dev[:n_valid], evaluation[:eval_sentences]


def learner_from_config(path: Path, overrides: Optional[dict] = None) -> tuple:
    """``(learner, schedule)``: the ``[learner]`` and ``[schedule]`` blocks of
    a config file, resolved, with dotted ``overrides`` (``{"learner.seed":
    3}``); nothing else may be in it."""
    path = Path(path)
    if not path.is_file():
        raise StructPrefError(f"no learner config {path} (run from the project directory, where "
                              "configs/learners/ holds vp.cfg and rnn.cfg, or give the config's path)")
    config = Config().from_disk(path, overrides=overrides or {})
    if set(config) != {"learner", "schedule"}:
        raise StructPrefError(f"{path} must hold a [learner] and a [schedule] block and nothing else, "
                              f"not {', '.join(f'[{name}]' for name in config) or 'nothing'}")
    resolved = registry.resolve(config)
    from ..learners import Schedule

    if not isinstance(resolved["schedule"], Schedule):
        raise StructPrefError(f"{path}: [schedule] must build a spacy_structpref.Schedule.v1")
    return resolved["learner"], resolved["schedule"]


def parse_sizes(text: str) -> List[Optional[int]]:
    """``"100,500,2000,all"`` -> ``[100, 500, 2000, None]`` (None: the whole train split)."""
    sizes = []
    for item in (x.strip() for x in str(text).split(",")):
        if not item:
            continue
        if item == "all":
            sizes.append(None)
            continue
        try:
            size = int(item)
        except ValueError:
            raise StructPrefError(f"training sizes are positive integers or 'all', got {item!r}") from None
        if size < 1:
            raise StructPrefError(f"training sizes are positive integers or 'all', got {size}")
        sizes.append(size)
    if not sizes:
        raise StructPrefError(f"no training size in {text!r}")
    return sizes


def parse_tables(text: str) -> List[int]:
    """``"1,2,4,5"`` -> ``[1, 2, 4, 5]``."""
    try:
        tables = sorted({int(x) for x in str(text).split(",") if x.strip()})
    except ValueError:
        raise StructPrefError(f"tables are numbers among {TABLES}, got {text!r}") from None
    if not tables or any(t not in TABLES for t in tables):
        raise StructPrefError(f"tables are numbers among {TABLES}, got {text!r}")
    return tables


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    values = list(values)
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _pm(values: Sequence[float], digits: int = 1) -> str:
    m, s = mean_std(values)
    return f"{m:.{digits}f} ± {s:.{digits}f}"


@dataclass
class Scores:
    """One model's evaluation: ``L_1`` (%) overall and per foot class, the
    pairwise error (%, eq. 14), and the seconds it trained for."""

    L1: float
    by_class: Dict[str, float]
    pairwise: float
    train_seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"L1": self.L1, "L1_by_class": self.by_class, "pairwise_error": self.pairwise,
                "train_seconds": self.train_seconds, **self.extra}


class AttachmentExperiments:
    """The training data, the CP inventory, the evaluation sets and the
    learner configs the tables share. ``eval_sentences``: only the first
    sentences of the evaluation split (None: all); ``rnn_epochs``: override
    the RNN config's epochs (short runs); ``rnn_members``: each RNN is an
    ensemble of that many nets, seeded 1,000 apart, their utilities averaged
    (1: one net, the paper's); ``validation_sentences``: the first
    dev sentences whose preference sets the RNN stops early on (0: none;
    None: all of dev for a test evaluation, the first 200 for a dev one,
    which starts after them); ``learners``: which of vp, rnn to
    train (Table 4 needs both); ``sampling``: ``"random"`` (a permutation of
    train seeded ``sample_seed``) or ``"first"`` (corpus order), the order
    training sizes and subsets are taken in; ``log``: progress lines."""

    def __init__(self, vp_config: Path, rnn_config: Path, split: str = "test",
                 eval_sentences: Optional[int] = None, rnn_epochs: Optional[int] = None,
                 validation_sentences: Optional[int] = None, learners: Sequence[str] = LEARNERS,
                 sampling: str = "random", sample_seed: int = 0, rnn_members: int = 1,
                 log: Callable[[str], None] = lambda line: None):
        from ..corpora import ptb_trees

        self.learners = [kind for kind in LEARNERS if kind in learners]
        if not self.learners or set(learners) - set(LEARNERS):
            raise StructPrefError(f"learners are among {', '.join(LEARNERS)}, got {list(learners)}")

        self.configs = {"vp": Path(vp_config), "rnn": Path(rnn_config)}
        # a bad config fails now, not after hours of training
        built = {kind: learner_from_config(path)[1] for kind, path in self.configs.items()}
        if rnn_epochs is not None and rnn_epochs < 1:
            raise StructPrefError(f"rnn_epochs must be >= 1, got {rnn_epochs}")
        if eval_sentences is not None and eval_sentences < 1:
            raise StructPrefError(f"eval_sentences must be >= 1 (or None: all), got {eval_sentences}")
        if sampling not in SAMPLINGS:
            raise StructPrefError(f"sampling is one of {', '.join(SAMPLINGS)}, got {sampling!r}")
        if not isinstance(rnn_members, int) or rnn_members < 1:
            raise StructPrefError(f"rnn_members must be an integer of at least 1, got {rnn_members!r}")
        self.rnn_epochs, self.rnn_members, self.log = rnn_epochs, rnn_members, log
        valid_trees, evaluation = held_out_trees(split, validation_sentences, eval_sentences)  # checked before train
        self.validation_sentences = len(valid_trees)
        self.train = ptb_trees("train")
        self.sampling, self.sample_seed = sampling, sample_seed
        self.order = (np.random.RandomState(sample_seed).permutation(len(self.train)).tolist()
                      if sampling == "random" else list(range(len(self.train))))
        self.inventory = CPInventory.from_trees(self.train)
        self.symbols = SymbolTable()  # every tree-kernel VP and every candidate DAG share it
        self.split = split
        # only a learner that stops early reads them; the dev offset holds for every learner
        stops_early = any(built[kind].patience is not None for kind in self.learners)
        self.validation = preference_sets_of(valid_trees, self.inventory) if stops_early else []
        self.eval_sets = preference_sets_of(evaluation, self.inventory)
        self.eval_gold = [s.gold for s in self.eval_sets]
        self.eval_class = set_classes(self.eval_sets)
        self.eval_sentences = len(evaluation)

    # -- parts ----------------------------------------------------------------
    def learner(self, kind: str, seed: int, loss: Optional[str] = None) -> tuple:
        """A fresh learner from the ``kind`` (vp, rnn) config, seeded, with
        ``loss`` (default: the config's), and its schedule. A VP must have a
        tree kernel, which is given the experiments' SymbolTable."""
        overrides = {"learner.seed": seed}
        if loss is not None:
            overrides["learner.loss"] = loss
        if kind == "rnn" and self.rnn_epochs is not None:
            overrides["schedule.epochs"] = self.rnn_epochs
        learner, schedule = learner_from_config(self.configs[kind], overrides)
        from ..learners import EnsembleLearner
        from ..learners.kernels import TreeKernel

        if kind == "rnn" and self.rnn_members > 1:
            return EnsembleLearner.of_clones(learner, self.rnn_members), schedule
        kernel = getattr(learner, "kernel", None)
        if kind == "vp":
            if not isinstance(kernel, TreeKernel):
                raise StructPrefError(f"{self.configs['vp']}: the VP needs a tree kernel "
                                      f"(spacy_structpref.TreeKernel.v1), not {type(kernel).__name__}")
            kernel.symbols = self.symbols
        return learner, schedule

    def config_loss(self, kind: str) -> str:
        return learner_from_config(self.configs[kind])[0].loss

    def training_sets(self, first: int, last: Optional[int]) -> List[PreferenceSet]:
        """The preference sets of training sentences ``first`` to ``last`` in
        the sampling order."""
        trees = [self.train[i] for i in self.order[first:last]]
        if last is not None and last > len(self.train):
            raise StructPrefError(f"training sentences {first}–{last} exceed the {len(self.train)} of train")
        return preference_sets_of(trees, self.inventory)

    def evaluate(self, scorers: Dict[str, Scorer]) -> Dict[str, Scores]:
        """Each scorer's :class:`Scores` on the evaluation sets; each set's
        candidates are built once for all scorers."""
        from ..learners import loss_at_r, pairwise_error

        utilities = {name: [] for name in scorers}
        for s in self.eval_sets:
            dag = s.dag(self.symbols, reduced=True)
            for name, scorer in scorers.items():
                utilities[name].append(np.asarray(scorer(dag, s.foot), dtype=float))
        out = {}
        for name, u in utilities.items():
            by_class = {}
            for cls in CLASSES:
                members = [i for i, c in enumerate(self.eval_class) if c == cls]
                if members:
                    by_class[cls] = 100 * loss_at_r([u[i] for i in members], [self.eval_gold[i] for i in members])[1]
            out[name] = Scores(100 * loss_at_r(u, self.eval_gold)[1], by_class,
                               100 * pairwise_error(u, self.eval_gold))
        return out

    def class_sizes(self) -> Dict[str, float]:
        """Each foot class's share (%) of the evaluation sets."""
        n = len(self.eval_class)
        return {cls: 100 * self.eval_class.count(cls) / n for cls in CLASSES}

    def _timed_fit(self, built: tuple, psets, specialise: bool):
        (learner, schedule), t0 = built, time.perf_counter()
        validation = self.validation if schedule.patience is not None else None
        trained, scorer = fit_attachment_learner(learner, schedule, psets, self.symbols, specialise=specialise,
                                                 validation=validation)
        if validation:
            self.log(f"best validation epochs: {_best_epochs(trained)}")
        return trained, scorer, time.perf_counter() - t0

    # -- the tables -----------------------------------------------------------
    def table1(self, sizes: Sequence[Optional[int]]) -> dict:
        """L_1 by foot class and training size, VP and RNN, reduced and
        specialised (Table 1)."""
        rows = []
        for size in sizes:
            psets = self.training_sets(0, size)
            n = len(self.train[:size])
            scorers, seconds = {}, {}
            for kind in self.learners:
                _, scorers[kind], seconds[kind] = self._timed_fit(self.learner(kind, 0), psets, specialise=True)
                self.log(f"table 1: {NAMES[kind]} on {n} sentences ({len(psets)} sets) trained in "
                         f"{seconds[kind]:.1f} s")
            t0 = time.perf_counter()
            scores = self.evaluate(scorers)
            t_eval = time.perf_counter() - t0
            for kind in self.learners:
                scores[kind].train_seconds = seconds[kind]
                rows.append({"learner": NAMES[kind], "sentences": n, "training_sets": len(psets),
                             "eval_seconds": t_eval, **scores[kind].to_dict()})
                self.log(f"table 1: {NAMES[kind]} at {n} sentences: L_1 {scores[kind].L1:.2f}% "
                         f"(evaluated in {t_eval:.1f} s)")
        return {"classes": CLASSES, "class_sizes": self.class_sizes(), "rows": rows}

    def subset_tables(self, n_subsets: int, size: int, tables: Sequence[int]) -> dict:
        """Tables 2, 4 and 5 (those in ``tables``) on ``n_subsets`` disjoint
        subsets of ``size`` training sentences, reduced, not specialised."""
        if n_subsets < 1 or size < 1:
            raise StructPrefError(f"need at least one subset of at least one sentence, got {n_subsets} of {size}")
        if n_subsets * size > len(self.train):
            raise StructPrefError(f"{n_subsets} × {size} sentences exceed the {len(self.train)} of train")
        from ..learners import KernelPerceptron, LinearKernel, fit

        if 4 in tables and set(self.learners) != set(LEARNERS):
            raise StructPrefError("Table 4 needs both learners (the RNN's states and the tree-kernel VP)")
        if 4 in tables and self.rnn_members > 1:
            raise StructPrefError("Table 4 reads one RNN's root states: rnn_members must be 1")
        losses = {kind: self.config_loss(kind) for kind in self.learners}
        per_subset = []
        for k in range(n_subsets):
            psets = self.training_sets(k * size, (k + 1) * size)
            wanted = {(kind, losses[kind]) for kind in self.learners}
            if 5 in tables:
                wanted |= {(kind, loss) for kind in self.learners for loss in LOSS_CODE}
            trained, scorers, seconds = {}, {}, {}
            for kind, loss in sorted(wanted):
                name = f"{kind}-{loss}"
                trained[name], scorers[name], seconds[name] = self._timed_fit(self.learner(kind, k, loss), psets,
                                                                               specialise=False)
                self.log(f"subset {k + 1}: {NAMES[kind]} ({loss}) on {size} sentences ({len(psets)} sets) "
                         f"trained in {seconds[name]:.1f} s")
            if 4 in tables:
                rnn, (vp, vp_schedule) = trained[f"rnn-{losses['rnn']}"], self.learner("vp", k)
                linear = KernelPerceptron(LinearKernel(), loss=vp.loss, average=vp.average, seed=vp.seed)
                sets = CandidateSets(psets, self.symbols, reduced=True)
                t0 = time.perf_counter()
                states = [rnn.root_states(sets[i]) for i in range(len(sets))]
                fit(linear, states, [s.gold for s in psets], schedule=vp_schedule)
                seconds["vp-linear"] = time.perf_counter() - t0
                scorers["vp-linear"] = lambda dag, foot, rnn=rnn, linear=linear: linear.utilities(rnn.root_states(dag))
                self.log(f"subset {k + 1}: linear VP on RNN root states trained in {seconds['vp-linear']:.1f} s")
            t0 = time.perf_counter()
            scores = self.evaluate(scorers)
            t_eval = time.perf_counter() - t0
            for name, sc in scores.items():
                sc.train_seconds = seconds[name]
            per_subset.append({"subset": k + 1, "sentences": [k * size, (k + 1) * size], "training_sets": len(psets),
                               "eval_seconds": t_eval, "models": {n: sc.to_dict() for n, sc in scores.items()}})
            self.log(f"subset {k + 1}: " + ", ".join(f"{n} L_1 {sc.L1:.2f}%" for n, sc in scores.items())
                     + f" (evaluated in {t_eval:.1f} s)")
        return {"subsets": n_subsets, "subset_size": size, "config_losses": losses, "per_subset": per_subset}

    def run(self, tables: Sequence[int], sizes: Sequence[Optional[int]], n_subsets: int,
            subset_size: int, save: Callable[[dict], None] = lambda result: None) -> dict:
        """Every table asked for, as one JSON-ready dict; ``save`` is handed
        the figures so far after each part (a long run keeps what it did)."""
        t0 = time.perf_counter()
        result = {"settings": {"vp_config": str(self.configs["vp"]), "rnn_config": str(self.configs["rnn"]),
                               "rnn_epochs": self.rnn_epochs, "rnn_members": self.rnn_members,
                               "split": self.split,
                               "validation_sentences": self.validation_sentences,
                               "validation_sets": len(self.validation), "learners": self.learners,
                               "eval_sentences": self.eval_sentences, "eval_sets": len(self.eval_sets),
                               "train_sentences": len(self.train), "cp_types": len(self.inventory),
                               "sampling": self.sampling, "sample_seed": self.sample_seed,
                               "tables": list(tables), "sizes": [s or "all" for s in sizes],
                               "subsets": n_subsets, "subset_size": subset_size}}
        if 1 in tables:
            result["table1"] = self.table1(sizes)
            save(result)
        if set(tables) & {2, 4, 5}:
            result["subset_tables"] = self.subset_tables(n_subsets, subset_size, tables)
        result["seconds"] = time.perf_counter() - t0
        save(result)
        return result


def _best_epochs(trained) -> dict:
    """``{class: [best epoch, epochs run]}`` of a (specialised) learner that
    stopped early (of an ensemble, one pair per member)."""
    nets = getattr(trained, "learners", {"all": trained})

    def epochs(net):
        if hasattr(net, "members"):
            return [epochs(member) for member in net.members]
        return [net.log.best_epoch, len(net.log.losses)]

    return {str(key): epochs(net) for key, net in sorted(nets.items(), key=str)}


# -- printing -------------------------------------------------------------------
def format_tables(result: dict) -> str:
    """The tables of :meth:`AttachmentExperiments.run` in the paper's form."""
    settings = result["settings"]
    where = (f"{settings['split']} split, {settings['eval_sentences']} sentences, {settings['eval_sets']:,} "
             f"preference sets; CP inventory from all {settings['train_sentences']:,} train sentences "
             f"({settings['cp_types']:,} types)")
    if settings.get("rnn_members", 1) > 1:
        where += f"; each RNN the mean of {settings['rnn_members']} nets"
    out = [f"First-pass attachment (Menchetti et al. 2005, §6.3) on the PTB sample: {where}"]
    if "table1" in result:
        out += ["", _format_table1(result["table1"])]
    sub = result.get("subset_tables")
    if sub is not None:
        formats = {2: _format_table2, 4: _format_table4, 5: _format_table5}
        out += [item for number in (2, 4, 5) if number in settings["tables"] for item in ("", formats[number](sub))]
    return "\n".join(out)


def _format_table1(t1: dict) -> str:
    heads = [CLASS_HEADS[c] for c in t1["classes"]] + ["Total"]
    width = 8
    lines = ["Table 1. L_1 (%) of first-pass attachment by foot class and training size "
             "(reduced trees, one learner per foot class)",
             f"{'POS':<10s}" + "".join(f"{h:>{width}s}" for h in heads),
             f"{'Size %':<10s}" + "".join(f"{t1['class_sizes'][c]:>{width}.1f}" for c in t1["classes"])
             + f"{100.0:>{width}.0f}"]
    for learner in (NAMES[k] for k in LEARNERS):
        lines.append(learner)
        for row in (r for r in t1["rows"] if r["learner"] == learner):
            cells = [row["L1_by_class"].get(c) for c in t1["classes"]] + [row["L1"]]
            lines.append(f"{row['sentences']:<10,d}" + "".join(f"{'-':>{width}s}" if v is None else f"{v:>{width}.1f}"
                                                               for v in cells))
    paper = PAPER["table1_total"]
    lines.append("paper (WSJ), Total: " + "; ".join(
        f"{name} " + ", ".join(f"{v} at {n:,}" for n, v in paper[name].items()) for name in paper))
    return "\n".join(lines)


def _losses(sub: dict, model: str, key: str = "L1") -> List[float]:
    return [s["models"][model][key] for s in sub["per_subset"]]


def _subsets(sub: dict) -> str:
    n = sub["subsets"]
    return f"{n} disjoint subset{'s' if n > 1 else ''} of {sub['subset_size']} training sentences"


def _format_table2(sub: dict) -> str:
    n = sub["subsets"]
    lines = [f"Table 2. L_1 (%) on {_subsets(sub)} "
             "(reduced trees, not specialised)",
             f"{'Subset':<8s}" + "".join(f"{k + 1:>7d}" for k in range(n)) + f"{'Average':>14s}"]
    for kind in sub["config_losses"]:
        values = _losses(sub, f"{kind}-{sub['config_losses'][kind]}")
        lines.append(f"{NAMES[kind]:<8s}" + "".join(f"{v:>7.1f}" for v in values) + f"{_pm(values):>14s}")
    lines.append("losses: " + ", ".join(f"{NAMES[k]} {sub['config_losses'][k]}" for k in sub["config_losses"])
                 + "; paper (WSJ, 5 × 100): " + ", ".join(f"{k} {v}" for k, v in PAPER["table2"].items()))
    return "\n".join(lines)


def _format_table4(sub: dict) -> str:
    linear, tree = _losses(sub, "vp-linear"), _losses(sub, f"vp-{sub['config_losses']['vp']}")
    lines = [f"Table 4. L_1 (%): a linear-kernel VP on the trained RNN's root states vs the tree-kernel VP "
             f"({_subsets(sub)})",
             f"{'Subset':<8s}{'VP on RNN state':>18s}{'VP':>14s}"]
    lines += [f"{k + 1:<8d}{a:>18.1f}{b:>14.1f}" for k, (a, b) in enumerate(zip(linear, tree))]
    lines.append(f"{'Average':<8s}{_pm(linear):>18s}{_pm(tree):>14s}")
    lines.append("paper (WSJ, 5 × 100): " + ", ".join(f"{k} {v}" for k, v in PAPER["table4"].items()))
    return "\n".join(lines)


def _format_table5(sub: dict) -> str:
    lines = ["Table 5. Pairwise (P) vs setwise (S) training loss × evaluation: P = pairwise error (eq. 14), "
             f"S = L_1 (eq. 15), % (mean ± std over {_subsets(sub)})",
             f"{'Train':<7s}{'Test':<6s}{'RNN':>16s}{'VP':>16s}{'paper RNN':>16s}{'paper VP':>16s}"]
    for loss in ("pairwise", "setwise"):
        for key, test in (("pairwise_error", "P"), ("L1", "S")):
            train = LOSS_CODE[loss]
            # the paper's column order: RNN, then VP
            cells = [_pm(_losses(sub, f"{kind}-{loss}", key), 2 if test == "P" else 1)
                     if kind in sub["config_losses"] else "-" for kind in ("rnn", "vp")]
            paper = PAPER["table5"][train, test]
            lines.append(f"{train:<7s}{test:<6s}" + "".join(f"{c:>16s}" for c in cells + list(paper)))
    return "\n".join(lines)

"""The one training loop of the preference learners: ``fit`` runs epochs of
minibatch ``update`` calls, the calls spaCy's training loop makes through a
component, and stops early on held-out sets as Menchetti et al. (2005,
§6.3.1) did ("early stopping based on 1000 validation sentences"): after
each epoch the learner is scored on them (by ``L_1``, their eq. 8, or by a
function of the caller's), the best epoch's parameters are kept, and
training stops after ``patience`` epochs without a better one.

A learner made of others (one per class of sets, an ensemble) trains each
of its parts in turn on the part's own sets and validation sets."""
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Callable, Hashable, Optional, Sequence, Tuple, Union

from thinc.api import Optimizer

from ..errors import StructPrefError
from .base import Learner, Subsequence, set_sizes, teaching_sets
from .metrics import loss_at_r

# held-out (sets, gold) or (sets, gold, keys), or a function of the learner giving its error
Validation = Union[Tuple, Callable[[Learner], float]]


@dataclass
class Schedule:
    """How ``fit`` trains: ``epochs`` passes over the training sets (the
    learner's first pass in the given order when it says so, every other
    one shuffled with the learner's seed), ``batch_size`` sets per
    ``update``, the ``optimizer`` that steps a learner with gradients (a
    learner that steps by itself, the perceptron, takes none), and
    ``patience``: None trains without validation sets; with them, 0 runs
    every epoch and keeps the best, ``p > 0`` stops after ``p`` epochs
    without a better one. ``progress``: a bar per epoch (None: on a
    terminal only)."""

    epochs: int = 1
    batch_size: int = 32
    patience: Optional[int] = None
    optimizer: Optional[Optimizer] = None
    progress: Optional[bool] = None

    def __post_init__(self):
        for name, least in (("epochs", 1), ("batch_size", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise StructPrefError(f"{name} must be an integer >= {least}, got {value!r}")
        if self.patience is not None and (isinstance(self.patience, bool) or not isinstance(self.patience, int)
                                          or self.patience < 0):
            raise StructPrefError(f"patience must be an integer >= 0 (0: every epoch, keeping the best) or "
                                  f"None (no validation sets), got {self.patience!r}")
        if self.optimizer is not None and self.optimizer.schedules:
            # thinc's schedules are generators stepped per call: the parts of a learner trained one
            # after another with one optimizer would each step them anew
            raise StructPrefError("fit's optimizer takes fixed settings, not schedules: "
                                  f"{', '.join(sorted(self.optimizer.schedules))}")


def fit(learner: Learner, sets: Sequence[Sequence], gold: Sequence[Optional[int]],
        keys: Optional[Sequence[Hashable]] = None, *, schedule: Optional[Schedule] = None,
        validation: Optional[Validation] = None) -> Learner:
    """Train ``learner`` on preference sets with each set's best index
    (None: no correct candidate, skipped) and, for a learner specialised by
    class, each set's key. A learner not yet initialized is initialized on
    the sets; one already trained goes on. ``validation``: held-out ``(sets,
    gold)`` (``(sets, gold, keys)`` for a specialised learner), or a function
    of the learner giving its error, lower being better; it needs a
    schedule with ``patience``. Each learner trained records its
    log (:class:`~.base.TrainingLog`) in ``learner.log``."""
    schedule = Schedule() if schedule is None else schedule
    if not isinstance(schedule, Schedule):
        raise StructPrefError(f"schedule must be a Schedule, got a {type(schedule).__name__}")
    if not isinstance(learner, Learner):
        raise StructPrefError(f"fit trains a preference learner, not a {type(learner).__name__}")
    if (validation is None) != (schedule.patience is None):
        raise StructPrefError("validation sets need a schedule with patience (0: keep the best epoch), and "
                              "patience needs validation sets")
    if validation is not None and not callable(validation) and not (
            isinstance(validation, (tuple, list)) and len(validation) in (2, 3)):
        raise StructPrefError("validation is (sets, gold), (sets, gold, keys) or a function of the learner")
    if learner.steps_by_itself and schedule.optimizer is not None:
        raise StructPrefError(f"a {type(learner).__name__} steps by itself: its schedule takes no optimizer")
    if not learner.steps_by_itself and schedule.optimizer is None:
        raise StructPrefError(f"a {type(learner).__name__} is stepped by an optimizer: give its schedule one "
                              "([schedule.optimizer] in a config)")
    _fit(learner, sets, gold, keys, schedule, validation)
    return learner


def _fit(learner, sets, gold, keys, schedule: Schedule, validation) -> None:
    parts = learner.split(sets, gold, keys)
    if parts is None:
        _fit_one(learner, sets, gold, schedule, validation)
        return
    if callable(validation):
        raise StructPrefError(f"a {type(learner).__name__} trains its parts one by one: give it validation "
                              "sets, not a function")
    held = learner.split(*validation) if validation is not None else {}
    for name, (part_sets, part_gold, part_keys) in parts.items():
        # a part without validation sets of its own trains every epoch and keeps the last
        _fit(learner.part(name), part_sets, part_gold, part_keys,
             schedule if name in held else replace(schedule, patience=None), held.get(name))


def _fit_one(learner, sets, gold, schedule: Schedule, validation) -> None:
    started = time.perf_counter()
    sets, gold, order = teaching_sets(sets, gold)
    # each set prepared once for every epoch, and for initialize (sets built on access are built once)
    sets = learner.prepare(sets)
    if not learner.initialized:
        learner.initialize(sets, gold)
    preparing = time.perf_counter() - started
    # the sets that can teach, each with an identity of its own
    sets, gold = Subsequence(sets, order), [gold[i] for i in order]
    ids = [object() for _ in gold]
    score = _scorer(learner, validation)

    def averaged():
        """The optimizer's parameter averages in place, where it keeps any."""
        averages = schedule.optimizer.averages if schedule.optimizer is not None else None
        return learner.use_params(averages) if averages else nullcontext()

    rng = random.Random(learner.seed)
    # the first epoch's seconds include the preparation, which is part of the training's cost
    order, log, seconds = list(range(len(gold))), learner.log, preparing
    best, best_epoch, kept, since = float("inf"), 0, None, 0
    from ..progress import progress_bar

    for epoch in range(schedule.epochs):
        t0 = time.perf_counter()
        if epoch or not learner.first_pass_in_order:
            rng.shuffle(order)
        losses: dict = {}
        with progress_bar(total=len(order), desc=f"{type(learner).__name__} epoch {epoch + 1}", unit="set",
                          leave=False, disable=None if schedule.progress is None else not schedule.progress) as bar:
            for start in range(0, len(order), schedule.batch_size):
                batch = order[start:start + schedule.batch_size]
                learner.update(Subsequence(sets, batch), [gold[i] for i in batch], ids=[ids[i] for i in batch],
                               sgd=schedule.optimizer, losses=losses)
                bar.update(len(batch))
        seconds += time.perf_counter() - t0
        log.losses.append(float(sum(losses.values()) / max(len(order), 1)))
        log.seconds.append(seconds)
        if score is None:
            continue
        with averaged():
            error = float(score())
        log.validation.append(error)
        if error < best:
            best, best_epoch, since, log.best_epoch = error, epoch + 1, 0, len(log.validation)
            if epoch + 1 < schedule.epochs:  # a later epoch may do worse: keep this one's parameters
                with averaged():
                    kept = learner.snapshot()
        else:
            since += 1
            if schedule.patience and since >= schedule.patience:
                break
    if kept is not None and best_epoch < epoch + 1:
        learner.restore(kept)
    elif schedule.optimizer is not None and schedule.optimizer.averages:
        with averaged():
            learner.restore(learner.snapshot())  # predict with the optimizer's averages from now on
    learner.finish_training()


def _scorer(learner: Learner, validation) -> Optional[Callable[[], float]]:
    """The validation error of the learner as it is now (None: nothing to score)."""
    if validation is None:
        return None
    if callable(validation):
        return lambda: validation(learner)
    val_sets, val_gold = validation[:2]
    if len(validation) == 3 and validation[2] is not None:
        raise StructPrefError(f"a {type(learner).__name__} takes no keys: give its validation as (sets, gold)")
    val_sets, val_gold, _ = teaching_sets(val_sets, val_gold)
    keep = [i for i, n in enumerate(set_sizes(val_sets)) if n]
    if not keep:
        return None
    prepared, kept_gold = learner.prepare(Subsequence(val_sets, keep)), [val_gold[i] for i in keep]
    return lambda: loss_at_r(learner.set_utilities(prepared), kept_gold)[1]



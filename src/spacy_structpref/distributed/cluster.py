"""Where a job's tasks run: in this process, or on a ``dask.distributed``
cluster (Rocklin 2015, *Dask: parallel computation with blocked algorithms
and task scheduling*). This is the one module of the package that imports
dask, and only when a cluster is asked for: without dask installed the
in-process path still works, and asking for a cluster says what to install.

A job is written once against :class:`Runner`: ``share`` a value every task
reads (a parser, a support set), ``submit`` tasks (whose arguments may be
other tasks' handles: a fold's grammar before the fold's shards), then
``gather`` the final tasks in order, with a progress bar over the items
done. :class:`LocalRunner` runs them here, one after the other;
:class:`DaskRunner` submits them to a ``distributed.Client``. Every task is
a pure function of its arguments, and shared values go to the scheduler as
tasks of their own (not ``scatter``-ed data), so a worker lost in the middle
of a job costs only a recomputation: the scheduler reruns what it held, and
each task's result reaches the caller exactly once.
"""
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional, Sequence

from ..errors import StructPrefError

INSTALL_HINT = 'pip install "spacy-structpref[distributed]"  (or: pip install "dask[distributed]")'


class MissingDependency(StructPrefError):
    """An optional dependency (here dask.distributed) is not installed."""


def require_dask():
    """The ``distributed`` module, or a :class:`MissingDependency` that says
    what to install."""
    try:
        import distributed
    except ImportError as err:
        raise MissingDependency(f"running on a dask cluster needs dask.distributed, which is not installed "
                                f"({err}): {INSTALL_HINT}") from None
    return distributed


# ---------------------------------------------------------------- runners
class _Thunk:
    """A task of the in-process runner: run once, when first needed."""
    __slots__ = ("fn", "args", "done", "value")

    def __init__(self, fn: Callable, args: tuple):
        self.fn, self.args, self.done, self.value = fn, args, False, None

    def result(self):
        if not self.done:
            self.value = self.fn(*[a.result() if isinstance(a, _Thunk) else a for a in self.args])
            self.done, self.fn, self.args = True, None, None
        return self.value


class Runner:
    """Submits tasks and gathers their results in order (see the module docstring)."""

    n_workers = 1

    def share(self, value) -> Any:
        """A handle to ``value`` for tasks to take as an argument."""
        raise NotImplementedError

    def submit(self, fn: Callable, *args) -> Any:
        raise NotImplementedError

    def gather(self, handles: Sequence, sizes: Sequence[int], desc: str, progress: bool = True,
               on_result: Optional[Callable[[int, Any], Any]] = None) -> List:
        """The results of ``handles``, in order, each passed through
        ``on_result(i, result)`` when it arrives (whatever that returns is
        kept: e.g. a path once a shard is written). ``sizes``: the items of
        each task, for the progress bar (``unit`` from ``desc`` after a
        colon: ``"parse:sent"``)."""
        raise NotImplementedError

    @staticmethod
    def _bar(sizes: Sequence[int], desc: str, progress: bool):
        from ..progress import progress_bar

        name, _, unit = desc.partition(":")
        return progress_bar(total=int(sum(sizes)), desc=name, unit=unit or "it", disable=not progress)


class LocalRunner(Runner):
    """Runs every task in this process, in the order gathered."""

    def share(self, value):
        return value

    def submit(self, fn, *args):
        return _Thunk(fn, args)

    def gather(self, handles, sizes, desc, progress=True, on_result=None):
        out = []
        with self._bar(sizes, desc, progress) as bar:
            for i, (handle, size) in enumerate(zip(handles, sizes)):
                result = handle.result()
                out.append(on_result(i, result) if on_result is not None else result)
                bar.update(size)
        return out


def _identity(value):
    return value


class DaskRunner(Runner):
    """Runs the tasks on the cluster behind ``client`` (a ``distributed.Client``)."""

    def __init__(self, client):
        self.client = client
        self.n_workers = max(1, len(client.scheduler_info().get("workers", {})))

    def share(self, value):
        # A task that returns the value (not scatter): the value rides in the
        # task's spec on the scheduler, so it is recomputed if every worker
        # holding it dies; workers fetch it once from whichever holds it.
        return self.client.submit(_identity, value, pure=False)

    def submit(self, fn, *args):
        return self.client.submit(fn, *args, pure=False)

    def gather(self, handles, sizes, desc, progress=True, on_result=None):
        distributed = require_dask()
        index = {h.key: i for i, h in enumerate(handles)}
        out: List[Any] = [None] * len(handles)
        done = [False] * len(handles)
        with self._bar(sizes, desc, progress) as bar:
            for future, result in distributed.as_completed(list(handles), with_results=True):
                i = index[future.key]
                if done[i]:  # a result comes once; a second one would duplicate a shard
                    continue
                done[i] = True
                out[i] = on_result(i, result) if on_result is not None else result
                future.release()  # the worker may drop it
                bar.update(sizes[i])
        if not all(done):
            raise StructPrefError(f"{done.count(False)} of {len(handles)} tasks of {desc.partition(':')[0]!r} "
                                  "returned no result")
        return out


@contextmanager
def runner(client=None, scheduler: Optional[str] = None, n_workers: Optional[int] = None,
           in_process: bool = False) -> Iterator[Runner]:
    """The runner of one job.

    ``client``: an existing ``distributed.Client`` (left open); else
    ``scheduler`` (``tcp://HOST:PORT``): connect to that cluster for the job;
    else ``n_workers``: 0 runs in this process, a number starts a
    ``LocalCluster`` of that many single-threaded worker processes for the
    job, None one per core, or the in-process path when ``in_process`` (the
    job is too small to pay for starting worker processes)."""
    if client is not None:
        if scheduler is not None:
            raise StructPrefError("give a client or a scheduler address, not both")
        yield DaskRunner(client)
        return
    if scheduler is not None:
        distributed = require_dask()
        if not isinstance(scheduler, str) or "://" not in scheduler:
            raise StructPrefError(f"a scheduler address looks like tcp://HOST:PORT, got {scheduler!r}")
        try:
            opened = distributed.Client(scheduler, timeout="30s")
        except OSError as err:
            raise StructPrefError(f"cannot reach the dask scheduler at {scheduler}: {err}") from None
        with opened:
            yield DaskRunner(opened)
        return
    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0):
        raise StructPrefError(f"n_workers must be an integer of at least 0 (0: in this process), got {n_workers!r}")
    if n_workers == 0 or (n_workers is None and in_process):
        yield LocalRunner()
        return
    with local_cluster(n_workers) as opened:
        yield DaskRunner(opened)


@contextmanager
def local_cluster(n_workers: Optional[int] = None, **settings):
    """A ``distributed.Client`` on a new ``LocalCluster`` of ``n_workers``
    single-threaded worker processes (None: one per core), closed on exit.
    Threads would share the GIL, which the parsers and set builders hold."""
    import logging

    distributed = require_dask()
    n = n_workers or os.cpu_count() or 1
    options = dict(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                   silence_logs=logging.ERROR)
    options.update(settings)
    with distributed.LocalCluster(**options) as cluster, distributed.Client(cluster) as client:
        yield client

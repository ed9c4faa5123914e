"""Project steps side by side: ``python -m spacy_structpref side-by-side STEP
… --n-jobs N --vars.NAME VALUE …`` runs the named commands of ``project.yml``
N at a time, in the order their declared ``deps`` and ``outputs`` allow (a
step waits for every step of the group whose outputs it reads; ready steps
start in the order they are named, so name long ones first).

Weasel runs a workflow's steps one after another; on a machine with a few
cores most of this project's trainings are single-threaded, so the main job
runs its independent trainings side by side instead. Each step behaves as
``spacy project run STEP`` would: it is skipped when its deps and outputs
are unchanged since its last run (``project.lock``), its script lines run in
order, and the lock file is updated when it succeeds. Its output goes to
``logs/STEP.log``. Steps run with ``vars.n_jobs`` = 1 and one BLAS/OpenMP
thread (the parallelism is this runner's), and with the ``--vars.*`` given
here, which must include every variable their scripts use (a workflow's
overrides do not reach a command's subprocess otherwise)."""
import re
import shlex
import subprocess
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path, PurePosixPath
from typing import Dict, List, Sequence, Set, Tuple

from wasabi import msg

from ..errors import StructPrefError
from .common import single_threaded_environment
from .project_steps import duration, interpreter_command

LOGS = Path("logs")
STATUS_EVERY = 60.0  # seconds between the lines saying what is still running
_VARIABLE = re.compile(r"\$\{vars\.([A-Za-z0-9_]+)\}")


def _under(path: str, output: str) -> bool:
    """Whether ``path`` is ``output`` or lies inside it."""
    path_parts, output_parts = PurePosixPath(path).parts, PurePosixPath(output).parts
    return path_parts[:len(output_parts)] == output_parts


def step_order(commands: Dict[str, dict], steps: Sequence[str]) -> Dict[str, Set[str]]:
    """For each step, the steps of the group it waits for: those with an
    output that is (or contains) one of its deps. A cycle is an error."""
    unknown = [s for s in steps if s not in commands]
    if unknown:
        raise StructPrefError(f"project.yml has no command {unknown[0]!r}")
    if len(set(steps)) != len(steps):
        raise StructPrefError(f"a step is named twice: {', '.join(steps)}")
    waits = {step: {other for other in steps if other != step
                    and any(_under(dep, out) for dep in commands[step].get("deps", [])
                            for out in commands[other].get("outputs", []))}
             for step in steps}
    done: Set[str] = set()
    while len(done) < len(steps):
        ready = [s for s in steps if s not in done and waits[s] <= done]
        if not ready:
            raise StructPrefError(f"the steps' deps and outputs form a cycle among "
                                  f"{', '.join(s for s in steps if s not in done)}")
        done.update(ready)
    return waits


def _missing_variables(raw_commands: Dict[str, dict], steps: Sequence[str], given: Set[str]) -> List[str]:
    used = {name for step in steps for line in raw_commands[step].get("script", [])
            for name in _VARIABLE.findall(line)}
    return sorted(used - given - {"n_jobs"})


def run_side_by_side(steps: Sequence[str], n_jobs: int, overrides: Dict[str, object],
                     project_dir: Path = Path("."), force: bool = False) -> Dict[str, str]:
    """Run ``steps`` of ``project_dir/project.yml`` ``n_jobs`` at a time (see
    the module's description); returns each step's outcome (``done``,
    ``skipped``, ``failed (exit N)`` or ``not run``). A failed step stops
    new starts; the running ones finish, then it is an error naming its log."""
    from weasel.cli.run import check_rerun, update_lockfile
    from weasel.util import load_project_config

    if n_jobs < 1:
        raise StructPrefError(f"n_jobs must be at least 1, got {n_jobs}")
    project_dir = Path(project_dir).resolve()
    config = load_project_config(project_dir, overrides={**overrides, "vars.n_jobs": 1})
    commands = {c["name"]: c for c in config.get("commands", [])}
    waits = step_order(commands, steps)  # refuses unknown steps
    raw = {c["name"]: c for c in load_project_config(project_dir, interpolate=False).get("commands", [])}
    given = {key.split(".", 1)[1] for key in overrides if key.startswith("vars.")}
    missing = _missing_variables(raw, steps, given)
    if missing:
        raise StructPrefError("pass the variables the steps use, so that the workflow's values reach them: "
                              + " ".join(f"--vars.{name} ${{vars.{name}}}" for name in missing))
    (project_dir / LOGS).mkdir(exist_ok=True)
    env = single_threaded_environment()
    lock_file = threading.Lock()  # project.lock is read and rewritten whole
    outcome = {step: "not run" for step in steps}

    def run(step: str) -> str:
        command = commands[step]
        absent = [dep for dep in command.get("deps", []) if not (project_dir / dep).exists()]
        if absent:
            raise StructPrefError(f"{step}: missing dependency {absent[0]} (run the step that makes it first)")
        with lock_file:
            rerun = force or check_rerun(project_dir, command)
        if not rerun:
            return "skipped"
        log_path = project_dir / LOGS / f"{step}.log"
        with open(log_path, "w", encoding="utf8") as log:
            for line in command.get("script", []):
                log.write(f"$ {line}\n")
                log.flush()
                status = subprocess.run(interpreter_command(shlex.split(line)), cwd=project_dir, env=env,
                                        stdout=log, stderr=subprocess.STDOUT).returncode
                if status:
                    return f"failed (exit {status})"
        with lock_file:
            update_lockfile(project_dir, command)
        return "done"

    msg.info(f"{len(steps)} steps, {n_jobs} at a time (logs: {LOGS}/STEP.log)")
    running: Dict[Future, tuple] = {}
    pending = list(steps)
    finished: Set[str] = set()
    failed = False
    with ThreadPoolExecutor(max_workers=n_jobs) as pool:
        while pending or running:
            if not failed:
                for step in [s for s in pending if waits[s] <= finished][:n_jobs - len(running)]:
                    pending.remove(step)
                    print(f"▶ {step}", flush=True)
                    running[pool.submit(run, step)] = (step, time.time())
            if not running:
                break
            done, _ = wait(running, timeout=STATUS_EVERY, return_when=FIRST_COMPLETED)
            if not done:
                now = time.time()
                # print, not msg.text: wasabi wraps text at 80 columns
                print(f"… {len(finished)} of {len(steps)} steps finished; running: "
                      + ", ".join(f"{step} ({duration(now - start)})" for step, start in running.values()), flush=True)
            for future in done:
                step, start = running.pop(future)
                try:
                    outcome[step] = future.result()
                except StructPrefError as err:
                    outcome[step] = f"failed ({err})"
                finished.add(step)
                state = outcome[step]
                if state == "skipped":
                    msg.info(f"{step}: skipped, nothing changed")
                elif state == "done":
                    msg.good(f"{step}: done in {duration(time.time() - start)}")
                else:
                    failed = True
                    msg.fail(f"{step}: {state}; see {LOGS / (step + '.log')}")
    msg.table([(s, outcome[s]) for s in steps], header=("step", "outcome"), divider=True)
    bad = ([s for s in steps if outcome[s].startswith("failed")]
           or [s for s in steps if outcome[s] not in ("done", "skipped")])
    if bad:
        raise StructPrefError(f"side by side: {bad[0]} {outcome[bad[0]]}; see {LOGS / (bad[0] + '.log')}")
    return outcome


def split_arguments(words: Sequence[str]) -> Tuple[List[str], Dict[str, object]]:
    """The steps and the ``--vars.NAME VALUE`` (or ``--vars.NAME=VALUE``)
    overrides of a command line, as weasel reads overrides (a value may
    start with a dash: ``--vars.gpu_id -1``)."""
    from weasel.util import parse_config_overrides

    words = list(words)
    first = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
    steps, options, i = words[:first], [], first
    while i < len(words):
        word = words[i]
        if not word.startswith("--vars."):
            raise StructPrefError(f"unknown option {word} (only --vars.NAME VALUE are passed to the steps)")
        takes_value = "=" not in word and i + 1 < len(words) and not words[i + 1].startswith("--")
        options.extend(words[i:i + 2] if takes_value else [word])
        i += 2 if takes_value else 1
    if not steps:
        raise StructPrefError("name the project steps to run before the --vars options")
    return steps, parse_config_overrides(options)

"""The generic runner: every case in fresh worker processes, one record per case. It knows no mode.

The mode says what one process of a case does (`process_spec`, run by `gpuenv worker`), whether a
failed process ends the case, and how outcomes become a record. The runner owns process isolation,
timeouts, signals, the backend's environment and writing the record. A worker that raises, segfaults,
hangs or is killed becomes that case's recorded failure; the run goes on. Ctrl-C stops the current
worker, records the case as interrupted with whatever processes finished, and leaves every earlier
record in place. The runner never imports a simulator.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuenv.backends.spec import WORKER_SCRATCH_ENV, Backend
from gpuenv.errors import NoSpace, UserError
from gpuenv.measure import fingerprint
from gpuenv.measure.system import oom_kills
from gpuenv.modes.base import Mode, Outcome, Plan, RecordContext, failure
from gpuenv.registry import default_registry
from gpuenv.results import schema
from gpuenv.results.schema import Record
from gpuenv.results.store import write_record
from gpuenv.run.provenance import provenance
from gpuenv.run.worker import PARTIAL, RUNNER_ENV

STDERR_TAIL = 2000


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


class Interrupt:
    """Ctrl-C, SIGTERM and SIGHUP during a run. The signal handler only records the request and kills
    the running worker's process group; the run then stops at a point of its own choosing. (Raising
    KeyboardInterrupt from the handler could land between a lock's acquire and its `with` block, in
    rich's progress display say, and leave the process deadlocked on exit.)"""

    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None
        self.current: subprocess.Popen | None = None

    def handler(self, signum: int, frame: Any) -> None:
        self.requested = True
        self.signum = signum
        proc = self.current
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def cause(self) -> str:
        """What stopped the run, as a record says it."""
        names = {int(signal.SIGINT): "Ctrl-C (SIGINT)", int(signal.SIGTERM): "SIGTERM", int(signal.SIGHUP): "SIGHUP (terminal closed)"}
        if self.signum is None:
            return names[int(signal.SIGINT)]
        return names.get(self.signum) or _signal_name(-self.signum)


INTERRUPT = Interrupt()


@dataclass
class Launcher:
    """How a backend's workers start: which interpreter, which extra environment variables."""

    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)
    environment: dict | None = None  # where.environment of its records (None: the main install)

    def command(self, spec_path: Path, out_path: Path) -> list[str]:
        """The worker's command line."""
        return [self.python, "-m", "gpuenv", "worker", str(spec_path), str(out_path)]

    def cleanup(self, spec_path: Path) -> None:
        """After a worker that did not end cleanly: what killing its process group does not reach
        (an image side's container). Nothing for a local interpreter."""


def launcher(backend: Backend) -> Launcher:
    """The backend's launcher; builds its own environment on first use (UserError if that fails)."""
    from gpuenv import envs

    extra = backend.worker_environ()
    if backend.environment is None or backend.in_own_image():  # its own image, or a Python that has its libraries
        return Launcher(env=extra)
    e = backend.environment
    lock_path = e.lock_path(envs.ROOT)
    if not lock_path.is_file():
        raise UserError(f"backend {backend.name}: its environment lock {lock_path} does not exist")
    built = envs.build(lock_path.read_text(), e.python, f"for backend {backend.name}", e.build_step)
    return Launcher(str(built.interpreter), extra, built.describe(backend.name))


def run_process(spec: dict, index: int, timeout_s: float, workdir: Path, how: Launcher | None = None) -> Outcome:
    how = how or Launcher()
    spec_path = workdir / f"spec-{index}.json"
    out_path = workdir / f"out-{index}.json"
    err_path = workdir / f"stderr-{index}.txt"
    spec_path.write_text(json.dumps(spec))
    out_path.unlink(missing_ok=True)
    Path(str(out_path) + PARTIAL).unlink(missing_ok=True)
    INTERRUPT.check()
    fail: dict | None = None
    ooms = oom_kills()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            how.command(spec_path, out_path),
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            # worker.guard: die with this process; what a backend copies per process goes in the case's scratch
            env={**os.environ, **how.env, RUNNER_ENV: str(os.getpid()), WORKER_SCRATCH_ENV: str(workdir)},
            start_new_session=True,  # its own process group: a kill takes its children (SubprocVecEnv) too
        )
        INTERRUPT.current = proc
        rc: int | None
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc, how, spec_path)
            rc, fail = None, failure("timeout", f"timed out after {timeout_s:g} s (hung or too slow); killed", index)
        except KeyboardInterrupt:  # a plain KeyboardInterrupt (no handler installed)
            _kill_group(proc, how, spec_path)
            raise
        finally:
            INTERRUPT.current = None
        if INTERRUPT.requested:  # the handler killed this worker: stop here, cleanly
            _kill_group(proc, how, spec_path)
            raise KeyboardInterrupt
    tail = err_path.read_text(errors="replace")[-STDERR_TAIL:]
    try:
        result = json.loads(out_path.read_text()) if out_path.exists() else None
    except (ValueError, OSError):  # a torn or unreadable result is no result: the case says so below
        result = None
    finished = result if result is not None and result.get("ok") else None
    if fail is None:
        if result is not None and not result.get("ok"):
            fail, result = failure(result.get("kind", "crashed"), result.get("error", "worker failed"), index), None
        elif rc is not None and rc < 0:
            fail, result = failure("killed", f"worker killed by {_signal_name(rc)}{_oom_killer(rc, ooms)}", index), None
        elif rc != 0 or result is None:
            fail, result = failure("crashed", f"worker exited with code {rc} without a result", index), None
    partial = Path(str(out_path) + PARTIAL)
    if fail is not None and fail["kind"] in ("crashed", "killed") and rc is not None and finished is not None:
        # the worker wrote its whole result, then died on the way out: that result stands
        result, fail = {**finished, "incomplete": f"{fail['kind']} after writing its result: {fail['reason']}"}, None
    elif fail is not None and fail["kind"] in ("timeout", "crashed", "killed", "oom") and partial.exists():
        try:  # the worker kept a result before it died: record that, marked incomplete, not nothing
            kept = json.loads(partial.read_text())
        except (ValueError, OSError):
            kept = None
        if isinstance(kept, dict) and kept.get("ok"):
            result, fail = {**kept, "incomplete": f"{fail['kind']}: {fail['reason']}"}, None
    partial.unlink(missing_ok=True)
    if fail is not None:
        fail["stderr_tail"] = tail
    # whatever the worker left behind (env subprocesses) goes with it; a container only after an unclean end
    # (rc None: a timeout, whose kill above already cleaned up)
    _kill_group(proc, how if rc else None, spec_path)
    return Outcome(index, result, fail, tail)


def _oom_killer(rc: int, before: dict[str, int]) -> str:
    """For a worker that died of SIGKILL that gpuenv did not send: whether the kernel's OOM killer
    ended a process meanwhile (its counters rose), which then names it."""
    if rc != -signal.SIGKILL:
        return ""
    if not before:
        return ""  # no counter readable here: nothing to say either way
    rose = {k: v - before[k] for k, v in oom_kills().items() if k in before and v > before[k]}
    if not rose:
        return " (not the OOM killer: its counters did not change; another process or a person sent it)"
    where = ", ".join(f"{k} oom_kill +{n}" for k, n in rose.items())
    # the cgroup's counter is this machine slice's; /proc/vmstat's counts the whole host
    who = "the kernel's OOM killer" if any(k != "/proc/vmstat" for k in rose) else "most likely the kernel's OOM killer"
    return f" from {who}: out of memory ({where}); a smaller num_envs, or memory_limit_mib to find the size that fits"


def _kill_group(proc: subprocess.Popen, how: Launcher | None = None, spec_path: Path | None = None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    if how is not None and spec_path is not None:
        how.cleanup(spec_path)


SCRATCH = "gpuenv-run-"  # + the runner's pid + "-": a case's scratch folder (specs, worker output)
SCRATCH_LOCK = ".in-use"  # held (flock) by the run while it uses the folder


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A case's scratch folder, held (flock on SCRATCH_LOCK) while the run uses it and removed after.
    It gets its SCRATCH name only once held, so no other run's clean_scratch can take it meanwhile;
    the kernel drops the lock when the process dies, however it dies."""
    import fcntl
    import shutil

    prep = Path(tempfile.mkdtemp(prefix="gpuenv-prep-"))
    try:
        with open(prep / SCRATCH_LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            folder = prep.with_name(f"{SCRATCH}{os.getpid()}-{prep.name.rsplit('-', 1)[-1]}")
            prep.rename(folder)
            prep = folder
            yield folder
    finally:
        shutil.rmtree(prep, ignore_errors=True)


def clean_scratch() -> list[Path]:
    """Remove the scratch folders of runs that are gone (killed with SIGKILL, say, so their own
    clean-up never ran); returns what was removed. Only this user's; a folder is gone when no process
    holds its lock, which also holds for a run in another PID namespace sharing this /tmp."""
    import fcntl
    import shutil

    removed = []
    for d in Path(tempfile.gettempdir()).glob(f"{SCRATCH}*-*"):
        try:
            if not d.is_dir() or d.is_symlink() or d.stat().st_uid != os.getuid():
                continue
            with open(d / SCRATCH_LOCK, "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a live run holds it
        except OSError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


@dataclass(frozen=True)
class CaseStart:
    index: int  # the item's place in the plan
    item: Any


@dataclass(frozen=True)
class ProcessStart:
    index: int
    process: int
    of: int  # processes the case runs


@dataclass(frozen=True)
class ProcessDone:
    index: int
    outcome: Outcome


@dataclass(frozen=True)
class CaseDone:
    index: int
    record: Record  # as read back from its file
    path: Path


@dataclass(frozen=True)
class Preparing:
    backends: tuple[str, ...]  # whose own Python environments are built now, side by side, before the first case

    @property
    def what(self) -> str:
        return f"building the own Python environments of {', '.join(self.backends)}"


Event = Preparing | CaseStart | ProcessStart | ProcessDone | CaseDone


class RunStopped(UserError):
    """The run cannot go on (no space for records): what was written is kept, the rest did not run."""

    def __init__(self, reason: str, written: list[tuple[Record, Path]], not_run: list[str]) -> None:
        super().__init__(reason)
        self.written, self.not_run = written, not_run


def backend_where(base: dict, how: Launcher, workdir: Path, cache: dict[str, dict]) -> dict:
    """Provenance of a case: the machine from here; for a backend in its own environment, the package
    versions and Python of that environment (asked of its interpreter once per run), and for an image
    side the container it ran in."""
    if how.environment is None:
        return base
    key = json.dumps(how.environment, sort_keys=True)
    if key not in cache:
        o = run_process({"provenance": True}, 0, 300, workdir, how)
        if o.result is None:
            raise UserError(f"environment {how.environment['path']}: gpuenv does not start there ({o.failure and o.failure['reason']})")
        cache[key] = o.result["provenance"]
    theirs = cache[key]
    inside = {k: theirs["machine"][k] for k in ("in_container", "image", "container") if theirs["machine"].get(k)}
    return {
        **base,
        "machine": {**base["machine"], "python": theirs["machine"]["python"], **inside},
        "packages": theirs["packages"],
        "environment": {**how.environment, "python": how.environment.get("python") or theirs["machine"]["python"]},
    }


def served(how: Launcher, where: dict, base: dict) -> tuple[Launcher, dict]:
    """A worker in the main install whose env a backend's own environment serves (gpuenv.backends.served):
    its Python is this one; its record names both sides: `packages` as the trainer's process has them,
    with what only the simulator's environment has (its simulator) from there, and that environment's
    own versions under `environment.packages` (numpy 1.x there, 2.x here). Nothing changes for a backend
    without an environment of its own, or in an image (a container side carries its own interpreter)."""
    if how.environment is None or type(how) is not Launcher:
        return how, where
    env, theirs = where["environment"], where["packages"]
    packages = {k: v if v is not None else theirs.get(k) for k, v in base["packages"].items()}
    return replace(how, python=sys.executable), {
        **where,
        "machine": {**where["machine"], "python": base["machine"]["python"]},
        "packages": packages,
        "environment": {**env, "packages": theirs,
                        "served": f"its env stepped in this environment (Python {env['python']}), served to the trainer "
                                  f"in the main install (Python {base['machine']['python']}) over pipes"},
    }


def write_case(mode: Mode, item: Any, outcomes: list[Outcome], ctx: RecordContext, out_dir: Path) -> tuple[Record, Path]:
    """Build the case's record from its outcomes, write it and read it back; a gpuenv bug in
    summarising or an invalid record still leaves the case recorded (failed, saying why). NoSpace
    propagates: the caller stops the run."""
    try:
        record = mode.build_record(item, outcomes, ctx)
    except Exception as e:  # noqa: BLE001 - a bug in summarising must not lose the case
        record = mode.build_record(item, outcomes, replace(ctx, broken=f"gpuenv could not summarise this case: {e!r}"))
    try:
        path = write_record(out_dir, record)
    except NoSpace:
        raise
    except UserError as e:  # a record that fails its model is a gpuenv bug: keep the case, as failed
        path = write_record(out_dir, mode.build_record(item, [], replace(ctx, broken=f"gpuenv built an invalid record: {e}")))
    return schema.read(path), path


def case_where(base: dict) -> dict:
    """`where` of a case about to run: the run's provenance with how fast the machine is now, measured
    just before the case's workers start (none is running)."""
    return {**base, "machine": {**base["machine"], "fingerprint": fingerprint.measure()}}


def launcher_or_error(backend: str, cache: dict[str, Launcher | UserError]) -> Launcher | UserError:
    """The backend's launcher, built once per run; the UserError instead where its environment cannot be built."""
    if backend not in cache:
        try:
            cache[backend] = launcher(default_registry().get(backend))
        except UserError as e:
            cache[backend] = e
    return cache[backend]


def needs_building(backend: Backend) -> bool:
    """The backend runs in its own Python environment here, and that environment is not built yet."""
    from gpuenv import envs

    e = backend.environment
    if e is None or backend.in_own_image():
        return False
    lock = e.lock_path(envs.ROOT)
    return lock.is_file() and not envs.is_built(lock.read_text(), e.python, e.build_step)


def prepare(backends: list[str], cache: dict[str, Launcher | UserError], on_event: Callable[[Event], None]) -> list[str]:
    """Build the own environments a run's backends lack, side by side, before its first case: each is
    a download, an unpack and perhaps a compile (Genesis's 3.7 GB, Ocean's pufferlib from its sdist), so
    two at once take about as long as the longer one, and no case is measured while they build. A
    backend whose build fails has its UserError cached: its cases are recorded refused, as before.
    Returns the backends whose environments it built (or tried to: `cache` has each one's outcome)."""
    from concurrent.futures import ThreadPoolExecutor

    registry = default_registry()
    todo = [b for b in dict.fromkeys(backends) if b not in cache and needs_building(registry.get(b))]
    if not todo:
        return []
    on_event(Preparing(tuple(todo)))
    with ThreadPoolExecutor(max_workers=len(todo)) as pool:
        list(pool.map(lambda b: launcher_or_error(b, cache), todo))
    INTERRUPT.check()
    return todo


def run_plan(mode: Mode, plan: Plan, *, run_id: str, out_dir: Path, on_event: Callable[[Event], None] = lambda event: None) -> list[tuple[Record, Path]]:
    """Run every item of a plan; returns (record, path) for each written record. Re-raises
    KeyboardInterrupt after writing the interrupted case's record."""
    clean_scratch()
    from gpuenv.results.schema import utc_now

    invocation = {"started_utc": utc_now(), "cases": len(plan.items)}  # a run missing some of them is half-finished
    base = provenance()
    launchers: dict[str, Launcher | UserError] = {}
    env_where: dict[str, dict] = {}
    written: list[tuple[Record, Path]] = []
    prepare([item.backend for item in plan.items], launchers, on_event)
    for i, item in enumerate(plan.items):
        on_event(CaseStart(i, item))
        outcomes: list[Outcome] = []
        interrupted = False
        where = here = case_where(base)
        with scratch() as tmp:
            try:
                how = launcher_or_error(item.backend, launchers)
                if isinstance(how, UserError):
                    outcomes.append(Outcome(0, None, failure("refused", str(how), 0)))
                else:
                    where = backend_where(here, how, Path(tmp), env_where)
                    if mode.serves_env(item):
                        how, where = served(how, where, base)
                    for p in range(item.processes):
                        on_event(ProcessStart(i, p, item.processes))
                        o = run_process(mode.process_spec(item, p, out_dir), p, item.timeout_s, Path(tmp), how)
                        outcomes.append(o)
                        on_event(ProcessDone(i, o))
                        if o.failure and mode.stop_after_failure:
                            break  # a case that fails once is recorded failed; do not burn more time on it
            except KeyboardInterrupt:
                interrupted = True
            except UserError as e:  # the backend's environment would not start
                outcomes.append(Outcome(len(outcomes), None, failure("refused", str(e), len(outcomes))))
        cause = INTERRUPT.cause() if interrupted else None
        try:
            done, path = write_case(mode, item, outcomes, RecordContext(plan.suite, run_id, where, cause, invocation=invocation), out_dir)
        except NoSpace as e:  # stop: every later record would fail the same way
            raise RunStopped(str(e), written, [it.key for it in plan.items[i:]]) from None
        written.append((done, path))
        on_event(CaseDone(i, done, path))
        if interrupted:
            raise KeyboardInterrupt
    return written

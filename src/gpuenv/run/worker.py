"""One worker process = one process of one case. Started as `python -m gpuenv worker SPEC OUT`.

The spec names its measurement mode; the mode's `worker(spec)` does the work (it imports only its
own backend). The worker writes one JSON object to OUT: the result, or the error that stopped it with
its failure kind (results.models.FailureKind), decided by the exception's type, never its text.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import traceback
from pathlib import Path

from gpuenv.errors import Diverged, Unsupported, UserError

WORKER_ERROR_EXIT = 3


def failure_kind(e: BaseException) -> str:
    if isinstance(e, Unsupported):
        return "unsupported"
    if isinstance(e, UserError):
        return "refused"
    if isinstance(e, Diverged):
        return "diverged"
    if isinstance(e, MemoryError):
        return "oom"
    return "crashed"


def run(spec: dict) -> dict:
    if spec.get("provenance"):  # the runner asks a backend's own environment what it has
        from gpuenv.run.provenance import provenance

        return {"ok": True, "provenance": provenance()}
    from gpuenv.modes import get_mode

    return get_mode(spec["mode"]).worker(spec, checkpoint)


def limit_memory(mib: int) -> None:
    """Cap this worker's address space (RLIMIT_AS; children inherit it): an allocation past it raises
    MemoryError, recorded as `oom` with the limit, instead of the machine swapping or the OOM killer."""
    import resource

    if mib > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mib * 2**20, mib * 2**20))


PARTIAL = ".partial"  # OUT + this: a result the worker already has, kept if it dies afterwards
_partial_path: Path | None = None


def checkpoint(result: dict) -> None:
    """Keep `result` in case this worker dies (timeout, crash, MemoryError) after this point: the
    runner then records it, marked `incomplete`, instead of losing it. A mode calls this before
    optional extra work (the throughput phases)."""
    if _partial_path is not None:
        tmp = Path(str(_partial_path) + ".tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(_partial_path)


def main(spec_path: str, out_path: str) -> int:
    global _partial_path
    _partial_path = Path(out_path + PARTIAL)
    spec = json.loads(Path(spec_path).read_text())
    limit = int(spec.get("memory_limit_mib") or 0)
    try:
        limit_memory(limit)
        result = run(spec)
        code = 0
    except Exception as e:  # noqa: BLE001 - any backend failure becomes this case's recorded failure
        kind = failure_kind(e)
        message = str(e) if kind in ("unsupported", "refused") else f"{type(e).__name__}: {e}"
        if kind == "oom" and limit:
            message += f" (over the suite's memory limit of {limit} MiB, RLIMIT_AS)"
        result = {"ok": False, "kind": kind, "error": message}
        if kind == "crashed":
            result["traceback"] = traceback.format_exc()
        code = WORKER_ERROR_EXIT
    tmp = Path(out_path + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(out_path)
    return code


PR_SET_PDEATHSIG = 1  # linux/prctl.h
RUNNER_ENV = "GPUENV_RUNNER_PID"  # the runner's pid, set for each worker it starts (guard() checks it)


def _die_with_parent(sig: int) -> bool:
    """Ask the kernel to send `sig` to this process when its parent exits (Linux); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def guard(parent: int | None = None) -> None:
    """Make this worker and everything it starts die with the gpuenv process that started it.

    The runner starts each worker as the leader of its own process group (so a timeout or Ctrl-C kills
    the group). Were the runner itself killed (kill -9, the OOM killer, a CI runner cancelling), the
    group would live on under PID 1. So the worker forks first: the parent stays a small watchdog that
    only waits; the kernel sends it SIGTERM when the runner dies (PR_SET_PDEATHSIG), and it then kills
    the whole group: the worker, SubprocVecEnv processes, simulator servers. A watchdog that does
    nothing else cannot be stuck in native code the way a simulator can. The child carries on as the
    worker (it dies with the watchdog too); the watchdog passes on the child's exit status or signal.
    A runner killed before its worker got here (its parent is then PID 1) is told apart from a worker
    run by hand by GPUENV_RUNNER_PID, which the runner sets: such a worker leaves at once.
    """
    runner = os.environ.get(RUNNER_ENV, "")
    if parent is None and runner.isdigit():
        parent = int(runner)
        if os.getppid() != parent:  # the runner died before this worker got here: no one will read a result
            os._exit(WORKER_ERROR_EXIT)
    parent = os.getppid() if parent is None else parent
    if not sys.platform.startswith("linux") or parent == 1 or os.getpgrp() != os.getpid():
        return  # not started by the runner as a group leader (run by hand): nothing to guard
    child = os.fork()
    if child == 0:
        _die_with_parent(signal.SIGKILL)
        return

    def kill_group(*_: object) -> None:
        os.killpg(os.getpgrp(), signal.SIGKILL)  # takes this watchdog too

    signal.signal(signal.SIGTERM, kill_group)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a stray Ctrl-C is the runner's to handle
    if not _die_with_parent(signal.SIGTERM) or os.getppid() != parent:  # the runner died before prctl
        kill_group()
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # the worker died of a signal: so does the watchdog, for the runner to see
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset (OSError)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)  # a signal whose default is to ignore it: its shell exit code


def exit_now(code: int) -> None:
    """Leave without interpreter teardown (torch, JAX and env pools take seconds to tear down)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

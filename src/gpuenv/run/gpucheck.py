"""`make gpu-check`: the GPU parts of the decision, measured in one prepared command within a time
budget on a GPU machine (suites/gpu-check.toml), then shown and composed into the decision.

Each step is the gpuenv command a user would type, run as a child process so that its output is the
user's and a step that hangs or runs past the budget is stopped the way Ctrl-C stops it (the records
of finished cases, and the interrupted one, are kept). All records go to one run folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpuenv.errors import UserError
from gpuenv.gpu import cpu_ok, nvidia_smi

SUITE = "gpu-check"
CPU_SIZES = ("16",)  # GPUENV_CPU_OK=1 on a machine without a GPU: the same script at a size a CPU runs in seconds,
CPU_PROCESSES = "1"  # and one process a case (each JAX process imports and traces again: a test of the script, not a number)
DECIDE = ("--task", "halfcheetah", "--budget", "50M")
# The peer table on the GPU (gpuenv peers: MJX at both solver settings beside mjx.benchmark, Brax's
# generalized and positional pipelines beside brax.test_utils.benchmark), gpuenv as it runs and the
# peer only, at one size between the suite's; on the CPU two rows at CPU_SIZES, one round: a test of the step.
# (the rows: each backend's Peer.gpu_check and Peer.cpu_check)
PEER_ARGS = ("-n", "4096", "--rounds", "2", "--plain")
CPU_PEER_ARGS = ("-n", CPU_SIZES[0], "--rounds", "1", "--plain", "--min-time", "0.1")
PEERS_S = 150.0  # the peers step's share of the budget, kept from the bench
STOP_GRACE_S = 45.0  # after the interrupt, the time a step has to write its records before it is killed


@dataclass
class Step:
    name: str
    argv: list[str]
    seconds: float = 0.0
    returncode: int | None = None
    stopped: bool = False  # ran into the budget and was interrupted


@dataclass
class Check:
    run_dir: Path
    on_gpu: bool
    steps: list[Step] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every step exited 0, or the bench was stopped at the budget as designed and the rest ran."""
        return bool(self.steps) and all(s.returncode == 0 or s.stopped for s in self.steps) and not self.stopped_without_records

    @property
    def stopped_without_records(self) -> bool:
        return any(s.stopped for s in self.steps) and not self.run_dir.is_dir()


def versions() -> str:
    """The installed versions of what records track (gpuenv's core, the backends', the modes')."""
    from gpuenv.run.provenance import package_versions

    return ", ".join(f"{name} {v}" for name, v in package_versions().items() if v)


def steps(run_dir: Path, on_gpu: bool) -> list[Step]:
    gpuenv = [sys.executable, "-m", "gpuenv"]
    sizes = [] if on_gpu else [*(a for n in CPU_SIZES for a in ("-n", n)), "--processes", CPU_PROCESSES]
    from gpuenv.run.peers import rows as peer_rows

    rows = [a for r in peer_rows("gpu_check" if on_gpu else "cpu_check") for a in ("--peer", r)]
    return [
        Step("bench", [*gpuenv, "bench", "--suite", SUITE, "--out", str(run_dir.parent), "--run-id", run_dir.name, *sizes]),
        # beside the records, as peers-*.jsonl (JSON Lines: record readers leave it alone)
        Step("peers", [*gpuenv, "peers", *rows, *(PEER_ARGS if on_gpu else CPU_PEER_ARGS), "--out", str(run_dir)]),
        Step("show", [*gpuenv, "show", str(run_dir)]),
        Step("decide", [*gpuenv, "decide", *DECIDE, "--partial", str(run_dir)]),  # a bench stopped at the budget is half-finished
    ]


def _stop(proc: subprocess.Popen) -> int:
    """The bench's own Ctrl-C path (it kills its worker and keeps the records), then a kill after the grace."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        return proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()
    except ProcessLookupError:
        return proc.wait()


def _run(step: Step, deadline: float) -> None:
    start = time.monotonic()
    # Ctrl-C's signal reaches the step even where this runs from a background shell, whose children
    # inherit SIGINT ignored (Python then installs no KeyboardInterrupt handler)
    proc = subprocess.Popen(step.argv, start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        step.returncode = proc.wait(timeout=max(1.0, deadline - start))
    except subprocess.TimeoutExpired:
        step.stopped = True
        step.returncode = _stop(proc)
    except BaseException:  # our own Ctrl-C, SIGTERM or SIGHUP (gpu_check makes them KeyboardInterrupt): the child never outlives us
        if proc.poll() is None:
            _stop(proc)
        raise
    step.seconds = time.monotonic() - start


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def jax_backend() -> str:
    """The platform this Python's JAX computes on ('gpu', 'cpu'), asked in a child; 'none' without JAX."""
    r = subprocess.run([sys.executable, "-c", "import jax; print(jax.default_backend())"], capture_output=True, text=True, timeout=300)
    return r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else "none"


def gpu_check(out: Path, run_id: str, budget_s: float, say: Callable[[str], None]) -> Check:
    """Run the gpu-check suite into out/run_id within budget_s (the bench step gets what show and
    decide leave), then show its records and the decision from them. Without a GPU it refuses unless
    GPUENV_CPU_OK=1, and then runs at CPU_SIZES: a test of the script, not a GPU number."""
    gpus, why = nvidia_smi()
    if not gpus and not cpu_ok():
        raise UserError(f"no NVIDIA GPU here ({why}): `make gpu-check` measures the GPU parts of the decision; "
                        "to try the script on the CPU at 16 envs set GPUENV_CPU_OK=1 (its records are no GPU numbers)")
    if gpus and (backend := jax_backend()) != "gpu":
        raise UserError(f"a GPU is here ({gpus[0]['name']}) but this Python's JAX runs on {backend} ({sys.executable}): its records would "
                        "be no GPU numbers; run it with the machine's Python that has JAX with CUDA and the wheelhouse "
                        "(`make gpu-wheels` where there is internet, then `make gpu-check` there, which prefers them)")
    check = Check(out / run_id, on_gpu=bool(gpus))
    gpu_text = "; ".join(f"{g['name']} (driver {g['driver']})" for g in gpus) or f"none ({why}): GPUENV_CPU_OK=1, {CPU_SIZES[0]} envs and {CPU_PROCESSES} process a case on the CPU"
    say(f"gpu-check: GPU {gpu_text}; Python {sys.version.split()[0]}; {versions()}")
    say(f"gpu-check: records go to {check.run_dir}; budget {budget_s:.0f} s")
    deadline = time.monotonic() + budget_s
    reserve = 60.0 + STOP_GRACE_S  # show and decide after the bench, and the bench's grace to write its records
    shares = {"bench": reserve + PEERS_S, "peers": reserve}
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}  # like Ctrl-C
    try:
        for step in steps(check.run_dir, check.on_gpu):
            if not _step(check, step, deadline - shares.get(step.name, 0.0), say):
                break
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return check


def _step(check: Check, step: Step, deadline: float, say: Callable[[str], None]) -> bool:
    """Run one step; False when the rest cannot follow (the bench wrote no record)."""
    check.steps.append(step)
    say(f"gpu-check: {step.name}: {' '.join(step.argv[2:])}")
    _run(step, deadline)
    say(f"gpu-check: {step.name} {'stopped at the budget (its records kept)' if step.stopped else 'exited ' + str(step.returncode)} "
        f"after {step.seconds:.0f} s")
    return not (step.name == "bench" and not check.run_dir.is_dir())  # no record to show or decide from

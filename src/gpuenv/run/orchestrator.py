"""Runs cases in fresh worker processes and turns their output into one record per case.

The orchestrator never imports a simulator. A worker that raises, segfaults, hangs or is killed
becomes that case's recorded failure; the run goes on. Ctrl-C stops the current worker, records the
case as interrupted with whatever processes finished, and leaves every earlier record in place.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from gpuenv.backends.base import ACTION_DISTRIBUTION
from gpuenv.measure import stats
from gpuenv.measure.system import provenance
from gpuenv.results import schema
from gpuenv.results.store import write_record
from gpuenv.suites import PlannedCase
from gpuenv.tasks import get_task

MEASUREMENT_MODE = schema.THROUGHPUT
STDERR_TAIL = 2000


def jax_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuenv" / "jax"


def worker_env() -> dict[str, str]:
    """Environment for workers: JAX's persistent compilation cache on, so only the first process of a
    case compiles (unless the user configured the cache themselves)."""
    env = dict(os.environ)
    if "JAX_COMPILATION_CACHE_DIR" not in env:
        d = jax_cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        env["JAX_COMPILATION_CACHE_DIR"] = str(d)
    # Only compiles that matter: caching every tiny eager op costs more disk I/O than it saves.
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    return env


@dataclass
class ProcessOutcome:
    index: int
    result: dict | None  # the worker's JSON when it finished
    failure: str | None  # why there is no result
    stderr_tail: str = ""


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
        self.current: subprocess.Popen | None = None

    def handler(self, signum, frame) -> None:
        self.requested = True
        proc = self.current
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt


INTERRUPT = Interrupt()


def run_process(spec: dict, index: int, timeout_s: float, workdir: Path) -> ProcessOutcome:
    spec_path = workdir / f"spec-{index}.json"
    out_path = workdir / f"out-{index}.json"
    err_path = workdir / f"stderr-{index}.txt"
    spec_path.write_text(json.dumps(spec))
    INTERRUPT.check()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuenv", "worker", str(spec_path), str(out_path)],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            env=worker_env(),
            start_new_session=True,  # its own process group: a kill takes its children (SubprocVecEnv) too
        )
        INTERRUPT.current = proc
        try:
            rc = proc.wait(timeout=timeout_s)
            failure = None
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, failure = None, f"timed out after {timeout_s:g} s (hung or too slow); killed"
        except KeyboardInterrupt:  # a plain KeyboardInterrupt (no handler installed)
            _kill_group(proc)
            raise
        finally:
            INTERRUPT.current = None
        if INTERRUPT.requested:  # the handler killed this worker: stop here, cleanly
            _kill_group(proc)
            raise KeyboardInterrupt
    tail = err_path.read_text(errors="replace")[-STDERR_TAIL:]
    result = json.loads(out_path.read_text()) if out_path.exists() else None
    if failure is None:
        if result is not None and not result.get("ok"):
            failure, result = result.get("error", "worker failed"), None
        elif rc is not None and rc < 0:
            failure, result = f"worker killed by {_signal_name(rc)}", None
        elif rc != 0 or result is None:
            failure, result = f"worker exited with code {rc} without a result", None
    _kill_group(proc)  # whatever the worker left behind (env subprocesses) goes with it
    return ProcessOutcome(index, result, failure, tail)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def summarize_case(results: list[dict], frame_skip: int, has_physics: bool) -> dict:
    groups = [r["env_steps_per_s"] for r in results]
    s = stats.summarize(groups)
    warnings = []
    if s.n_processes < 3:
        warnings.append(f"only {s.n_processes} process(es): interval is not trustworthy")
    if s.wide:
        warnings.append(f"wide interval: +-{100 * s.rel_half_width:.1f}% of the median (noisy machine?)")
    if any(r.get("recalibrated") for r in results):
        warnings.append("calibration ended on a one-off slow call and was redone (late recompile?)")
    compile_cold = [r["phases_s"]["compile"] for r in results if r["compile_cache"] == "miss"]
    compile_warm = [r["phases_s"]["compile"] for r in results if r["compile_cache"] == "hit"]
    startup = sorted(r["startup_s"] for r in results)
    bottlenecks = [r["resources"].get("bottleneck") for r in results]
    return {
        "env_steps_per_s": s.to_dict(),
        "frames_per_s_median": s.median * frame_skip,
        "physics_steps_per_s_median": s.median * frame_skip if has_physics else None,
        "startup_s_median": startup[len(startup) // 2],
        "compile_s_median": sorted(r["phases_s"]["compile"] for r in results)[len(results) // 2],
        "compile_s_cold": compile_cold,
        "compile_s_warm": compile_warm,
        "cpu_percent_mean": [r["resources"].get("cpu_percent_mean") for r in results],
        "bottleneck": max(set(bottlenecks), key=bottlenecks.count),
        "warnings": warnings,
    }


def build_record(
    planned: PlannedCase,
    outcomes: list[ProcessOutcome],
    *,
    suite: str,
    run_id: str,
    where: dict,
    interrupted: bool = False,
) -> dict:
    case = planned.case
    native = get_task(case.task).native(case.backend)
    done = [o.result for o in outcomes if o.result is not None]
    failed = next((o for o in outcomes if o.failure), None)
    facts = done[0]["facts"] if done else {}
    status = "interrupted" if interrupted else ("failed" if failed or not done else "ok")
    if status != "ok":
        done = []  # no summary for a failed case; its finished processes stay in processes[]
    failure = None
    if status != "ok":
        reason = "interrupted by the user (Ctrl-C)" if interrupted else (failed.failure if failed else "no result")
        failure = {
            "reason": reason,
            "process": failed.index if failed else None,
            "stderr_tail": failed.stderr_tail if failed else "",
        }
    physics = {
        "control_dt_s": native.control_dt_s,
        "frame_skip": native.frame_skip,
        "physics_dt_s": native.physics_dt_s,
        "episode_steps": native.episode_steps,
    }
    summary = summarize_case(done, native.frame_skip, native.physics_dt_s is not None) if done else {}
    return {
        **schema.header(run_id=run_id, case_key=case.key, suite=suite, status=status, mode=MEASUREMENT_MODE),
        "case": case.to_dict(),
        "what": {
            "native_env_id": facts.get("native_env_id", native.env_id),
            "physics": physics,
            "obs_shape": facts.get("obs_shape"),
            "action_space": facts.get("action_space"),
            "action_distribution": ACTION_DISTRIBUTION,
            "reset_mode": facts.get("reset_mode", "unknown (no process finished)"),
            "device": facts.get("device"),
            "details": facts.get("details", {}),
            "catalogue": native.to_dict(),
        },
        "where": where,
        "settings": asdict(planned.measure),
        "processes": [
            {"index": o.index, "failure": o.failure, **(o.result or {})} for o in outcomes
        ],
        "summary": summary,
        "failure": failure,
    }


Event = Callable[[str, dict], None]


def run_plan(
    cases: list[PlannedCase],
    *,
    suite: str,
    run_id: str,
    out_dir: Path,
    on_event: Event = lambda kind, data: None,
) -> list[tuple[dict, Path]]:
    """Run every case; returns (record, path) for each written record. Re-raises KeyboardInterrupt
    after writing the interrupted case's record."""
    where = provenance()
    written: list[tuple[dict, Path]] = []
    for i, planned in enumerate(cases):
        case, m = planned.case, planned.measure
        on_event("case_start", {"index": i, "case": case})
        outcomes: list[ProcessOutcome] = []
        spec = {
            "case": case.to_dict(),
            "settings": {"min_time_s": m.min_time_s, "values": m.values, "warmups": m.warmups},
        }
        interrupted = False
        with tempfile.TemporaryDirectory(prefix="gpuenv-") as tmp:
            try:
                for p in range(m.processes):
                    on_event("process_start", {"index": i, "process": p, "of": m.processes})
                    o = run_process(spec, p, m.timeout_s, Path(tmp))
                    outcomes.append(o)
                    if o.failure:
                        break  # a case that fails once is recorded failed; do not burn more time on it
            except KeyboardInterrupt:
                interrupted = True
        try:
            record = build_record(planned, outcomes, suite=suite, run_id=run_id, where=where, interrupted=interrupted)
        except Exception as e:  # noqa: BLE001 - a bug in summarising must not lose the case
            outcomes.append(ProcessOutcome(len(outcomes), None, f"gpuenv could not summarise this case: {e!r}"))
            record = build_record(planned, outcomes, suite=suite, run_id=run_id, where=where, interrupted=interrupted)
        finish_case(record, out_dir=out_dir, index=i, written=written, on_event=on_event, interrupted=interrupted)
    return written


def finish_case(record: dict, *, out_dir: Path, index: int, written: list, on_event: Event, interrupted: bool) -> None:
    """Write a case's record, report it, and carry on the user's Ctrl-C once the record is safe."""
    path = write_record(out_dir, record)
    written.append((record, path))
    on_event("case_done", {"index": index, "record": record, "path": path})
    if interrupted:
        raise KeyboardInterrupt

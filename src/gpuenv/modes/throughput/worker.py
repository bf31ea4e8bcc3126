"""One throughput worker process: imports only its backend, times startup (imports, build + reset)
and the steady state via gpuenv.measure, and returns the measurement."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from gpuenv.backends.base import Case, action_pool
from gpuenv.errors import first_line
from gpuenv.measure.monitor import Monitor
from gpuenv.measure.timing import MeasureSettings, measure_throughput
from gpuenv.registry import default_registry


def measure_case(spec: dict, clock: Callable[[], float] = time.perf_counter, keep: Callable[[dict], None] = lambda result: None) -> dict:
    case = Case(**spec["case"])
    settings = MeasureSettings(**spec["settings"])
    registry = default_registry()
    info = registry.get(case.backend)
    native = registry.native(case.task, case.backend)

    t0 = clock()
    adapter = info.load()
    import_s = clock() - t0

    stages: dict[str, float] = {}
    if hasattr(adapter, "open_stages"):  # an adapter whose startup has named stages (Isaac Lab)
        stepper: Any = None
        for name, stage in adapter.open_stages(case, native):
            t0 = clock()
            stepper = stage() or stepper
            stages[name] = clock() - t0
        build_s = sum(stages.values())
    else:
        t0 = clock()
        stepper = adapter.open(case, native)
        build_s = clock() - t0
    # No close(): the worker exits right after writing its result, and the runner kills the worker's
    # process group (SubprocVecEnv children included). Closing 64 env processes one by one would
    # cost seconds per worker that nobody measures.
    stepper.load_actions(action_pool(stepper.facts.action_space, case.num_envs, case.action_pool_steps, case.seed))
    monitor = Monitor()
    m = measure_throughput(
        stepper,
        num_envs=case.num_envs,
        chunk_steps=case.chunk_steps,
        settings=settings,
        clock=clock,
        on_timed_region=monitor.set_active,
    )
    facts = stepper.facts
    cache = facts.details.pop("compile_cache", "n/a")
    resources = monitor.samples.summary()  # of the timed values above, before any phase runs
    result = {
        "ok": True,
        "pid": os.getpid(),
        "facts": {
            "native_env_id": facts.native_env_id,
            "obs_shape": list(facts.obs_shape),
            "action_space": asdict(facts.action_space),
            "reset_mode": facts.reset_mode,
            "device": facts.device,
            "details": facts.details,
            "physics_steps": facts.physics_steps,
        },
        "startup_s": import_s + build_s,
        "phases_s": {"import": import_s, "build_and_reset": build_s, "compile": m.compile_s, **stages},
        "compile_cache": cache,
        "loops": m.loops,
        "steps_per_value": m.steps_per_value,
        "calibration_s": m.calibration_s,
        "warmup_s": m.warmup_s,
        "value_s": m.value_s,
        "recalibrated": m.recalibrated,
        "env_steps_per_s": m.env_steps_per_s,
        "resources": resources,
        "phases": {},
    }
    if hasattr(stepper, "keep_caches"):
        keep(result)  # the figure is safe before the simulator's own shutdown runs
        keep_caches(stepper, result)
    if spec.get("phases"):
        from gpuenv.modes.throughput.phases import measure_phases, not_finished

        # The case's own figure is kept whatever the phases do (a hang, a native crash, MemoryError).
        pending = not_finished(spec["phases"])
        keep({**result, "phases": pending})
        stepper.close()  # the phases build their own envs; this one's threads and processes go first
        result["phases"] = measure_phases(spec["phases"], adapter, case, native, facts.action_space, settings, clock,
                                          done=lambda out: keep({**result, "phases": {**pending, **out}}))
    return result


def keep_caches(stepper: Any, result: dict) -> None:
    """A simulator that writes its compile cache only at its own shutdown (Genesis): the stepper's
    keep_caches(), after the timed values. It may say whether this process found its kernels cached
    (details["compile_cache"]); an error there is recorded beside the figure, never instead of it."""
    details = result["facts"]["details"]
    try:
        stepper.keep_caches()
    except Exception as e:  # noqa: BLE001 - the measured figure stands whatever its cache does
        details["keep_caches_error"] = first_line(e)
        return
    result["compile_cache"] = details.pop("compile_cache", result["compile_cache"])

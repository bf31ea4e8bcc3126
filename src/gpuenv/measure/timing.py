"""THE timing loop. Every number gpuenv reports comes out of `measure_throughput`.

Protocol (README, "How it measures"): startup is timed by the caller around `open`; the first chunk runs
alone and is reported as compile time; loops are calibrated until one timed value lasts at least
`min_time_s`; warm-up values are discarded; each timed value ends with exactly one `sync()`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuenv.backends.base import Stepper

Clock = Callable[[], float]


@dataclass(frozen=True)
class MeasureSettings:
    min_time_s: float = 0.2
    values: int = 3
    warmups: int = 1
    max_loops: int = 1 << 20

    def __post_init__(self) -> None:
        bad_time = not math.isfinite(self.min_time_s) or self.min_time_s <= 0
        if bad_time or self.values < 1 or self.warmups < 0 or self.max_loops < 1:
            raise ValueError(f"invalid measure settings: {self}")


@dataclass
class Measurement:
    compile_s: float
    loops: int  # chunks per timed value, after calibration
    steps_per_value: int  # env steps (all envs) in one timed value
    calibration_s: list[float] = field(default_factory=list)
    warmup_s: list[float] = field(default_factory=list)
    value_s: list[float] = field(default_factory=list)  # durations of the kept values
    recalibrated: bool = False  # the warm-ups showed calibration had stopped on a one-off slow call

    @property
    def env_steps_per_s(self) -> list[float]:
        return [self.steps_per_value / t for t in self.value_s]


def run_unit(stepper: Stepper, loops: int) -> None:
    """The synchronised unit every timing tool here measures: `loops` chunks, then one device sync.
    (pytest-benchmark's pedantic mode times this same call.)"""
    stepper.run(loops)
    stepper.sync()


def _timed(stepper: Stepper, loops: int, clock: Clock) -> float:
    t0 = clock()
    run_unit(stepper, loops)
    return clock() - t0


def measure_throughput(
    stepper: Stepper,
    *,
    num_envs: int,
    chunk_steps: int,
    settings: MeasureSettings,
    clock: Clock,
    on_timed_region: Callable[[bool], None] | None = None,
) -> Measurement:
    """Time `stepper` per the protocol. `on_timed_region(True/False)` brackets the kept values
    (the resource monitor samples only there)."""
    compile_s = _timed(stepper, 1, clock)
    calibration: list[float] = []
    loops = _calibrate(stepper, 1, settings, clock, calibration)
    warmups = [_timed(stepper, loops, clock) for _ in range(settings.warmups)]
    recalibrated = False
    if warmups and max(warmups) < settings.min_time_s / 2 and loops < settings.max_loops:
        # Calibration stopped on a one-off slow call (a late recompile, GC, page faults): the
        # warm-ups are far below min_time_s. Calibrate again from here, then warm up again.
        recalibrated = True
        loops = _calibrate(stepper, loops * 2, settings, clock, calibration)
        warmups += [_timed(stepper, loops, clock) for _ in range(settings.warmups)]
    if on_timed_region:
        on_timed_region(True)
    try:
        values = [_timed(stepper, loops, clock) for _ in range(settings.values)]
    finally:
        if on_timed_region:
            on_timed_region(False)
    return Measurement(
        compile_s=compile_s,
        loops=loops,
        steps_per_value=loops * chunk_steps * num_envs,
        calibration_s=calibration,
        warmup_s=warmups,
        value_s=values,
        recalibrated=recalibrated,
    )


def _calibrate(stepper: Stepper, loops: int, settings: MeasureSettings, clock: Clock, log: list[float]) -> int:
    """Grow loops until one timed call lasts min_time_s. Scales by the observed ratio (with head-room)
    rather than only doubling, so slow cases converge in one or two tries."""
    loops = min(loops, settings.max_loops)
    while True:
        dt = _timed(stepper, loops, clock)
        log.append(dt)
        if dt >= settings.min_time_s or loops >= settings.max_loops:
            return loops
        grow = 2 if dt <= 0 else min(max(2, int(1.2 * settings.min_time_s / dt) + 1), 1024)
        loops = min(loops * grow, settings.max_loops)

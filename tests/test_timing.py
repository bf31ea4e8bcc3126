"""The timing loop, driven by a fake clock and a fake stepper."""

from __future__ import annotations

import pytest

from gpuenv.backends.base import ActionSpace, StepperFacts
from gpuenv.measure.timing import MeasureSettings, measure_throughput


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class AsyncFakeStepper:
    """run() only queues work (like a JAX dispatch); sync() is where the clock advances.

    chunk_s: seconds per chunk in steady state; compile_s: extra on the very first chunk;
    slow_values: the first N timed calls after compile+calibration are this much slower per chunk.
    """

    def __init__(self, clock: FakeClock, chunk_s: float, compile_s: float = 0.0) -> None:
        self.clock, self.chunk_s, self.compile_s = clock, chunk_s, compile_s
        self.queued = 0.0
        self.first = True
        self.events: list[str] = []
        self.runs = 0
        self.on_run = None  # optional hook(stepper, n) after the n-th run() call (1-based)
        self.facts = StepperFacts("fake", (1,), ActionSpace("discrete", n=2), "none")

    def load_actions(self, pool) -> None:
        pass

    def run(self, loops: int) -> None:
        self.events.append(f"run{loops}")
        extra = 0.0
        if self.first:
            extra, self.first = self.compile_s, False
        self.queued += loops * self.chunk_s + extra
        self.runs += 1
        if self.on_run:
            self.on_run(self, self.runs)

    def sync(self) -> None:
        self.events.append("sync")
        self.clock.t += self.queued
        self.queued = 0.0

    def close(self) -> None:
        pass


def test_compile_is_timed_apart_and_kept_out_of_values():
    clock = FakeClock()
    st = AsyncFakeStepper(clock, chunk_s=0.01, compile_s=30.0)
    m = measure_throughput(st, num_envs=4, chunk_steps=10, settings=MeasureSettings(min_time_s=0.1, values=3), clock=clock)
    assert m.compile_s == pytest.approx(30.01)
    assert all(v == pytest.approx(m.loops * 0.01) for v in m.value_s)
    assert m.env_steps_per_s == [pytest.approx(4 * 10 / 0.01)] * 3


def test_calibration_reaches_min_time():
    clock = FakeClock()
    st = AsyncFakeStepper(clock, chunk_s=0.003)
    m = measure_throughput(st, num_envs=1, chunk_steps=1, settings=MeasureSettings(min_time_s=0.5), clock=clock)
    assert m.calibration_s[-1] >= 0.5
    assert all(v >= 0.5 for v in m.value_s)
    assert all(c < 0.5 for c in m.calibration_s[:-1])
    assert m.steps_per_value == m.loops


def test_one_sync_per_timed_value_and_work_is_inside_the_value():
    clock = FakeClock()
    st = AsyncFakeStepper(clock, chunk_s=0.05)
    s = MeasureSettings(min_time_s=0.1, values=4, warmups=2)
    m = measure_throughput(st, num_envs=1, chunk_steps=1, settings=s, clock=clock)
    # every run() is followed by exactly one sync(), never two runs or two syncs in a row
    assert st.events[0::2] == [e for e in st.events if e.startswith("run")]
    assert st.events[1::2] == ["sync"] * (len(st.events) // 2)
    timed_calls = 1 + len(m.calibration_s) + len(m.warmup_s) + len(m.value_s)
    assert st.events.count("sync") == timed_calls
    # the queued work is only done at sync(): values would be 0 if sync were outside the value
    assert min(m.value_s) > 0


def test_warmups_are_discarded():
    clock = FakeClock()
    st = AsyncFakeStepper(clock, chunk_s=0.1)

    def slow_warmups(stepper, n: int) -> None:
        # run 1 compiles, run 2 calibrates (0.1 s >= min_time), runs 3-4 are the warm-ups: 10x slower
        if n in (3, 4):
            stepper.queued *= 10

    st.on_run = slow_warmups
    m = measure_throughput(
        st, num_envs=1, chunk_steps=1, settings=MeasureSettings(min_time_s=0.1, values=3, warmups=2), clock=clock
    )
    assert len(m.warmup_s) == 2 and min(m.warmup_s) == pytest.approx(10 * max(m.value_s))
    assert m.value_s == [pytest.approx(0.1 * m.loops)] * 3


def test_timed_region_callback_brackets_only_the_kept_values():
    clock = FakeClock()
    st = AsyncFakeStepper(clock, chunk_s=0.1)
    marks: list[tuple[bool, int]] = []
    measure_throughput(
        st,
        num_envs=1,
        chunk_steps=1,
        settings=MeasureSettings(min_time_s=0.1, values=3, warmups=1),
        clock=clock,
        on_timed_region=lambda on: marks.append((on, st.events.count("sync"))),
    )
    (on, before), (off, after) = marks
    assert on and not off and after - before == 3


def test_invalid_settings_rejected():
    with pytest.raises(ValueError):
        MeasureSettings(values=0)
    with pytest.raises(ValueError):
        MeasureSettings(min_time_s=0)


def test_calibration_stopped_by_a_one_off_slow_call_is_redone():
    clock = FakeClock()
    st = AsyncFakeStepper(clock, chunk_s=0.001)
    def late_recompile(stepper, n: int) -> None:
        if n == 2:  # first calibration call: a late recompile makes it look long enough
            stepper.queued += 5.0

    st.on_run = late_recompile
    m = measure_throughput(
        st, num_envs=1, chunk_steps=1, settings=MeasureSettings(min_time_s=0.2, values=3, warmups=1), clock=clock
    )
    assert m.recalibrated
    assert all(v >= 0.2 for v in m.value_s)


def test_host_memory_counts_the_child_processes_of_the_worker():
    """A simulator's own processes (SubprocVecEnv envs, Godot servers) are part of a case's memory."""
    import subprocess
    import sys
    import time

    import psutil

    from gpuenv.measure.monitor import memory, tree_pss

    me = psutil.Process()
    before = tree_pss(me)
    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(300 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)"])
    try:
        deadline = time.time() + 30
        while tree_pss(me) - before < 280 * 2**20 and time.time() < deadline:
            time.sleep(0.1)
        assert tree_pss(me) - before >= 280 * 2**20
    finally:
        child.kill()
        child.wait()
    m = memory(before, None)
    assert m["device_peak_mib"] is None and m["device_note"] == "not measured: no GPU on this machine"
    assert m["tree_pss_peak_mib"] == round(before / 2**20, 1) and m["worker_peak_rss_mib"] > 0


def test_energy_from_rapl_counters_and_absent_where_there_are_none(tmp_path, monkeypatch):
    from gpuenv.measure import monitor

    monkeypatch.setattr(monitor, "RAPL", tmp_path / "none")
    e = monitor.Energy()
    e.start()
    e.stop()
    assert e.result()["cpu_joules"] is None and e.result()["gpu_joules"] is None  # absent, never zero
    pkg = tmp_path / "powercap" / "intel-rapl:0"
    pkg.mkdir(parents=True)
    (pkg / "energy_uj").write_text("1000000")
    (pkg / "max_energy_range_uj").write_text("10000000")
    monkeypatch.setattr(monitor, "RAPL", tmp_path / "powercap")
    e = monitor.Energy()
    e.start()
    (pkg / "energy_uj").write_text("3500000")
    e.stop()
    e.start()
    (pkg / "energy_uj").write_text("500000")  # wrapped past 10 J
    e.stop()
    r = e.result()
    assert r["cpu_joules"] == 2.5 + 7.0 and r["cpu_source"].startswith("RAPL (1 package")


def test_energy_per_million_steps_is_null_without_counters():
    from gpuenv.modes.throughput.build import energy_per_m_steps

    res = [{"resources": {"energy": {"cpu_joules": 3.0, "gpu_joules": None}}, "steps_per_value": 1000, "value_s": [0.1, 0.1, 0.1]}]
    assert energy_per_m_steps(res) == {"cpu_j_per_m_steps": 1000.0, "gpu_j_per_m_steps": None}
    assert energy_per_m_steps([{"resources": {}, "steps_per_value": 10, "value_s": [1]}]) == {"cpu_j_per_m_steps": None, "gpu_j_per_m_steps": None}


@pytest.mark.parametrize("driver, simulator, top, label", [
    # JAX on the CPU (one process: XLA's threads compute while the Python thread waits): the published
    # make bench's Brax and MJX rows, which read "round trip ... driver 0.00" before
    (0.02, 1.14, 0.6, "simulator CPU: its threads at 1.14 cores while the driver waits"),
    (0.00, 1.01, 0.5, "simulator CPU: its threads at 1.01 cores while the driver waits"),
    (0.47, 0.44, 0.4, "round trip: driver and simulator take turns (simulator 0.44 + driver 0.47 of 2 cores"),  # EnvPool sync, cartpole
    (0.14, 1.83, 0.9, "simulator CPU: all cores busy"),
    (0.95, 0.30, 0.3, "driver CPU: the Python thread at 0.95 core"),
    (0.20, 0.20, 0.2, "IPC/wait: no side saturated"),
])
def test_the_bottleneck_is_named_from_where_the_cores_went(driver, simulator, top, label):
    from gpuenv.measure.monitor import bottleneck

    split = {"driver_cores": driver, "simulator_cores": simulator, "simulator_top_cores": top, "cores": 2}
    assert bottleneck({"samples": 5, "cpu_split": split}).startswith(label)

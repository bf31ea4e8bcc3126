"""A machine-speed fingerprint: a short fixed reference workload, timed the way cases are timed.

Two VMs with the same metadata (CPU model, cores, memory, kernel) measured the same suite 2x apart: a
noisy neighbour, CPU steal, another clock. A machine's name does not say how fast it is, so every
record carries this fingerprint, measured in the main process just before the case's workers start
(no worker is running then): a pure-Python loop (the speed of a host-side driver: SubprocVecEnv, a
Python simulator loop) and a memory-bound NumPy add (the speed of copying observations), each timed
REPEATS times, the median with the range of the middle values as its noise band; plus, as pyperf
records, the CPU clock and frequency governor where readable and the CPU steal time during the
measurement. About 0.2 s per case.

`differs` says when two fingerprints are beyond their noise apart (then the records are treated as
from different machines); `machines` groups records by machine identity and speed, for the report
and the tables, which never join two machines without saying so.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import psutil

from gpuenv.results.models import Fingerprint, RecordBase, SpeedBand

R = TypeVar("R", bound=RecordBase)

METHOD = "gpuenv-ref-1"  # change it when the workload changes: fingerprints of two methods never compare
REPEATS = 7
LOOP_N = 150_000
MEM_BYTES = 8 * 2**20
# (key, unit, tolerance): speeds closer than the tolerance are one machine, whatever the noise bands
# say. Memory bandwidth on a shared VM moves more than a core's speed does, so it gets more room.
COMPONENTS = (("python_mops", "Mloops/s (pure Python)", 0.10), ("memory_gbs", "GB/s (NumPy add)", 0.25))


def _loop(n: int) -> int:
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def _speed_band(rates: list[float]) -> dict[str, float]:
    s = sorted(rates)
    return {"median": float(np.median(s)), "low": s[1] if len(s) > 2 else s[0], "high": s[-2] if len(s) > 2 else s[-1]}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def _cpu_mhz() -> float | None:
    khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
    if khz and khz.isdigit():
        return round(int(khz) / 1000, 1)
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("cpu MHz"):
            try:
                return round(float(line.split(":", 1)[1]), 1)
            except ValueError:
                return None
    return None


def measure() -> dict[str, Any]:
    """The fingerprint of this machine now (a record's where.machine.fingerprint)."""
    before = psutil.cpu_times()
    t_start = time.perf_counter()
    _loop(LOOP_N // 10)  # warm-up
    py = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        _loop(LOOP_N)
        py.append(LOOP_N / (time.perf_counter() - t) / 1e6)
    n = MEM_BYTES // 8
    a, b, c = np.ones(n), np.ones(n), np.empty(n)
    np.add(a, b, out=c)  # warm-up: pages touched
    mem = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        np.add(a, b, out=c)
        mem.append(3 * MEM_BYTES / (time.perf_counter() - t) / 1e9)  # two reads, one write
    wall = time.perf_counter() - t_start
    after = psutil.cpu_times()
    steal = getattr(after, "steal", None)
    steal_pct = None
    if steal is not None and wall > 0:
        steal_pct = round(100 * max(0.0, steal - before.steal) / (wall * (psutil.cpu_count() or 1)), 1)
    return {
        "method": METHOD,
        "python_mops": _speed_band(py),
        "memory_gbs": _speed_band(mem),
        "repeats": REPEATS,
        "cpu_mhz": _cpu_mhz(),
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "steal_pct": steal_pct,
        "seconds": round(wall, 3),
    }


def of(record: RecordBase) -> Fingerprint | None:
    fp = record.where.machine.fingerprint
    return fp if fp is not None and fp.method == METHOD else None


def _band(fp: Fingerprint, key: str) -> SpeedBand:
    band: SpeedBand = getattr(fp, key)
    return band


def _noise(band: SpeedBand) -> float:
    return (band.high - band.low) / 2 / band.median


def differs(a: Fingerprint | None, b: Fingerprint | None) -> str | None:
    """Why two fingerprints are of different machine speeds (beyond TOLERANCE and twice their noise),
    or None when they agree or either is missing."""
    if a is None or b is None or a.method != b.method:
        return None
    out = []
    for key, unit, tolerance in COMPONENTS:
        x, y = _band(a, key), _band(b, key)
        ratio = y.median / x.median
        allowed = max(tolerance, 2 * max(_noise(x), _noise(y)))
        if abs(math.log(ratio)) > math.log1p(allowed):
            out.append(f"{x.median:.3g} vs {y.median:.3g} {unit} ({ratio:.2f}x, noise +-{100 * allowed:.0f}%)")
    return "; ".join(out) or None


def identity(record: RecordBase) -> str:
    """The machine a record names: the user's name for it where given, its CPU model and cores, its
    GPUs with their driver. Records of one identity are one machine where their speeds agree (machines)."""
    m = record.where.machine
    gpus = "; ".join(f"{g.name} (driver {g.driver})" for g in m.gpus) or "no GPU"
    named = f"{m.name}: " if m.name else ""
    return f"{named}{m.cpu_model or 'unknown CPU'} ({m.cpu_logical} cores), {gpus}"


def _run_fingerprint(records: list[R]) -> Fingerprint | None:
    """One run's fingerprint: per component, the median over its cases (a run is on one machine)."""
    fps = [f for f in map(of, records) if f]
    if not fps:
        return None
    return fps[0].model_copy(update={
        key: SpeedBand(**{k: float(np.median([getattr(_band(f, key), k) for f in fps])) for k in ("median", "low", "high")})
        for key, _, _ in COMPONENTS})


def machines(records: list[R]) -> list[tuple[str, list[R]]]:
    """Records grouped by machine. A run is on one machine; runs are one machine when their identity
    is the same and their fingerprints (median over the run's cases) are within noise of the group's
    first, or when the user named the machine (`bench --machine-name`): a name is the user's word that
    the runs are of one machine, whose speed may have moved between them (a cloud VM's does, 1.65x
    within one run of the lent H200). Labels say the identity and the reference speed (its range
    where a named machine's runs differ)."""
    runs: dict[str, list[R]] = {}
    for r in records:
        runs.setdefault(r.run_id, []).append(r)
    groups: list[tuple[str, list[Fingerprint | None], list[R]]] = []
    keyed = [(identity(recs[0]), _run_fingerprint(recs), recs) for recs in runs.values()]
    for ident, fp, recs in sorted(keyed, key=lambda x: (x[0], x[1].python_mops.median if x[1] else 0.0)):
        named = recs[0].where.machine.name is not None
        for g in groups:
            if g[0] == ident and (named or ((g[1][0] is None) == (fp is None) and not differs(g[1][0], fp))):
                g[1].append(fp)
                g[2].extend(recs)
                break
        else:
            groups.append((ident, [fp], list(recs)))
    out = []
    for ident, fps, recs in groups:
        known = [f for f in fps if f is not None]
        if not known:
            speed = "speed not recorded"
        else:
            mops = sorted({f"{f.python_mops.median:.3g}" for f in known}, key=float)
            gbs = sorted({f"{f.memory_gbs.median:.3g}" for f in known}, key=float)
            speed = (f"reference speed {mops[0]} Mloops/s, {gbs[0]} GB/s" if len(mops) == len(gbs) == 1 else
                     f"reference speed {mops[0]}-{mops[-1]} Mloops/s, {gbs[0]}-{gbs[-1]} GB/s over {len(known)} runs")
        out.append((f"{ident}, {speed}", recs))
    return out


def without_speed(label: str) -> str:
    """A `machines` label without its reference speed: the machine as a sentence names it."""
    return label.split(", reference speed", 1)[0]


def runs_by_machine(records: list[R]) -> list[tuple[int, str, str, list[R]]]:
    """(machine number from 1, machine label, run id, that run's records): per machine in `machines`'
    order, its runs in the order they started."""
    out = []
    for i, (label, recs) in enumerate(machines(records), 1):
        runs: dict[str, list[R]] = {}
        for r in recs:
            runs.setdefault(r.run_id, []).append(r)
        for run_id in sorted(runs, key=lambda k: (min(r.created_utc for r in runs[k]), k)):
            out.append((i, label, run_id, runs[run_id]))
    return out


def runs_line(records: list[R], most: int = 3) -> str:
    """Which runs the records are of, when, and on which machine(s): 'run R (2026-12-03 14:37 to 14:55
    UTC) on MACHINE' (a few runs named, the rest counted), for a command that sets two sides apart."""
    from gpuenv.format import time_span

    if not records:
        return "no records"
    named: dict[str, list[str]] = {}
    for _, label, run_id, recs in runs_by_machine(records):
        named.setdefault(label, []).append(f"run {run_id} ({time_span([r.created_utc for r in recs])})")
    parts = []
    for label, runs in named.items():
        more = f" and {len(runs) - most} more run(s)" if len(runs) > most else ""
        parts.append(f"{', '.join(runs[:most])}{more} on {label}")
    return "; ".join(parts)


def drift(records: list[R]) -> list[str]:
    """One line per run whose machine speed moved beyond noise between its cases (a busy neighbour)."""
    runs: dict[str, list[tuple[Fingerprint, R]]] = {}
    for r in records:
        if fp := of(r):
            runs.setdefault(r.run_id, []).append((fp, r))
    lines = []
    for run_id, recs in sorted(runs.items()):
        by_speed = sorted(recs, key=lambda fr: fr[0].python_mops.median)
        (slow_fp, slow), (fast_fp, fast) = by_speed[0], by_speed[-1]
        why = differs(slow_fp, fast_fp)
        if why:
            lines.append(f"run {run_id}: the machine's reference speed moved between cases ({slow.case_key} vs "
                         f"{fast.case_key}: {why}): a busy neighbour or CPU steal; its cases were measured at different speeds")
    return lines


def footnotes(records: list[R]) -> list[str]:
    """Warnings: records of more than one machine shown together; runs whose speed moved."""
    groups = machines(records)
    out = drift(records)
    if len(groups) > 1:
        parts = "; ".join(f"[{i}] {label}: {len(recs)} record(s)" for i, (label, recs) in enumerate(groups, 1))
        out.insert(0, f"these records come from {len(groups)} machines, told apart by identity and reference speed: {parts}; "
                      "rows of different machines are not comparable (gpuenv report draws each on its own page)")
    return out


def runs_machine(records: list[RecordBase]) -> str:
    """The machine some records name, its reference speed over their cases, and when they ran."""
    if not records:
        return "no records"
    speeds = [f.python_mops.median for r in records if (f := of(r))]
    speed = f"reference speed {min(speeds):.3g}-{max(speeds):.3g} Mloops/s over the cases" if speeds else "reference speed not recorded"
    times = sorted(r.created_utc for r in records)
    return f"{identity(records[0])}, {speed}, {times[0]} to {times[-1]}"

"""Each claim beside its closest measured record: the value in the claim's unit with its interval, the
ratio claimed / measured, why they differ, or the run that would check it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuenv.claims.register import Claim, load_register
from gpuenv.format import duration
from gpuenv.measure.fingerprint import identity
from gpuenv.modes import of
from gpuenv.modes.base import StepRate
from gpuenv.results.schema import Record

Candidate = tuple[Record, str]  # a record and where the store keeps it


@dataclass
class Measured:
    value: float
    ci_low: float
    ci_high: float
    record: Record
    path: str = ""
    interval: str = "95% interval"  # what ci_low..ci_high is

    @property
    def case_key(self) -> str:
        return self.record.case_key


@dataclass
class Result:
    claim: Claim
    status: str  # "measured" | "arithmetic" | "not measured"
    measured: Measured | None = None
    protocol_run: Measured | None = None  # the claim's own protocol, run by gpuenv
    ratio: float | None = None  # claimed / measured
    differences: list[str] = field(default_factory=list)
    to_check: str = ""  # the run that would check it (or check it better: on the claim's hardware)
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        def m(x: Measured | None) -> dict | None:
            return None if x is None else {"value": x.value, "ci_low": x.ci_low, "ci_high": x.ci_high, "case_key": x.case_key,
                                           "interval": x.interval, "machine": identity(x.record), "path": x.path}

        c = self.claim
        return {"id": c.id, "who": c.who, "stated": c.stated, "unit": c.unit, "claimed": c.central, "stated_range": list(c.stated_range()),
                "hardware": c.hardware, "protocol": c.protocol, "source": c.source, "status": self.status,
                "measured": m(self.measured), "protocol_run": m(self.protocol_run), "ratio": self.ratio,
                "differences": self.differences, "to_check": self.to_check, "detail": self.detail}


def device_class(record: Record) -> str:
    """Where a record's simulator ran: "cpu", "gpu" or "tpu" (from the mode's device: "cpu", "gpu:NAME", "tpu:KIND")."""
    kind = str(of(record).device(record) or "cpu").split(":", 1)[0].lower()
    return kind if kind in ("gpu", "tpu") else "cpu"


def _split(selector: str) -> tuple[str, str | None]:
    b, _, v = selector.partition(":")
    return b, v or None


def candidates(records: list[Candidate], selector: str, task: str) -> list[Candidate]:
    backend, variant = _split(selector)
    return [(r, p) for r, p in records
            if r.status == "ok" and of(r).step_rate(r) is not None and r.case.backend == backend
            and (variant is None or r.case.variant == variant) and r.case.task == task]


def closest(cands: list[Candidate], num_envs: int | None) -> Candidate | None:
    """From the newest run that has the case (one machine for every claim it can), the record at
    the claim's num_envs, else the nearest on a log scale; with no num_envs stated, the largest
    measured (where a throughput claim is usually made); of equals the fastest (a claim about a
    backend, not one of its variants)."""
    if not cands:
        return None
    newest = max(rp[0].run_id for rp in cands)
    mine = [rp for rp in cands if rp[0].run_id == newest]

    def key(rp: Candidate) -> tuple[float, float]:
        n = rp[0].case.num_envs
        return (-n if num_envs is None else abs(math.log(n / num_envs)), -_step(rp[0]).median)

    return min(mine, key=key)


def in_run(cands: list[Candidate], run_id: str, num_envs: int) -> Candidate | None:
    """The candidate of this run at exactly this num_envs (the fastest variant of equals)."""
    mine = [rp for rp in cands if rp[0].run_id == run_id and rp[0].case.num_envs == num_envs]
    return max(mine, key=lambda rp: _step(rp[0]).median) if mine else None


def _step(record: Record) -> StepRate:
    """The stepping rate of a candidate (candidates() keeps only records that have one)."""
    step = of(record).step_rate(record)
    assert step is not None, record.case_key
    return step


def _rate(record: Record) -> tuple[float, float, float]:
    s = _step(record)
    return s.median, s.ci_low, s.ci_high


def rate_in(record: Record, unit: str, frame_skip: int) -> tuple[float, float, float]:
    """The record's env steps/s in the claim's unit."""
    s = _step(record)
    if unit == "frames/s":
        f = frame_skip
    elif unit == "physics steps/s":
        assert s.physics_per_step, f"{record.case_key}: no physics steps per env step (filter with in_unit)"
        f = s.physics_per_step
    else:
        f = 1
    return s.median * f, s.ci_low * f, s.ci_high * f


def in_unit(found: list[Candidate], unit: str) -> list[Candidate]:
    """The candidates that can be read in the claim's unit: for physics steps/s, those whose backend
    reported the physics steps it ran per env step (never the catalogue's frame_skip)."""
    if unit != "physics steps/s":
        return found
    return [rp for rp in found if _step(rp[0]).physics_per_step]


def _measured(rp: Candidate, unit: str, frame_skip: int) -> Measured:
    v, lo, hi = rate_in(rp[0], unit, frame_skip)
    return Measured(v, lo, hi, rp[0], rp[1])


def cannot_run(selector: str, task: str) -> str | None:
    """Why gpuenv cannot measure this backend on this task (None: it can)."""
    from gpuenv.registry import default_registry

    reg = default_registry()
    backend, _ = _split(selector)
    if backend not in reg.backends:
        return f"{backend} is not a gpuenv backend (an adapter in src/gpuenv/backends/ would measure it)"
    native = reg.get(backend).tasks.get(task)
    if native is None:
        return f"{backend} has no {task} in gpuenv"
    if native.unsupported:
        return f"{backend} {task}: {native.unsupported}"
    return None


def _bench_cmd(selector: str, task: str, num_envs: int | None, extra: str = "") -> str:
    n = f" --num-envs {num_envs}" if num_envs else ""
    return f"gpuenv bench --backend {selector} --task {task}{n}{extra}"


def _hardware_differences(claim: Claim, record: Record) -> list[str]:
    out = []
    measured = device_class(record)
    if claim.hardware_class != "unstated" and claim.hardware_class != measured:
        out.append(f"hardware class: claimed on {claim.hardware_class.upper()} ({claim.hardware}), measured on {measured.upper()} "
                   f"({identity(record)})")
    elif claim.hardware_class == "unstated":
        out.append(f"hardware not stated by the claim; measured on {identity(record)}")
    else:
        out.append(f"hardware: claimed on {claim.hardware}; measured on {identity(record)}")
    return out


def check_claim(claim: Claim, records: list[Candidate]) -> Result:
    c = claim.check
    if c.kind == "arithmetic":
        seconds = c.steps / c.rate
        ratio = claim.central / seconds
        ok = "holds" if abs(math.log(ratio)) < math.log(1.15) else "does not hold"
        return Result(claim, "arithmetic", ratio=ratio, detail=f"{c.steps:,.0f} steps / {c.rate:,.0f} steps/s = {seconds:,.0f} s "
                      f"({duration(seconds)}); stated {duration(claim.central)}: the arithmetic {ok}")
    if c.kind == "rate":
        why_not = cannot_run(c.backend, c.task)
        if why_not:
            return Result(claim, "not measured", to_check=f"gpuenv cannot run it yet: {why_not}", differences=list(claim.notes))
        pick = closest(in_unit(candidates(records, c.backend, c.task), claim.unit), c.num_envs)
        hw = "a GPU machine" if claim.hardware_class == "gpu" else claim.hardware
        run = _bench_cmd(c.backend, c.task, c.num_envs)
        if pick is None:
            return Result(claim, "not measured", to_check=f"{run} (on {hw})", differences=list(claim.notes))
        m = _measured(pick, claim.unit, c.frame_skip)
        diffs = _hardware_differences(claim, m.record)
        n = m.record.case.num_envs
        if c.num_envs and n != c.num_envs:
            diffs.append(f"num_envs: claimed at {c.num_envs}, closest measured {n}")
        if claim.unit == "frames/s" and c.frame_skip != 1:
            diffs.append(f"unit: the claim counts frames (env steps x frame_skip {c.frame_skip}); the measured env steps/s are converted")
        diffs += claim.notes
        res = Result(claim, "measured", measured=m, ratio=claim.central / m.value, differences=diffs,
                     to_check=f"{run} on {hw}" if device_class(m.record) != claim.hardware_class != "unstated" else "")
        if c.protocol_backend:  # the claim's protocol, at the same size in the same run: only the protocol differs
            proto = in_run(in_unit(candidates(records, c.protocol_backend, c.task), claim.unit), m.record.run_id, n)
            if proto is None:
                res.differences.append(f"the claim's own protocol ({c.protocol_backend}) is not measured in the same run yet: "
                                       f"{_bench_cmd(c.protocol_backend, c.task, n)} --backend {c.backend}")
            else:
                res.protocol_run = _measured(proto, claim.unit, c.frame_skip)
                res.differences.append(
                    f"protocol: gpuenv running the claim's own protocol ({c.protocol_backend}) measured "
                    f"{res.protocol_run.value / m.value:.2f}x gpuenv's; the remaining {claim.central / res.protocol_run.value:.2g}x "
                    "is hardware (and what the notes say)")
        return res
    if c.kind == "ratio":
        num = candidates(records, c.numerator, c.task)
        den = candidates(records, c.denominator, c.task)
        run = f"{_bench_cmd(c.numerator, c.task, c.num_envs)} --backend {c.denominator}"
        # both sides from one run (one machine, one time): the newest run that has both at some size
        pairs = {(rp[0].run_id, rp[0].case.num_envs) for rp in num} & {(rp[0].run_id, rp[0].case.num_envs) for rp in den}
        if not pairs:
            return Result(claim, "not measured", to_check=run, differences=list(claim.notes))
        newest = max(rid for rid, _ in pairs)
        sizes = sorted(n for rid, n in pairs if rid == newest)
        want = c.num_envs or max(sizes)
        n = min(sizes, key=lambda s_: (abs(math.log(s_ / want)), -s_))
        a, b = in_run(num, newest, n), in_run(den, newest, n)
        assert a and b
        (va, la, ha), (vb, lb, hb) = _rate(a[0]), _rate(b[0])
        m = Measured(va / vb, la / hb, ha / lb, a[0], a[1])
        diffs = _hardware_differences(claim, a[0])
        if c.num_envs and n != c.num_envs:
            diffs.append(f"num_envs: claimed at {c.num_envs}, closest measured {n}")
        diffs += claim.notes
        detail = f"{c.numerator} {va:,.0f} / {c.denominator} {vb:,.0f} env steps/s at {n} envs ({b[0].case_key})"
        return Result(claim, "measured", measured=m, ratio=claim.central / m.value, differences=diffs, detail=detail)
    if c.kind == "training-ratio":
        return _training_ratio(claim, records)
    # phase: the case's own rate over its rate through the phase
    pick = closest([rp for rp in candidates(records, c.backend, c.task) if c.phase in of(rp[0]).phase_ratios(rp[0])], c.num_envs)
    if pick is None:
        return Result(claim, "not measured", differences=list(claim.notes),
                      to_check=f"a suite with phases = [\"{c.phase}\"] on {c.backend} {c.task} (the quick suite has one: make bench)")
    r, lo, hi = of(pick[0]).phase_ratios(pick[0])[c.phase]  # phase rate / the case's own rate, with its interval
    m = Measured(1 / r, 1 / hi, 1 / lo, pick[0], pick[1])
    diffs = _hardware_differences(claim, pick[0]) + list(claim.notes)
    return Result(claim, "measured", measured=m, ratio=claim.central / m.value, differences=diffs,
                  detail=f"{c.backend} {c.task} at {pick[0].case.num_envs} envs: through {c.phase} {r:.2f}x its own rate")


def _training_ratio(claim: Claim, records: list[Candidate]) -> Result:
    """A trainer's training fps (env steps / training seconds, startup, compile and evaluation apart) on one
    backend over another's, one definition, both from one run of time-to-reward records: the median over
    seeds of each, the interval every seed pairing spans."""
    from statistics import median

    from gpuenv.modes.ttr.record import TtrRecord
    from gpuenv.modes.ttr.report import Speedup

    c = claim.check

    def trained(selector: str) -> list[tuple[TtrRecord, str]]:
        backend, variant = _split(selector)
        return [(r, p) for r, p in records if isinstance(r, TtrRecord) and r.training_rates() and r.case.backend == backend
                and (variant is None or r.case.variant == variant) and r.case.task == c.task
                and (c.num_envs is None or r.case.num_envs == c.num_envs)]

    num, den = trained(c.numerator), trained(c.denominator)
    runs = {r.run_id for r, _ in num} & {r.run_id for r, _ in den}
    if not runs:
        return Result(claim, "not measured", to_check=f"gpuenv bench --suite {c.suite}", differences=list(claim.notes))
    newest = max(runs)
    (a, path), (b, _) = (next(rp for rp in side if rp[0].run_id == newest) for side in (num, den))
    ra, rb = a.training_rates(), b.training_rates()
    ma, mb = median(ra), median(rb)
    m = Measured(*Speedup(a, b).fps_ratio(), a, path, "the span of every seed pairing")
    detail = (f"{c.numerator} {ma:,.0f} / {c.denominator} {mb:,.0f} env steps/s of training at {a.case.num_envs} envs "
              f"(median of {len(ra)} and {len(rb)} seeds; startup, compile and evaluation apart; {b.case_key}, run {newest})")
    return Result(claim, "measured", measured=m, ratio=claim.central / m.value,
                  differences=_hardware_differences(claim, a) + list(claim.notes), detail=detail)


def record_path(r: Record) -> str:
    """Where the store keeps a record: <run id>/<case key>.json under its results directory."""
    return f"{r.run_id}/{r.case_key}.json"


def check_all(records: list[Record], path: Path | None = None) -> list[Result]:
    pairs = [(r, record_path(r)) for r in records]
    return [check_claim(c, pairs) for c in load_register(path)]

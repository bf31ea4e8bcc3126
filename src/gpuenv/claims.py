"""Published speed claims (claims/register.toml) checked against measured records.

Each claim states who claims what, the number and unit as stated, the hardware and protocol as
stated, and its source; its `check` table says what gpuenv measures for it:

- kind "rate": a backend's throughput on a task (closest num_envs), converted to the claim's unit
  (env steps/s, frames/s = env steps x the claim's frame_skip, physics steps/s);
- kind "ratio": one backend's rate over another's on the same task and num_envs (EnvPool "10x");
- kind "phase": the cost of a phase, the case's own rate over its rate through that phase
  (SB3's VecEnv wrapping "2-10x");
- kind "arithmetic": a derived statement (steps / rate = time), checked by arithmetic.

For each claim the check names the closest measured record, its value with its 95% interval and
machine, the ratio claimed / measured, and why they differ where that is known: the claim's own notes
(protocol) and what the records show (hardware class, num_envs, unit). Where a claim names a
protocol run (`protocol_backend`: gpuenv running the claim's own protocol, e.g. EnvPool's benchmark
settings), the check shows both, so protocol and hardware are told apart. A claim with no comparable
record says which run would check it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuenv import inputs
from gpuenv.errors import UserError
from gpuenv.format import duration, fmt_rate
from gpuenv.results.schema import quote as schema_quote

ROOT = Path(__file__).resolve().parents[2]
REGISTER = ROOT / "claims" / "register.toml"
UNITS = ("env steps/s", "frames/s", "physics steps/s", "x", "s")
KINDS = ("rate", "ratio", "phase", "arithmetic")
HARDWARE = ("cpu", "gpu", "tpu", "unstated")

_CLAIM_KEYS = {"id", "who", "stated", "value", "value_low", "value_high", "unit", "hardware", "hardware_class", "protocol",
               "source", "notes", "check"}
_CHECK_KEYS = {"kind", "backend", "task", "num_envs", "frame_skip", "numerator", "denominator", "phase", "protocol_backend",
               "steps", "rate"}


@dataclass(frozen=True)
class Check:
    kind: str
    backend: str = ""  # backend or backend:variant (rate, phase)
    task: str = ""
    num_envs: int | None = None  # None: the largest measured
    frame_skip: int = 1  # frames per agent step as the claim counts them (frames/s)
    numerator: str = ""  # ratio
    denominator: str = ""
    phase: str = ""  # phase: vecenv, inference, update
    protocol_backend: str = ""  # gpuenv running the claim's own protocol (backend:variant)
    steps: float = 0.0  # arithmetic: steps at `rate` take the claim's value in seconds
    rate: float = 0.0


@dataclass(frozen=True)
class Claim:
    id: str
    who: str
    stated: str  # the claim as written ("about 10x", "1.1M FPS")
    unit: str
    hardware: str
    hardware_class: str
    protocol: str
    source: str
    check: Check
    value: float | None = None
    value_low: float | None = None
    value_high: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def central(self) -> float:
        if self.value is not None:
            return self.value
        assert self.value_low is not None and self.value_high is not None
        return math.sqrt(self.value_low * self.value_high)  # a range's geometric middle

    def stated_range(self) -> tuple[float, float]:
        if self.value is not None:
            return self.value, self.value
        assert self.value_low is not None and self.value_high is not None
        return self.value_low, self.value_high


def register_path() -> Path:
    return Path(os.environ.get("GPUENV_CLAIMS", REGISTER))


def load_register(path: Path | None = None) -> list[Claim]:
    """The claims of a register file; UserError naming the file, claim and key on any mistake."""
    path = path or register_path()
    where = str(path)
    data = inputs.read_toml(path, f"claims register {where} (GPUENV_CLAIMS names another)")
    unknown = set(data) - {"claim"}
    if unknown:
        raise UserError(f"claims register {where}: unknown top-level key {sorted(unknown)[0]!r} (only [[claim]] tables)")
    claims = data.get("claim", [])
    if not isinstance(claims, list) or not all(isinstance(c, dict) for c in claims):
        raise UserError(f"claims register {where}: 'claim' must be [[claim]] tables, one per claim")
    out, seen = [], set()
    for i, c in enumerate(claims):
        cid = c["id"] if isinstance(c.get("id"), str) and c["id"] else f"#{i + 1}"
        what = f"claims register {where}, claim {cid}"
        bad = set(c) - _CLAIM_KEYS
        if bad:
            raise UserError(f"{what}: unknown key {sorted(bad)[0]!r} (keys: {', '.join(sorted(_CLAIM_KEYS))})")
        for k, v in c.items():  # text first: an id or a unit that is a list would break what follows
            if k in _TEXT and not isinstance(v, str):
                raise UserError(f"{what}: {k} must be text (got {schema_quote(v)})")
        for k in ("id", "who", "stated", "unit", "hardware", "hardware_class", "protocol", "source", "check"):
            if k not in c:
                raise UserError(f"{what}: missing {k!r}")
        if not isinstance(c["check"], dict):
            raise UserError(f"{what}: check must be a table (check = {{ kind = ... }})")
        if cid in seen:
            raise UserError(f"{what}: the id is used twice")
        seen.add(cid)
        if c["unit"] not in UNITS:
            raise UserError(f"{what}: unit {c['unit']!r} is not one of {', '.join(UNITS)}")
        if c["hardware_class"] not in HARDWARE:
            raise UserError(f"{what}: hardware_class {c['hardware_class']!r} is not one of {', '.join(HARDWARE)}")
        if ("value" in c) == ("value_low" in c or "value_high" in c) or ("value_low" in c) != ("value_high" in c):
            raise UserError(f"{what}: give either value or both value_low and value_high")
        chk = c["check"]
        bad = set(chk) - _CHECK_KEYS
        if bad:
            raise UserError(f"{what}: unknown check key {sorted(bad)[0]!r} (keys: {', '.join(sorted(_CHECK_KEYS))})")
        if chk.get("kind") not in KINDS:
            raise UserError(f"{what}: check.kind must be one of {', '.join(KINDS)}")
        _check_values(what, c, chk)
        out.append(Claim(
            id=cid, who=c["who"], stated=c["stated"], unit=c["unit"], hardware=c["hardware"], hardware_class=c["hardware_class"],
            protocol=c["protocol"], source=c["source"], check=Check(**chk), value=c.get("value"),
            value_low=c.get("value_low"), value_high=c.get("value_high"), notes=tuple(c.get("notes", ())),
        ))
    return out


_NEEDS = {"rate": ("backend", "task"), "ratio": ("numerator", "denominator", "task"), "phase": ("backend", "task", "phase"),
          "arithmetic": ("steps", "rate")}
_TEXT = {"id", "who", "stated", "unit", "hardware", "hardware_class", "protocol", "source", "backend", "task", "numerator",
         "denominator", "phase", "protocol_backend"}


def _check_values(what: str, c: dict, chk: dict) -> None:
    """Types and ranges: numbers positive (and finite), text as text, what each kind needs present."""
    for table, keys in ((c, ("value", "value_low", "value_high")), (chk, ("steps", "rate", "num_envs", "frame_skip"))):
        for k in keys:
            if k in table:
                v = table[k]
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
                    raise UserError(f"{what}: {k} must be a positive number (got {v!r})")
    for k in ("num_envs", "frame_skip"):
        if k in chk and not isinstance(chk[k], int):
            raise UserError(f"{what}: check.{k} must be a whole number (got {chk[k]!r})")
    for table in (c, chk):
        for k, v in table.items():
            if k in _TEXT and not isinstance(v, str):
                raise UserError(f"{what}: {k} must be text (got {v!r})")
    if "notes" in c and not (isinstance(c["notes"], list) and all(isinstance(n, str) for n in c["notes"])):
        raise UserError(f"{what}: notes must be a list of text")
    if "value_low" in c and c["value_low"] > c["value_high"]:
        raise UserError(f"{what}: value_low is above value_high")
    missing = [k for k in _NEEDS[chk["kind"]] if not chk.get(k)]
    if missing:
        article = "an" if chk["kind"][0] in "aeiou" else "a"
        raise UserError(f"{what}: {article} {chk['kind']} check needs {', '.join('check.' + k for k in missing)}")


# --- matching records ------------------------------------------------------------------------------


@dataclass
class Measured:
    value: float
    ci_low: float
    ci_high: float
    record: dict
    path: str = ""

    @property
    def case_key(self) -> str:
        return self.record["case_key"]


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
                                           "machine": machine_label(x.record), "path": x.path}

        c = self.claim
        return {"id": c.id, "who": c.who, "stated": c.stated, "unit": c.unit, "claimed": c.central, "stated_range": list(c.stated_range()),
                "hardware": c.hardware, "protocol": c.protocol, "source": c.source, "status": self.status,
                "measured": m(self.measured), "protocol_run": m(self.protocol_run), "ratio": self.ratio,
                "differences": self.differences, "to_check": self.to_check, "detail": self.detail}


def machine_label(record: dict) -> str:
    m = record["where"]["machine"]
    gpus = m.get("gpus") or []
    gpu = f", GPU {gpus[0].get('name')}" if gpus else ", no GPU"
    return f"{m.get('cpu_model') or 'unknown CPU'} ({m.get('cpu_logical')} logical cores){gpu}"


def device_class(record: dict) -> str:
    """Where a record's simulator ran: "cpu", "gpu" or "tpu" (from what.device: "cpu", "gpu:NAME", "tpu:KIND")."""
    kind = str(record["what"].get("device", "cpu")).split(":", 1)[0].lower()
    return kind if kind in ("gpu", "tpu") else "cpu"


def _split(selector: str) -> tuple[str, str | None]:
    b, _, v = selector.partition(":")
    return b, v or None


def candidates(records: list[tuple[dict, str]], selector: str, task: str) -> list[tuple[dict, str]]:
    backend, variant = _split(selector)
    return [(r, p) for r, p in records
            if r.get("status") == "ok" and r.get("measurement_mode") == "env-step-throughput" and r["case"]["backend"] == backend
            and (variant is None or r["case"]["variant"] == variant) and r["case"]["task"] == task]


def closest(cands: list[tuple[dict, str]], num_envs: int | None) -> tuple[dict, str] | None:
    """From the newest run that has the case (one machine for every claim it can), the record at
    the claim's num_envs, else the nearest on a log scale; with no num_envs stated, the largest
    measured (where a throughput claim is usually made); of equals the fastest (a claim about a
    backend, not one of its variants)."""
    if not cands:
        return None
    newest = max(rp[0].get("run_id", "") for rp in cands)
    mine = [rp for rp in cands if rp[0].get("run_id", "") == newest]

    def key(rp: tuple[dict, str]) -> tuple[float, float]:
        r = rp[0]
        n = r["case"]["num_envs"]
        return (-n if num_envs is None else abs(math.log(n / num_envs)), -_rate(r)[0])

    return min(mine, key=key)


def in_run(cands: list[tuple[dict, str]], run_id: str, num_envs: int) -> tuple[dict, str] | None:
    """The candidate of this run at exactly this num_envs (the fastest variant of equals)."""
    mine = [rp for rp in cands if rp[0].get("run_id") == run_id and rp[0]["case"]["num_envs"] == num_envs]
    return max(mine, key=lambda rp: _rate(rp[0])[0]) if mine else None


def _rate(record: dict) -> tuple[float, float, float]:
    s = record["summary"]["env_steps_per_s"]
    return s["median"], s["ci_low"], s["ci_high"]


def rate_in(record: dict, unit: str, frame_skip: int) -> tuple[float, float, float]:
    """The record's env steps/s in the claim's unit."""
    v, lo, hi = _rate(record)
    if unit == "frames/s":
        f = frame_skip
    elif unit == "physics steps/s":
        f = int(record["what"]["physics"].get("frame_skip") or 1)
    else:
        f = 1
    return v * f, lo * f, hi * f


def _measured(rp: tuple[dict, str], unit: str, frame_skip: int) -> Measured:
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


def _hardware_differences(claim: Claim, record: dict) -> list[str]:
    out = []
    measured = device_class(record)
    if claim.hardware_class != "unstated" and claim.hardware_class != measured:
        out.append(f"hardware class: claimed on {claim.hardware_class.upper()} ({claim.hardware}), measured on {measured.upper()} "
                   f"({machine_label(record)})")
    elif claim.hardware_class == "unstated":
        out.append(f"hardware not stated by the claim; measured on {machine_label(record)}")
    else:
        out.append(f"hardware: claimed on {claim.hardware}; measured on {machine_label(record)}")
    return out


def check_claim(claim: Claim, records: list[tuple[dict, str]]) -> Result:
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
        pick = closest(candidates(records, c.backend, c.task), c.num_envs)
        hw = "a GPU machine" if claim.hardware_class == "gpu" else claim.hardware
        run = _bench_cmd(c.backend, c.task, c.num_envs)
        if pick is None:
            return Result(claim, "not measured", to_check=f"{run} (on {hw})", differences=list(claim.notes))
        m = _measured(pick, claim.unit, c.frame_skip)
        diffs = _hardware_differences(claim, m.record)
        n = m.record["case"]["num_envs"]
        if c.num_envs and n != c.num_envs:
            diffs.append(f"num_envs: claimed at {c.num_envs}, closest measured {n}")
        if claim.unit == "frames/s" and c.frame_skip != 1:
            diffs.append(f"unit: the claim counts frames (env steps x frame_skip {c.frame_skip}); the measured env steps/s are converted")
        diffs += claim.notes
        res = Result(claim, "measured", measured=m, ratio=claim.central / m.value, differences=diffs,
                     to_check=f"{run} on {hw}" if device_class(m.record) != claim.hardware_class != "unstated" else "")
        if c.protocol_backend:  # the claim's protocol, at the same size in the same run: only the protocol differs
            proto = in_run(candidates(records, c.protocol_backend, c.task), m.record["run_id"], n)
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
        pairs = {(rp[0]["run_id"], rp[0]["case"]["num_envs"]) for rp in num} & {(rp[0]["run_id"], rp[0]["case"]["num_envs"]) for rp in den}
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
        detail = f"{c.numerator} {va:,.0f} / {c.denominator} {vb:,.0f} env steps/s at {n} envs ({b[0]['case_key']})"
        return Result(claim, "measured", measured=m, ratio=claim.central / m.value, differences=diffs, detail=detail)
    # phase: the case's own rate over its rate through the phase
    pick = closest([rp for rp in candidates(records, c.backend, c.task)
                    if ((rp[0]["summary"].get("phases") or {}).get(c.phase) or {}).get("vs_step_reset")], c.num_envs)
    if pick is None:
        return Result(claim, "not measured", differences=list(claim.notes),
                      to_check=f"a suite with phases = [\"{c.phase}\"] on {c.backend} {c.task} (the quick suite has one: make bench)")
    ph = pick[0]["summary"]["phases"][c.phase]
    r = ph["vs_step_reset"]  # phase rate / the case's own rate, with its interval
    m = Measured(1 / r["median"], 1 / r["ci_high"], 1 / r["ci_low"], pick[0], pick[1])
    diffs = _hardware_differences(claim, pick[0]) + list(claim.notes)
    return Result(claim, "measured", measured=m, ratio=claim.central / m.value, differences=diffs,
                  detail=f"{c.backend} {c.task} at {pick[0]['case']['num_envs']} envs: through {c.phase} {r['median']:.2f}x its own rate")


def record_path(r: dict) -> str:
    """Where the store keeps a record: <run id>/<case key>.json under its results directory."""
    return f"{r.get('run_id', '?')}/{r['case_key']}.json"


def check_all(records: list[dict], path: Path | None = None) -> list[Result]:
    pairs = [(r, record_path(r)) for r in records]
    return [check_claim(c, pairs) for c in load_register(path)]


def fmt(x: float, unit: str) -> str:
    if unit == "x":
        return f"{x:.2g}x" if x < 10 else f"{x:.0f}x"
    if unit == "s":
        return duration(x)
    return fmt_rate(x)  # rates as every table of gpuenv writes them


def with_unit(x: float, unit: str) -> str:
    return fmt(x, unit) if unit in ("x", "s") else f"{fmt(x, unit)} {unit}"


def measured_line(c: Claim, m: Measured, label: str = "measured") -> str:
    return (f"{label}: {with_unit(m.value, c.unit)} ({fmt(m.ci_low, c.unit)}-{fmt(m.ci_high, c.unit)}, 95% interval), "
            f"{m.case_key} [{m.path}], on {machine_label(m.record)}")


def text_report(results: list[Result], register: Path) -> list[str]:
    """The terminal form: one block per claim."""
    measured = sum(r.status == "measured" for r in results)
    out = [f"{len(results)} claims from {register} ({measured} with a measured counterpart; claimed / measured is the gap)", ""]
    for r in results:
        c = r.claim
        out.append(f"{c.id}: {c.who}: \"{c.stated}\" (claimed {with_unit(c.central, c.unit)}; {c.hardware}; {c.protocol})")
        out.append(f"  source: {c.source}")
        if r.status == "arithmetic":
            out.append(f"  check: {r.detail}")
        elif r.measured is not None:
            out.append("  " + measured_line(c, r.measured))
            if r.detail:
                out.append(f"  from: {r.detail}")
            if r.protocol_run is not None:
                out.append("  " + measured_line(c, r.protocol_run, "with the claim's own protocol"))
            assert r.ratio is not None
            out.append(f"  claimed / measured: {r.ratio:.3g}")
        else:
            out.append("  measured: nothing comparable yet")
        for d in r.differences:
            out.append(f"  why they differ: {d}")
        if r.to_check:
            out.append(f"  {'to check it' if r.status == 'not measured' else 'to check it on its hardware'}: {r.to_check}")
        out.append("")
    return out

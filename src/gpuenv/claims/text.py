"""`gpuenv claims` as text: values in each claim's unit, one block per claim."""

from __future__ import annotations

from pathlib import Path

from gpuenv.claims.check import Measured, Result
from gpuenv.claims.register import Claim
from gpuenv.format import duration, fmt_rate
from gpuenv.measure.fingerprint import identity


def fmt(x: float, unit: str) -> str:
    if unit == "x":
        return f"{x:.2g}x" if x < 10 else f"{x:.0f}x"
    if unit == "s":
        return duration(x)
    return fmt_rate(x)  # rates as every table of gpuenv writes them


def with_unit(x: float, unit: str) -> str:
    return fmt(x, unit) if unit in ("x", "s") else f"{fmt(x, unit)} {unit}"


def measured_line(c: Claim, m: Measured, label: str = "measured") -> str:
    return (f"{label}: {with_unit(m.value, c.unit)} ({fmt(m.ci_low, c.unit)}-{fmt(m.ci_high, c.unit)}, {m.interval}), "
            f"{m.case_key} [{m.path}], on {identity(m.record)}")


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

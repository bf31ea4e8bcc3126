"""Terminal tables of throughput records: per task, each backend and num_envs, with the speedup over
the CPU baseline (SB3 SubprocVecEnv) at the same num_envs."""

from __future__ import annotations

from collections import defaultdict

from rich.table import Table

from gpuenv.measure import stats
from gpuenv.report import ttr
from gpuenv.results.schema import THROUGHPUT
from gpuenv.tasks import task_rank as _task_rank

BASELINE = ("gymnasium", "subproc")


def _groups(record: dict) -> list[list[float]]:
    return [p["env_steps_per_s"] for p in record["processes"] if p.get("env_steps_per_s")]


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:,.0f}"


def speedup(record: dict, baseline: dict | None) -> stats.Summary | None:
    if baseline is None or baseline["status"] != "ok" or record["status"] != "ok":
        return None
    return stats.ratio(_groups(record), _groups(baseline))


def tables(records: list[dict]) -> list[Table]:
    """Throughput tables, then time-to-reward tables (each kind from its own records)."""
    return _throughput_tables([r for r in records if r["measurement_mode"] == THROUGHPUT]) + ttr.tables(records)


def _throughput_tables(records: list[dict]) -> list[Table]:
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(records, key=lambda r: _task_rank(r["case"]["task"])):
        by_task[r["case"]["task"]].append(r)
    out = []
    for task, recs in by_task.items():
        # The baseline comes from the same run (same machine, same moment), never from another.
        base = {
            (r["run_id"], r["case"]["num_envs"]): r
            for r in recs
            if (r["case"]["backend"], r["case"]["variant"]) == BASELINE and r["status"] == "ok"
        }
        t = Table(title=f"{task}: env steps/s, median and 95% interval", title_justify="left")
        for col, just in [
            ("backend", "left"),
            ("envs", "right"),
            ("steps/s", "right"),
            ("95% interval", "right"),
            ("vs Subproc", "right"),
            ("compile s", "right"),
            ("bottleneck", "left"),
        ]:
            t.add_column(col, justify=just)
        for r in sorted(recs, key=lambda r: (r["case"]["num_envs"], r["case"]["backend"], r["case"]["variant"])):
            c = r["case"]
            name = f"{c['backend']}:{c['variant']}"
            if r["status"] != "ok":
                t.add_row(name, str(c["num_envs"]), f"[red]{r['status']}[/]", r["failure"]["reason"][:60], "", "", "")
                continue
            s = r["summary"]["env_steps_per_s"]
            sp = speedup(r, base.get((r["run_id"], c["num_envs"])))
            sp_text = "" if sp is None else f"{sp.median:.2f}x [{sp.ci_low:.2f}-{sp.ci_high:.2f}]"
            half = 100 * (s["ci_high"] - s["ci_low"]) / 2 / s["median"]
            interval = f"{fmt_rate(s['ci_low'])}-{fmt_rate(s['ci_high'])} (+-{half:.0f}%)"
            if half > 100 * stats.WIDE_INTERVAL:
                interval = f"[yellow]{interval}[/]"
            compile_s = r["summary"].get("compile_s_cold") or [r["summary"].get("compile_s_median", 0.0)]
            t.add_row(
                name,
                str(c["num_envs"]),
                fmt_rate(s["median"]),
                interval,
                sp_text,
                f"{max(compile_s):.1f}",
                r["summary"].get("bottleneck", ""),
            )
        out.append(t)
    return out


def footnotes(records: list[dict]) -> list[str]:
    """Warnings worth reading: wide intervals as one line, anything else one line per case."""
    ok = [r for r in records if r["status"] == "ok" and r["measurement_mode"] == THROUGHPUT]
    wide = [r for r in ok if r["summary"]["env_steps_per_s"]["rel_half_width"] > stats.WIDE_INTERVAL]
    lines = []
    if wide:
        lines.append(
            f"{len(wide)} of {len(ok)} cases have a 95% interval wider than +-{100 * stats.WIDE_INTERVAL:.0f}% "
            "(yellow above): the machine is noisy; raise min_time_s / values, or use a quieter machine"
        )
    for r in ok:
        for w in r["summary"].get("warnings", []):
            if not w.startswith("wide interval"):
                lines.append(f"{r['case_key']}: {w}")
    return lines + ttr.footnotes(records)


def markdown(records: list[dict]) -> str:
    """Compact markdown: one row per task x backend, one column per num_envs, for READMEs (then the
    time-to-reward table, when there are such records)."""
    parts = []
    if any(r["measurement_mode"] == THROUGHPUT for r in records):
        parts.append(_throughput_markdown([r for r in records if r["measurement_mode"] == THROUGHPUT]))
    if ttr.ttr_records(records):
        parts.append(ttr.markdown(records))
    return "\n\n".join(parts)


def _throughput_markdown(records: list[dict]) -> str:
    sizes = sorted({r["case"]["num_envs"] for r in records})
    by_row: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    for r in records:
        c = r["case"]
        cell = r["status"]
        if r["status"] == "ok":
            s = r["summary"]["env_steps_per_s"]
            cell = f"{fmt_rate(s['median'])} ({fmt_rate(s['ci_low'])}-{fmt_rate(s['ci_high'])})"
        by_row[(c["task"], f"{c['backend']}:{c['variant']}")][c["num_envs"]] = cell
    head = "| task | backend | " + " | ".join(f"{n} envs" for n in sizes) + " |"
    lines = [head, "|" + "---|" * (len(sizes) + 2)]
    for task, backend in sorted(by_row, key=lambda k: (_task_rank(k[0]), k[1])):
        cells = by_row[(task, backend)]
        lines.append(f"| {task} | {backend} | " + " | ".join(cells.get(n, "") for n in sizes) + " |")
    return "\n".join(lines)

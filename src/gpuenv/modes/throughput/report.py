"""Throughput tables (terminal, markdown) and report-site sections: per task, each backend and
num_envs, with the speedup over the baseline backend (its declaration says which) at the same num_envs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from rich.table import Table

from gpuenv.escape import markup, mathtext, pyplot
from gpuenv.format import attr, colour, curves, duration, fmt_rate, html_table, slug
from gpuenv.measure import stats
from gpuenv.measure.monitor import short_bottleneck
from gpuenv.modes.throughput.record import PhaseSummary, ThroughputRecord
from gpuenv.registry import default_registry
from gpuenv.tasks import task_rank as _task_rank

Records = list[ThroughputRecord]


def speedup(record: ThroughputRecord, baseline: ThroughputRecord | None) -> stats.Summary | None:
    if baseline is None or baseline.status != "ok" or record.status != "ok":
        return None
    return stats.ratio(record.rate_groups(), baseline.rate_groups())


def physics_cell(r: ThroughputRecord) -> str:
    """Physics steps/s and the steps per env step behind it ("-": none reported)."""
    p = r.physics_steps_per_s()
    return "-" if p is None else f"{fmt_rate(p)} (x{r.what.physics.physics_steps_per_env_step})"


def tables(records: Records, details: bool = False) -> list[Table]:
    """Per task; the bottleneck column says its short label (`round trip`, `simulator CPU` ...) unless
    details asks for the whole line with its core counts."""
    baseline = default_registry().baseline()
    vs = f"vs {baseline[1]}" if baseline else "vs baseline"
    by_task: dict[str, Records] = defaultdict(list)
    for r in sorted(records, key=lambda r: _task_rank(r.case.task)):
        by_task[r.case.task].append(r)
    out = []
    for task, recs in by_task.items():
        # The baseline comes from the same run (same machine, same moment), never from another.
        base = {(r.run_id, r.case.num_envs): r for r in recs if (r.case.backend, r.case.variant) == baseline and r.status == "ok"}
        # physics steps/s where a row has them (a task without physics, or records from before backends
        # reported them: no column); under the table the MuJoCo solver settings each row ran
        physics = any(r.physics_steps_per_s() for r in recs)
        title = f"{task}: env steps/s, median and 95% interval" + ("; physics/s: physics steps/s (x per env step)" if physics else "")
        t = Table(title=title, title_justify="left", caption="\n".join(solver_notes(recs)) or None, caption_justify="left")
        # the backend label whole on any terminal (the other columns wrap first): tests and readers grep it
        add_backend_column(t, recs)
        for col, just in [
            ("envs", "right"),
            ("steps/s", "right"),
            ("95% interval", "right"),
            *([("physics/s", "right")] if physics else []),
            (vs, "right"),
            ("compile s", "right"),
            ("host MiB (/env)", "right"),
        ]:
            t.add_column(col, justify=just)  # type: ignore[arg-type]
        t.add_column("bottleneck", justify="left", no_wrap=details)  # --details: the whole line, unbroken
        for r in sorted(recs, key=lambda r: (r.case.num_envs, r.case.backend, r.case.variant)):
            c = r.case
            if r.failure is not None:
                t.add_row(c.label, str(c.num_envs), f"[red]{r.failure.kind.value}[/]", markup(r.failure.reason[:60]), *[""] * (len(t.columns) - 4))
                continue
            sm = r.ok_summary
            s = sm.env_steps_per_s
            sp = speedup(r, base.get((r.run_id, c.num_envs)))
            sp_text = "" if sp is None else f"{sp.median:.2f}x [{sp.ci_low:.2f}-{sp.ci_high:.2f}]"
            half = 100 * (s.ci_high - s.ci_low) / 2 / s.median
            interval = f"{fmt_rate(s.ci_low)}-{fmt_rate(s.ci_high)} (+-{half:.0f}%)"
            if half > 100 * stats.WIDE_INTERVAL:
                interval = f"[yellow]{interval}[/]"
            compile_s = sm.compile_s_cold or [sm.compile_s_median]
            t.add_row(
                c.label,
                str(c.num_envs),
                fmt_rate(s.median),
                interval,
                *([physics_cell(r)] if physics else []),
                sp_text,
                f"{max(compile_s):.1f}",
                sm.host_memory_cell(),
                markup((sm.bottleneck if details else short_bottleneck(sm.bottleneck)) or ""),
            )
        out.append(t)
    return out + phase_tables(records)


def _with_phases(records: Records) -> dict[str, Records]:
    by_task: dict[str, Records] = defaultdict(list)
    for r in sorted(records, key=lambda r: (_task_rank(r.case.task), r.case.label, r.case.num_envs)):
        if r.summary is not None and r.summary.phases:
            by_task[r.case.task].append(r)
    return by_task


def phase_cells(r: ThroughputRecord) -> list[str]:
    """step, step+reset, vecenv, +inference, +update, reset cost: each rate with its share of step+reset."""
    from gpuenv.modes.throughput.phases import PHASES

    phases = r.ok_summary.phases
    cells = []
    for name in PHASES:
        if name == "step+reset":
            cells.append(f"{fmt_rate(r.ok_summary.env_steps_per_s.median)} (1x)")
            continue
        p = phases.get(name)
        if p is None:
            cells.append("")
        elif p.env_steps_per_s and p.vs_step_reset:
            cells.append(f"{fmt_rate(p.env_steps_per_s.median)} ({p.vs_step_reset.median:.2f}x)")
        else:
            cells.append(phase_word(p))
    step = phases.get("step")
    if step is None or step.reset_cost_us is None:
        cells.append("")
    else:
        cells.append("within noise" if step.reset_cost_within_noise else f"{step.reset_cost_us:,.1f}")
    return cells


def phase_word(p: PhaseSummary) -> str:
    """A phase without a number, in one or two words: n/a, not finished (in N s), failed."""
    if p.absent:
        return "n/a"
    if p.not_finished_within_s:
        return f"not finished in {p.not_finished_within_s:g} s"
    return "failed"


def phase_why(p: PhaseSummary) -> str | None:
    """Why a phase has no number (or fewer processes measured it), for the notes under a table."""
    if p.not_finished_within_s:
        return (f"the case's timeout_s ({p.not_finished_within_s:g} s) stopped the worker while this phase ran: "
                "raise timeout_s or make the phase smaller (phase_ppo)")
    return p.absent or p.failed


def case_phase_rows(r: ThroughputRecord) -> list[list[str]]:
    """A case page's phase table: phase, rate (or why none), ratio to step+reset, what ran."""
    phases = r.summary.phases if r.summary is not None else {}
    return [[name, fmt_rate(p.env_steps_per_s.median) if p.env_steps_per_s else phase_word(p),
             f"{p.vs_step_reset.median:.2f} ({p.vs_step_reset.ci_low:.2f}-{p.vs_step_reset.ci_high:.2f})"
             if p.vs_step_reset else "-", p.how or phase_why(p) or ""]
            for name, p in phases.items()]


def add_backend_column(t: Table, recs: Records) -> None:
    """The backend:variant column, never broken or cut to "name:genera…": the name is what a row is."""
    t.add_column("backend", justify="left", no_wrap=True, min_width=max((len(r.case.label) for r in recs), default=7))


def phase_tables(records: Records) -> list[Table]:
    """Per task: the rate lost between stepping alone and training (gpuenv.modes.throughput.phases)."""
    from gpuenv.modes.throughput.phases import HEADERS, LEGEND, PHASES

    out = []
    for task, recs in _with_phases(records).items():
        t = Table(title=f"{task}: where the rate goes, env steps/s (x step+reset), median", title_justify="left",
                  caption=LEGEND, caption_justify="left")
        add_backend_column(t, recs)
        cols = [HEADERS[p] for p in PHASES] + ["reset us/env"]
        rows = [phase_cells(r) for r in recs]
        kept = [i for i in range(len(cols)) if any(row[i] for row in rows)]  # a phase no row measured: no column
        for col in ["envs", *(cols[i] for i in kept)]:
            t.add_column(col, justify="right")
        for r, row in zip(recs, rows, strict=True):
            t.add_row(r.case.label, str(r.case.num_envs), *(row[i] for i in kept))
        out.append(t)
    return out


def phase_notes(records: Records) -> list[str]:
    """Why a phase has no number (n/a or failed in the table), one line per distinct reason."""
    lines: list[str] = []
    for recs in _with_phases(records).values():
        for r in recs:
            for name, p in r.ok_summary.phases.items():
                why = phase_why(p)
                if why:
                    line = f"{r.case.label} / {r.case.task} phase {name}: {phase_word(p)}: {why}"
                    if line not in lines:
                        lines.append(line)
    return lines


def footnotes(records: Records) -> list[str]:
    """Warnings worth reading: wide intervals as one line, anything else one line per case."""
    ok = [r for r in records if r.status == "ok"]
    wide = [r for r in ok if r.ok_summary.env_steps_per_s.rel_half_width > stats.WIDE_INTERVAL]
    lines = []
    if wide:
        lines.append(
            f"{len(wide)} of {len(ok)} cases have a 95% interval wider than +-{100 * stats.WIDE_INTERVAL:.0f}% "
            "(yellow above): the machine is noisy; raise min_time_s / values, or use a quieter machine"
        )
    for r in ok:
        for w in r.ok_summary.warnings:
            if not w.startswith("wide interval"):
                lines.append(f"{r.case_key}: {w}")
    return lines + fits(records) + phase_notes(records)


def solver_notes(records: Records) -> list[str]:
    """Which solver settings each row ran (MuJoCo-style: MJX, MuJoCo, Genesis, Newton), grouped: one line per settings set with its rows
    (MJX's speed under vmap follows its iterations; a row is only comparable with rows of its set)."""
    groups: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in records:
        d = r.what.details
        if r.status != "ok" or d.get("ls_iterations") is None:
            continue
        named = f"{d['solver_settings']}: " if d.get("solver_settings") else ""
        parts = [str(d.get("solver")), f"{d.get('iterations')} iterations", f"{d.get('ls_iterations')} line-search"]
        if d.get("eulerdamp") is not None:  # MuJoCo's flag; Genesis has none
            parts.append("Euler damping on" if d["eulerdamp"] else "Euler damping off")
        parts += [str(d[k]) for k in ("integrator", "precision") if d.get(k) is not None]
        key = named + ", ".join(parts)
        groups[key][r.case.task].add(r.case.label)
    return [f"solver settings, {k}: " + "; ".join(f"{task} {', '.join(sorted(labels))}" for task, labels in sorted(by_task.items()))
            for k, by_task in sorted(groups.items())]


def fits(records: Records) -> list[str]:
    """Per task and backend:variant with a case that ran out of memory: the largest num_envs that fit."""
    groups: dict[tuple[str, str], Records] = defaultdict(list)
    for r in records:
        groups[(r.case.task, r.case.label)].append(r)
    out = []
    for (task, name), recs in sorted(groups.items()):
        oom = sorted(r.case.num_envs for r in recs if r.status == "failed" and r.failure and r.failure.kind == "oom")
        if not oom:
            continue
        fit = [r.case.num_envs for r in recs if r.status == "ok" and r.case.num_envs < oom[0]]
        limit = max(r.settings.memory_limit_mib for r in recs)
        where = f"under the memory limit of {limit} MiB" if limit else "in this machine's memory"
        out.append(f"{name} / {task}: the largest num_envs that fit {where}: {max(fit) if fit else 'none measured'} "
                   f"(out of memory at {oom[0]})")
    return out


def markdown(records: Records) -> str:
    """Compact markdown: one row per task x backend, one column per num_envs, for READMEs."""
    sizes = sorted({r.case.num_envs for r in records})
    by_row: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    for r in records:
        c = r.case
        cell: str = r.status
        if r.status == "ok":
            s = r.ok_summary.env_steps_per_s
            cell = f"{fmt_rate(s.median)} ({fmt_rate(s.ci_low)}-{fmt_rate(s.ci_high)})"
        by_row[(c.task, c.label)][c.num_envs] = cell
    head = "| task | backend | " + " | ".join(f"{n} envs" for n in sizes) + " |"
    lines = [head, "|" + "---|" * (len(sizes) + 2)]
    for task, backend in sorted(by_row, key=lambda k: (_task_rank(k[0]), k[1])):
        cells = by_row[(task, backend)]
        lines.append(f"| {task} | {backend} | " + " | ".join(cells.get(n, "") for n in sizes) + " |")
    notes = solver_notes(records)
    lines += ["", *(f"- {n}" for n in notes)] if notes else []
    return "\n".join(lines) + phases_markdown(records)


def _phase_head() -> list[str]:
    from gpuenv.modes.throughput.phases import HEADERS, PHASES

    return ["task", "backend", "envs", *(HEADERS[p] for p in PHASES), "reset us/env"]


def _phase_rows(records: Records) -> list[list]:
    return [[task, r.case.label, r.case.num_envs, *phase_cells(r)] for task, recs in _with_phases(records).items() for r in recs]


def phases_markdown(records: Records) -> str:
    rows = _phase_rows(records)
    if not rows:
        return ""
    head = _phase_head()
    lines = ["", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --- report site -----------------------------------------------------------------------------------

task_rank = _task_rank


def _by_task(records: Records) -> dict[str, Records]:
    out: dict[str, Records] = defaultdict(list)
    for r in sorted(records, key=lambda r: (task_rank(r.case.task), r.case.label, r.case.num_envs)):
        out[r.case.task].append(r)
    return out


def scaling_plot(task: str, recs: Records, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, label, nth, rs in curves(recs):
        x = [r.case.num_envs for r in rs]
        s = [r.ok_summary.env_steps_per_s for r in rs]
        ax.plot(x, [v.median for v in s], marker="o", linestyle=("-", ":", "--", "-.")[nth % 4], label=mathtext(label), color=colour(name))
        ax.fill_between(x, [v.ci_low for v in s], [v.ci_high for v in s], alpha=0.2, color=colour(name))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("num_envs")
    ax.set_ylabel("env steps/s (median, 95% band)")
    ax.set_title(mathtext(f"{task}: throughput scaling"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def comparison_plot(recs: Records, num_envs: int, path: Path) -> bool:
    rows = [r for r in recs if r.case.num_envs == num_envs]
    if not rows:
        return False
    plt = pyplot()
    rows.sort(key=lambda r: (task_rank(r.case.task), r.case.label))
    names = [f"{r.case.task} / {r.case.label}" for r in rows]
    rates = [r.ok_summary.env_steps_per_s for r in rows]
    med = [e.median for e in rates]
    err = [[e.median - e.ci_low for e in rates], [e.ci_high - e.median for e in rates]]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.5))
    # a dot per case with its interval, not a bar: the rates span orders of magnitude, and a bar's
    # length on a log axis means nothing; each backend keeps its colour of every other figure
    ys = range(len(rows))
    for y, r, m, lo, hi in zip(ys, rows, med, *err):
        ax.errorbar([m], [y], xerr=[[lo], [hi]], fmt="o", color=colour(r.case.label), capsize=3)
    ax.set_yticks(list(ys), [mathtext(n) for n in names])
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel(f"env steps/s at {num_envs} envs (median, 95% interval)")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def decision_rows(records: Records) -> list[tuple[str, str, int, float, float, float]]:
    """(task, backend, best num_envs, steps/s, seconds to 10M, seconds to 1B) per task x backend."""
    best: dict[tuple[str, str], ThroughputRecord] = {}
    for r in records:
        k = (r.case.task, r.case.label)
        if k not in best or r.ok_summary.env_steps_per_s.median > best[k].ok_summary.env_steps_per_s.median:
            best[k] = r
    rows = []
    for (task, name), r in sorted(best.items(), key=lambda kv: (task_rank(kv[0][0]), kv[0][1])):
        rate = r.ok_summary.env_steps_per_s.median
        rows.append((task, name, r.case.num_envs, rate, 1e7 / rate, 1e9 / rate))
    return rows


def site_sections(tp: Records, out: Path, num_envs: int | None = None) -> Iterator[str]:
    if tp:
        yield ("<h2 id='scaling'>Throughput scaling</h2>")
        for task, recs in _by_task(tp).items():
            name = f"scaling-{slug(task)}.png"
            scaling_plot(task, recs, out / name)
            yield (f"<h3>{attr(task)}</h3><img class='plot' src='{attr(name)}' alt='{attr(task)} scaling'>")
        sizes = sorted({r.case.num_envs for r in tp}, key=lambda n: (-sum(r.case.num_envs == n for r in tp), n))
        n = num_envs or sizes[0]
        yield (f"<h2 id='comparison'>Backends at {n} envs</h2>")
        if comparison_plot(tp, n, out / "comparison.png"):
            yield ("<img class='plot' src='comparison.png' alt='backend comparison'>")
        yield ("<h2 id='decision'>Decision table: wall-clock to 10M / 1B env steps on this machine</h2>"
                     "<p class='note'>At each backend's fastest measured num_envs, random actions, no learning: a floor for what training costs.</p>")
        yield (html_table(["task", "backend", "best num_envs", "env steps/s", "10M steps", "1B steps"],
                            [[t, b, n_, fmt_rate(r), duration(a), duration(z)] for t, b, n_, r, a, z in decision_rows(tp)], "decision"))
        rows = []
        for r in sorted(tp, key=lambda r: (task_rank(r.case.task), r.case.label, r.case.num_envs)):
            s = r.ok_summary.env_steps_per_s
            rows.append([r.case.task, r.case.label, r.case.num_envs, fmt_rate(s.median), f"{fmt_rate(s.ci_low)}-{fmt_rate(s.ci_high)}",
                         physics_cell(r), r.run_id])
        yield ("<h2 id='throughput-table'>All throughput cases</h2>"
               + html_table(["task", "backend", "envs", "env steps/s", "95% interval", "physics steps/s (x per env step)", "run"], rows, "throughput"))
        phase_rows = _phase_rows(tp)
        if phase_rows:
            from gpuenv.modes.throughput.phases import LEGEND

            yield ("<h2 id='phases'>Where the rate goes: step, step+reset, VecEnv, +inference, +update</h2>"
                   f"<p class='note'>{attr(LEGEND)}</p>" + html_table(_phase_head(), phase_rows, "phases"))


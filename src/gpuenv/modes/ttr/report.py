"""Terminal tables of time-to-reward records: per task, each backend x trainer, and the probability
that one reaches the threshold sooner than another."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from statistics import median

from rich.table import Table

from gpuenv.escape import markup, mathtext, pyplot
from gpuenv.format import attr, fmt_s, html_table, slug
from gpuenv.measure import stats
from gpuenv.modes.ttr.record import TtrRecord
from gpuenv.results.models import IqmInterval
from gpuenv.tasks import task_rank as _task_rank

Records = list[TtrRecord]


def label(r: TtrRecord) -> str:
    return f"{r.case.label} / {r.case.trainer}"


def fmt_steps(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else (f"{x / 1e3:.0f}k" if x >= 1e4 else f"{x:,.0f}")


def _agg(a: IqmInterval, fmt) -> str:
    return f"{fmt(a.iqm)} [{fmt(a.ci_low)}-{fmt(a.ci_high)}]"


def runs_of(r: TtrRecord) -> list[tuple[float, bool]]:
    return [(x.time_to_threshold_s or 0.0, x.status == "reached") for x in r.runs if x.status != "failed"]


def iqm_ratio(new: TtrRecord, old: TtrRecord, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """NEW/OLD of the IQM wall-clock time to threshold, percentile bootstrap over seeds (both sides)."""
    import numpy as np

    a = np.array([t for t, _ in runs_of(new)], dtype=float)
    b = np.array([t for t, _ in runs_of(old)], dtype=float)
    rng = np.random.default_rng(seed)
    boots = np.array(
        [stats.iqm(a[rng.integers(0, a.size, a.size)]) / stats.iqm(b[rng.integers(0, b.size, b.size)]) for _ in range(n_boot)]
    )
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return stats.iqm(a) / stats.iqm(b), float(lo), float(hi)


def by_task(records: Records) -> dict[str, Records]:
    out: dict[str, Records] = defaultdict(list)
    for r in sorted(records, key=lambda r: (_task_rank(r.case.task), label(r))):
        out[r.case.task].append(r)
    return out


def tables(records: Records, details: bool = False) -> list[Table]:  # details: no long cells here
    out = []
    for task, recs in by_task(records).items():
        thresholds = sorted({r.case.threshold for r in recs})
        t = Table(
            title=f"{task}: time to eval return >= {', '.join(f'{x:g}' for x in thresholds)}; IQM over seeds [95% interval]",
            title_justify="left",
        )
        for col, just in [
            ("backend / trainer", "left"),
            ("envs", "right"),
            ("reached", "right"),
            ("wall s (all)", "right"),
            ("train s (no startup/compile/eval)", "right"),
            ("env steps", "right"),
            ("startup s", "right"),
            ("compile s", "right"),
            ("host MiB (/env)", "right"),
        ]:
            t.add_column(col, justify=just)  # type: ignore[arg-type]
        for r in recs:
            c = r.case
            if r.failure is not None:
                t.add_row(label(r), str(c.num_envs), f"[red]{r.status}[/]", markup(r.failure.reason[:70]), "", "", "", "", "")
                continue
            s = r.ok_summary
            reached = f"{s.reached}/{s.seeds}"
            reached = f"[green]{reached}[/]" if s.passed else f"[red]{reached}[/]"
            t.add_row(
                label(r),
                str(c.num_envs),
                reached,
                _agg(s.time_to_threshold_s, fmt_s),
                _agg(s.train_time_to_threshold_s, fmt_s),
                _agg(s.env_steps_to_threshold, fmt_steps),
                fmt_s(s.startup_s_median),
                fmt_s(s.compile_s_median),
                s.host_memory_cell(),
            )
        out.append(t)
        pairs = pairwise(recs)
        if pairs:
            p = Table(title=f"{task}: P(A reaches the threshold sooner than B), wall-clock, [95% interval]", title_justify="left")
            for col in ("A", "B", "P(A sooner)"):
                p.add_column(col)
            for a, b, (prob, lo, hi) in pairs:
                p.add_row(a, b, f"{prob:.2f} [{lo:.2f}-{hi:.2f}]")
            out.append(p)
        faster = speedups(recs)
        if faster:
            out.append(speedup_table(task, faster))
    return out


@dataclass(frozen=True)
class Speedup:
    """One definition trained on two backends (the same trainer, hyperparameters, num_envs, threshold and
    budget): the faster over the slower, by training fps (env steps / training seconds, startup, compile
    and evaluation apart) and by wall-clock to the threshold."""

    fast: TtrRecord
    slow: TtrRecord

    @staticmethod
    def sb3_fps(r: TtrRecord) -> list[float]:
        """SB3's own time/fps at each run's last log (evaluation time included), where the run kept it."""
        return sorted(float(v) for x in r.runs if x.status != "failed" and (v := (x.model_extra or {}).get("sb3_time_fps")))

    def fps_ratio(self) -> tuple[float, float, float]:
        """Median over median, with the interval of every seed pairing (lowest over highest .. highest over lowest)."""
        a, b = self.fast.training_rates(), self.slow.training_rates()
        return median(a) / median(b), a[0] / b[-1], a[-1] / b[0]

    def wall_ratio(self) -> tuple[float, float, float]:
        """IQM wall-clock to the threshold, the slower's over the faster's, 95% bootstrap over seeds (censored
        runs count at the time they spent: a lower bound on the slower side's)."""
        return iqm_ratio(self.slow, self.fast)


def speedups(recs: Records) -> list[Speedup]:
    """Every pair of one task's records that trained one definition on two backends."""
    import json

    def definition(r: TtrRecord) -> tuple:
        c = r.case
        return (c.task, c.trainer, c.num_envs, c.threshold, c.max_env_steps, json.dumps(c.hyperparams, sort_keys=True))

    ok = [r for r in recs if r.status == "ok" and r.training_rates()]
    out = []
    for a, b in combinations(ok, 2):
        if definition(a) == definition(b) and a.case.label != b.case.label:
            fast, slow = (a, b) if median(a.training_rates()) >= median(b.training_rates()) else (b, a)
            out.append(Speedup(fast, slow))
    return out


def _seed_walls(r: TtrRecord) -> str:
    return ", ".join(f"{x.time_to_threshold_s:.0f}" + ("" if x.status == "reached" else "+") for x in r.runs
                     if x.status != "failed" and x.time_to_threshold_s is not None)


def speedup_table(task: str, pairs: list[Speedup]) -> Table:
    t = Table(title=f"{task}: speedup, one definition on two backends (training fps median, ratio \\[all seed pairings]; "
                    "wall-clock to the threshold per seed, + censored, ratio of IQMs \\[95% bootstrap])", title_justify="left")
    for col, just in [("faster / slower", "left"), ("envs", "right"), ("training fps", "right"), ("SB3 time/fps", "right"),
                      ("fps ratio", "right"), ("wall s to threshold, per seed", "left"), ("wall ratio", "right")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for p in pairs:
        f, lo, hi = p.fps_ratio()
        w, wlo, whi = p.wall_ratio()
        sb3 = [Speedup.sb3_fps(p.fast), Speedup.sb3_fps(p.slow)]
        t.add_row(f"{label(p.fast)} / {label(p.slow)}", str(p.fast.case.num_envs),
                  f"{median(p.fast.training_rates()):,.0f} / {median(p.slow.training_rates()):,.0f}",
                  f"{median(sb3[0]):,.0f} / {median(sb3[1]):,.0f}" if all(sb3) else "-",
                  f"{f:.2f}x [{lo:.2f}-{hi:.2f}]", f"{_seed_walls(p.fast)} | {_seed_walls(p.slow)}", f"{w:.2f}x [{wlo:.2f}-{whi:.2f}]")
    return t


def pairwise(recs: Records) -> list[tuple[str, str, tuple[float, float, float]]]:
    ok = [r for r in recs if r.status == "ok" and runs_of(r)]
    return [
        (label(a), label(b), stats.prob_faster(runs_of(a), runs_of(b)))
        for a, b in combinations(ok, 2)
        if a.case.threshold == b.case.threshold  # the same target, or the question is moot
    ]


def footnotes(records: Records) -> list[str]:
    lines = []
    for r in records:
        if r.status != "ok":
            continue
        s = r.ok_summary
        if not s.passed:
            lines.append(f"{r.case_key}: only {s.reached} of {s.seeds} seeds reached the threshold (needs {s.pass_min_seeds})")
        for w in s.warnings:
            if not w.startswith("only") or "seeds" not in w:
                lines.append(f"{r.case_key}: {w}")
        for x in r.runs:
            if x.failure is not None:
                lines.append(f"{r.case_key} seed {x.seed}: failed: {x.failure.reason}")
    return lines


def markdown(records: Records) -> str:
    lines = [
        "| task | backend / trainer | envs | reached | wall s to threshold | train s (no startup/compile/eval) | env steps |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, recs in by_task(records).items():
        for r in recs:
            if r.summary is None:
                lines.append(f"| {task} | {label(r)} | {r.case.num_envs} | {r.status} | | | |")
                continue
            s = r.summary
            lines.append(
                f"| {task} (>= {r.case.threshold:g}) | {label(r)} | {r.case.num_envs} | {s.reached}/{s.seeds} | "
                f"{_agg(s.time_to_threshold_s, fmt_s)} | {_agg(s.train_time_to_threshold_s, fmt_s)} | "
                f"{_agg(s.env_steps_to_threshold, fmt_steps)} |"
            )
    return "\n".join(lines)


# --- report site -----------------------------------------------------------------------------------


def ttr_plot(task: str, recs: Records, path: Path) -> None:
    plt = pyplot()
    names = [label(r) for r in recs]
    t = [r.ok_summary.time_to_threshold_s for r in recs]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(recs) + 1.5))
    ax.barh([mathtext(n) for n in names], [v.iqm for v in t], xerr=[[v.iqm - v.ci_low for v in t], [v.ci_high - v.iqm for v in t]], color="tab:green", alpha=0.8)
    ax.invert_yaxis()
    ax.set_xlabel(f"wall-clock s to eval return >= {recs[0].case.threshold:g} (IQM over seeds, 95% interval)")
    ax.set_title(mathtext(f"{task}: PPO time-to-reward"))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def site_sections(ttr: Records, out: Path, num_envs: int | None = None) -> Iterator[str]:  # num_envs: each case sets its own
    if ttr:
        yield ("<h2 id='ttr'>PPO time-to-reward</h2>")
        by_task: dict[str, Records] = defaultdict(list)
        for r in ttr:
            if r.status == "ok":
                by_task[r.case.task].append(r)
        for task, recs in sorted(by_task.items(), key=lambda kv: _task_rank(kv[0])):
            name = f"ttr-{slug(task)}.png"
            ttr_plot(task, recs, out / name)
            yield (f"<h3>{attr(task)}</h3><img class='plot' src='{attr(name)}' alt='{attr(task)} time to reward'>")
        rows = [[r.case.task, label(r), f"{s.reached}/{s.seeds}", f"{s.time_to_threshold_s.iqm:.1f}", f"{s.env_steps_to_threshold.iqm:.0f}"]
                for r in ttr if (s := r.summary) is not None]
        yield (html_table(["task", "backend / trainer", "reached", "wall s (IQM)", "env steps (IQM)"], rows, "ttr"))


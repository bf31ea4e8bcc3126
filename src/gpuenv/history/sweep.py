"""`gpuenv sweep brax==0.12.1,0.13.0,0.14.2`: the same suite under several library versions.

Each version set gets its own virtual environment (gpuenv.envs, the same code that builds a backend's
own environment), made with uv from an explicit lock (uv pip compile of gpuenv's backend extra plus
the pins), cached by the lock's hash and reused while the lock is the same. Each set runs the suite in its own
process; its records carry the exact versions (where.packages) and a `tags.version_set`. A version
that cannot resolve or install is reported and the other versions still run.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuenv import envs
from gpuenv.history.versionsets import VersionSet, tags_of
from gpuenv.results.schema import TAGS_ENV, Record

ROOT = envs.ROOT


def run(vs: VersionSet, sweep_id: str, bench_args: list[str], out: Path) -> VersionSet:
    """The suite in the version set's environment; records land in out/<sweep id>/<label>/<run id>/."""
    vs.run_dir = out / sweep_id / vs.label.replace("==", "-")
    tags = tags_of(vs, sweep_id)
    assert vs.env_dir is not None and vs.run_dir is not None  # prepare() succeeded
    r = subprocess.run(
        [str(vs.env_dir / "bin" / "python"), "-m", "gpuenv", "bench", *bench_args, "--out", str(vs.run_dir)],
        env={**os.environ, TAGS_ENV: json.dumps(tags)},
        cwd=ROOT,
    )
    # 0: all cases ok; 1: some case failed (its record says why); anything else: the bench did not run.
    if r.returncode in (0, 1):
        vs.status = "ran" if r.returncode == 0 else "ran (some cases failed)"
    else:
        vs.status, vs.reason = "failed", f"gpuenv bench exited {r.returncode} in this environment"
    return vs


def side_name(vs: VersionSet) -> str:
    """The version set's folder (and record tag `side`) in a sweep: brax-0.13.0."""
    return vs.label.replace("==", "-")


def run_interleaved(ready: list[VersionSet], sweep_id: str, bp: Any, blocks: int, out: Path,
                    on_event: Any = lambda e: None) -> None:
    """The suite under every ready version set, interleaved case by case (gpuenv.history.ab.run: in
    each block one worker process per set, the order rotating), records in
    OUT/<sweep id>/<set>/<run id>/ tagged with the version set and the blocks."""
    from gpuenv.history import ab
    from gpuenv.measure.system import git_sha

    sides = [ab.Side(vs.label, "version set", vs.label, git_sha(), version_set=vs) for vs in ready]
    for vs in ready:
        vs.run_dir = out / sweep_id / side_name(vs)
    try:
        ab.run(bp.mode, bp.plan, sides, blocks=blocks, ab_id=sweep_id, out=out / sweep_id, names=[side_name(vs) for vs in ready],
               on_event=on_event)
    finally:
        for vs in ready:
            records = collect([vs]).values()
            failed = any(r.status != "ok" for pts in records for _, r in pts)
            vs.status = "ran (some cases failed)" if failed else "ran"


Series = dict[str, list[tuple[str, Record]]]  # case key -> [(version set label, record)]


def collect(sets: list[VersionSet]) -> Series:
    """case key -> [(version set label, record)] in sweep order (failed records too: a version that
    cannot run a case says why)."""
    from gpuenv.results.store import load_dir

    out: Series = {}
    for vs in sets:
        if not vs.run_dir or not vs.run_dir.exists():
            continue
        records, _ = load_dir(vs.run_dir)
        for r in sorted(records, key=lambda r: r.case_key):
            out.setdefault(r.case_key, []).append((vs.label, r))
    return out


def plot(series: Series, labels: list[str], path: Path) -> bool:
    """The sweep's figure at `path`; False (nothing drawn) where no case measured a number under any
    version set (every worker failed: a log axis of nothing is an error, not a figure)."""
    from gpuenv.escape import mathtext, pyplot

    if not any(r.status == "ok" for pts in series.values() for _, r in pts):
        return False
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4.5))
    from gpuenv.modes import of

    units = set()
    for key, pts in sorted(series.items()):
        pts = [(lbl, r) for lbl, r in pts if r.status == "ok"]
        xs = [labels.index(lbl) for lbl, _ in pts]
        hs = [of(r).headline(r) for _, r in pts]
        units |= {h.unit for h in hs}
        ax.errorbar(xs, [h.value for h in hs], yerr=[[h.value - h.ci_low for h in hs], [h.ci_high - h.value for h in hs]],
                    marker="o", capsize=3, label=mathtext(key))
    ax.set_xticks(range(len(labels)), [mathtext(x) for x in labels], rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel(f"{', '.join(sorted(units))} (95% interval)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


@dataclass(frozen=True)
class Cell:
    """One case under one version set: its headline, or why it has none, and the verdict against
    the version set before it (None for the first, or where either has no number)."""

    text: str  # "12,345 [12,000-12,700] env steps/s", a failure kind, or "-" (not run)
    ok: bool
    verdict: str | None = None  # faster | slower | no detectable change
    change_pct: float | None = None


def table(series: Series, labels: list[str], threshold: float = 0.10, *, interleaved: bool = False) -> list[tuple[str, list[Cell]]]:
    """(case key, a cell per version set in `labels` order) for `gpuenv sweep`'s table. Each cell's
    verdict is against the version set before it: for an interleaved sweep, the label of the paired
    blocks (gpuenv.history.verdicts; adjusted across the cases of that step); for one run after
    another, compare's faster / slower from the two runs' intervals."""
    from gpuenv.history.ab import evidence
    from gpuenv.history.compare import compare_case
    from gpuenv.history.verdicts import decide
    from gpuenv.modes import of

    paired: dict[tuple[str, str], Any] = {}
    if interleaved:
        for before, after in zip(labels, labels[1:], strict=False):
            both = [(dict(pts)[before], dict(pts)[after]) for pts in series.values() if before in dict(pts) and after in dict(pts)]
            for v in decide([evidence(of, a, b) for a, b in both], threshold):
                paired[(v.case_key, after)] = v
    rows = []
    for key, pts in sorted(series.items()):
        by = dict(pts)
        cells: list[Cell] = []
        prev = None
        for lbl in labels:
            r = by.get(lbl)
            if r is None or r.failure is not None:
                cells.append(Cell(r.failure.kind.value if r and r.failure else "-", False))
                prev = None
                continue
            h = of(r).headline(r)
            text = f"{h.value:,.0f} [{h.ci_low:,.0f}-{h.ci_high:,.0f}] {h.unit}"
            if prev is None:
                cells.append(Cell(text, True))
            elif interleaved and (pv := paired.get((key, lbl))) is not None:
                cells.append(Cell(text, True, pv.label, None if pv.change is None else 100 * pv.change))
            else:
                c = compare_case(prev, r, threshold)
                cells.append(Cell(text, True, c.verdict, 100 * c.change_pct))
            prev = r
        rows.append((key, cells))
    return rows

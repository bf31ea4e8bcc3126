"""Commands that read stored records: show, compare, regressions, report, asv-import, export-gab.
Each parses, calls the library (gpuenv.history, gpuenv.report) and prints."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gpuenv.cli.common import EXIT_CASE_FAILED, app, console, err_console, os_error_text, out_dir, print_skipped, print_warnings
from gpuenv.errors import UserError
from gpuenv.escape import markup, terminal


@app.command()
def show(
    paths: Annotated[list[str], typer.Argument(help="record files or run directories")],
    as_markdown: Annotated[bool, typer.Option("--markdown", help="the same sections as Markdown (for READMEs)")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="every record's headline by machine and run, as JSON (one object)")] = False,
    details: Annotated[bool, typer.Option("--details", help="long cells whole (the bottleneck's core counts)")] = False,
) -> None:
    """The tables of stored records (validated on read), one section per machine and run, each headed by its machine, run, date and versions."""
    from gpuenv.history.load import load_records
    from gpuenv.report import show as sh
    from gpuenv.report.table import footnotes, tables

    records, problems = load_records(paths)
    print_skipped(problems)
    found = sh.sections(records)
    if json_out:
        import json

        print(json.dumps(sh.to_json(found), indent=1))
        return
    if as_markdown:
        print(terminal(sh.markdown(found), multiline=True))
        return
    for s in found:
        first, second = s.heading().split("\n", 1)
        console.print(f"\n[bold]{markup(first)}[/]\n{markup(second)}", highlight=False)
        for t in tables(s.records, details=details):
            console.print(t)
    print_warnings(footnotes(records))


@app.command()
def compare(
    old: Annotated[list[str], typer.Argument(help="OLD record files or result directories", show_default=False)],
    new: Annotated[str, typer.Argument(help="NEW record file or result directory")],
    threshold: Annotated[float, typer.Option("--threshold", help="exit 1 when a case is slower by more than this fraction")] = 0.10,
    allow_different: Annotated[bool, typer.Option("--allow-different", help="compare across hardware or drivers")] = False,
    by_case: Annotated[bool, typer.Option("--by-case", help="pair records by case key, even of different workloads (settings, physics)")] = False,
    calibration: Annotated[list[str] | None, typer.Option("--calibration", help="where A/A runs of `gpuenv ab` are (repeatable; default results/ab)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the comparison as JSON (one object) instead of the table")] = False,
) -> None:
    """NEW/OLD per workload with a 95% interval and a verdict beyond this machine's noise; exit 1 when a case regressed past --threshold."""
    from gpuenv.history.compare import NOISE, check_threshold, compare_runs, read_calibration, read_sides

    check_threshold(threshold)  # before any record is read
    old_recs, new_recs, problems = read_sides(old, new)
    aa, more = read_calibration(calibration)
    print_skipped(problems + more)
    c = compare_runs(old_recs, new_recs, threshold, allow_different=allow_different, by_case=by_case, calibration=aa)
    rows, mem_rows, regressed, mem_regressed = c.rows, c.mem_rows, c.regressed, c.mem_regressed
    if json_out:
        import json

        print(json.dumps(c.to_dict(), indent=1))
        if regressed or mem_regressed:
            raise typer.Exit(EXIT_CASE_FAILED)
        return
    console.print(f"OLD: {markup(c.old_side)}\nNEW: {markup(c.new_side)}", highlight=False)
    t = Table(title="NEW vs OLD, 95% interval", title_justify="left")
    for col in ("case", "measure", "OLD", "NEW", "NEW/OLD", "95% interval", "verdict"):
        t.add_column(col)
    colour = {"faster": "green", "slower": "red", "less memory": "green", "more memory": "red", NOISE: "dim"}
    for r in sorted(rows + mem_rows, key=lambda r: (r.case_key, r in mem_rows)):
        v = f"[{colour.get(r.verdict, 'white')}]{r.verdict}{' (REGRESSION)' if r.regressed else ''}[/]"
        t.add_row(r.case_key, r.unit, f"{r.old:,.1f}", f"{r.new:,.1f}", f"{r.ratio:.3f}", f"{r.ci_low:.3f}-{r.ci_high:.3f}", v)
    console.print(t)
    for k, (a, b) in c.versions.items():
        console.print(f"[dim]version {markup(k)}: {markup(a)} -> {markup(b)}[/]")
    if c.differs:
        console.print(f"[yellow]warning[/] compared across: {markup(', '.join(c.differs))}")
    if c.apart:
        console.print(f"[yellow]note[/] the machine's reference speed moved between OLD and NEW in {len(c.apart)} case(s), e.g. "
                      f"{c.apart[0][0]}: {markup(c.apart[0][1])}; the noise allowed before a verdict grows by that change")
    if c.calibrated:
        some = next(iter(c.calibrated.values()))
        console.print(f"noise allowed: this machine's A/A calibration for {len(c.calibrated)} case(s) (ab {some.ab_id}, "
                      f"e.g. +-{100 * math.expm1(some.allowance):.0f}%) with the reference speed's change", highlight=False)
    if c.uncalibrated:
        console.print(f"[yellow]note[/] no A/A calibration of this machine for {len(c.uncalibrated)} case(s) (e.g. {c.uncalibrated[0]}): "
                      "only the reference speed's change is allowed for there; `gpuenv ab HEAD HEAD --suite SUITE` measures "
                      "this machine's noise, and `gpuenv ab OLD NEW` compares two versions interleaved, which sees far smaller changes")
    if c.no_fingerprint:
        console.print(f"[yellow]warning[/] {c.no_fingerprint} pair(s) have no machine-speed fingerprint on one side (records "
                      "written before gpuenv measured one): a faster or slower machine cannot be told from a code change there")
    for key in c.only_old:
        console.print(f"[dim]only in OLD: {key}[/]")
    for key in c.only_new:
        console.print(f"[dim]only in NEW: {key}[/]")
    n = {v: sum(r.verdict == v for r in rows) for v in ("faster", "slower", "no detectable change", NOISE)}
    console.print(
        f"{len(rows)} cases: {n['faster']} faster, {n['slower']} slower, {n['no detectable change']} no detectable change, "
        f"{n[NOISE]} {NOISE}; "
        f"{len(regressed)} regressed by more than {100 * threshold:g}%",
        highlight=False,
    )
    if mem_rows:
        m = {v: sum(r.verdict == v for r in mem_rows) for v in ("less memory", "more memory")}
        console.print(f"{len(mem_rows)} memory peaks: {m['less memory']} less, {m['more memory']} more; "
                      f"{len(mem_regressed)} grew by more than {100 * threshold:g}%", highlight=False)
    if regressed or mem_regressed:
        if regressed:
            err_console.print(f"regression: {', '.join(r.case_key for r in regressed)} slower by more than {100 * threshold:g}%")
        for r in mem_regressed:
            err_console.print(f"regression: {r.case_key} uses {100 * (r.ratio - 1):.0f}% more {r.unit.rsplit(' ', 1)[0]} "
                              f"({r.old:,.0f} -> {r.new:,.0f} {r.unit.rsplit(' ', 1)[1]})")
        raise typer.Exit(EXIT_CASE_FAILED)


@app.command()
def regressions(
    paths: Annotated[list[str] | None, typer.Argument(help="result directories (default: results/)")] = None,
    min_change: Annotated[float, typer.Option("--min-change", help="smallest relative change reported")] = 0.05,
    by_version: Annotated[str | None, typer.Option("--by-version", help="order each history by this library's version, e.g. brax")] = None,
    alert: Annotated[str | None, typer.Option("--alert", help="write DIR/summary.md and DIR/alarms.json (new regressions, stopped series) for a workflow to post")] = None,
) -> None:
    """Change points in each case's history (lower steps/s or longer time-to-reward = regression)."""
    from gpuenv.history.load import load_records
    from gpuenv.history.regress import COLUMNS, change_points, check_min_change

    check_min_change(min_change)  # before any record is read
    records, problems = load_records(paths or ["results"], "records")
    print_skipped(problems)
    search = change_points(records, min_change=min_change, by_version=by_version)
    found = search.found
    if found:
        t = Table(title="change points (permutation test of the best split, p < 0.01)", title_justify="left")
        for col in COLUMNS:
            t.add_column(col)
        kind = COLUMNS.index("kind")
        for f in found:
            cells = [markup(c) for c in f.row()]
            cells[kind] = f"[{'yellow' if f.suspicious else 'red' if f.regression else 'green'}]{cells[kind]}[/]"
            t.add_row(*cells)
        console.print(t)
    console.print(f"{len(found)} change point(s) in {search.histories} case histories ({search.records} records)")
    for line in search.blind_lines():
        console.print(f"[yellow]not seen[/] {markup(line)}")
    if alert is not None:
        from gpuenv.history.alert import write

        where = out_dir(alert)
        try:
            alarms = write(search, where)
        except OSError as e:
            raise UserError(f"--alert {alert}: cannot write there: {os_error_text(e)}") from None
        console.print(f"{len(alarms)} alarm(s) written to {markup(where / 'alarms.json')} and {markup(where / 'summary.md')}")


@app.command()
def report(
    paths: Annotated[list[str] | None, typer.Argument(help="record files or directories (default: results/)")] = None,
    out: Annotated[str, typer.Option("--out", "-o", help="site directory")] = "results/site",
    num_envs: Annotated[int | None, typer.Option("--num-envs", help="num_envs of the backend comparison")] = None,
    commit_url: Annotated[str | None, typer.Option("--commit-url", help="link each record's gpuenv commit: a URL with {sha}, e.g. https://github.com/ORG/gpuenv/commit/{sha} (default in GitHub Actions: this repository's)")] = None,
) -> None:
    """Build the static report site (HTML + PNG, works offline) from stored records."""
    from gpuenv.history.load import load_records
    from gpuenv.report.site import build

    site = out_dir(out)
    if site.exists() and not site.is_dir():
        raise UserError(f"--out {out}: a file is there; the site is a folder of pages (pass a new or existing directory)")
    if num_envs is not None and num_envs < 1:
        raise UserError(f"--num-envs must be >= 1 (got {num_envs})")
    inputs = [Path(p).resolve() for p in paths or ["results"] if str(p).strip()]
    if any(site.resolve() == p or site.resolve() in p.parents for p in inputs):
        raise UserError(f"--out {out} holds the records it reads: the site marks its folder as gpuenv's output, which readers "
                        "skip; pass a folder inside or beside them (default results/site)")
    from gpuenv.report.interactive import commit_link_template

    template = commit_link_template(commit_url)  # a bad template: one line before any record is read
    records, problems = load_records(paths or ["results"], "records")
    print_skipped(problems)
    sizes = sorted({r.case.num_envs for r in records if r.status == "ok"})
    if num_envs is not None and num_envs not in sizes:
        raise UserError(f"--num-envs {num_envs}: no ok record at that size (measured: {', '.join(map(str, sizes)) or 'none'})")
    try:
        index = build(records, site, num_envs, commit_url=template)
    except OSError as e:
        raise UserError(f"cannot write the site to {out}: {os_error_text(e)}") from None
    console.print(f"wrote {markup(index)} ({len(records)} records)")


@app.command("asv-import")
def asv_import(
    paths: Annotated[list[str], typer.Argument(help="record files or result directories")],
    results_dir: Annotated[Path, typer.Option("--results-dir", help="asv results_dir")] = Path("results/asv/results"),
    by_version: Annotated[str | None, typer.Option("--by-version", help="library whose releases form the x axis, e.g. brax")] = None,
) -> None:
    """Write asv result files from gpuenv records (then `asv publish` draws the history)."""
    from gpuenv.history.asv_import import check_library, import_records, write_config
    from gpuenv.history.load import load_records

    if by_version is not None:
        check_library(by_version)
    records, problems = load_records(paths, "records")
    print_skipped(problems)
    repo = write_config(results_dir, by_version) if by_version else Path.cwd()
    written, skipped = import_records(records, results_dir, repo, by_version)
    not_ok = [m for m in skipped if m.endswith(": not ok")]
    for msg in skipped:
        if msg not in not_ok:
            err_console.print(f"[yellow]not imported[/] {markup(msg)}")
    if not_ok:  # failed cases have no number to chart: expected, said once
        console.print(f"[dim]{len(not_ok)} record(s) of failed cases left out (asv charts numbers only)[/]")
    if not written:
        raise UserError("no record could be imported (each needs status ok and a commit in this repository)")
    how = f"asv publish --config {results_dir.parent / f'asv-{by_version}.conf.json'}" if by_version else "asv publish"
    console.print(f"wrote {written} asv results to {markup(results_dir)}; now `{markup(how)}`")


@app.command("export-gab")
def export_gab(
    src: Annotated[Path, typer.Argument(help="pytest-benchmark JSON (--benchmark-json)")],
    dst: Annotated[Path, typer.Argument(help="github-action-benchmark customBiggerIsBetter JSON to write")],
) -> None:
    """Convert `make bench-pytest` output for github-action-benchmark (env steps/s, bigger is better)."""
    from gpuenv.history.gab import export

    n = export(src, dst)
    console.print(f"wrote {n} benchmarks to {markup(dst)}")

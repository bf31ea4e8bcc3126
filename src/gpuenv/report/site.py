"""`gpuenv report`: the report site (HTML, PNG and interactive plotly figures; works offline) from stored records.

Each measurement mode contributes its sections (throughput: scaling plots, a backend comparison at one
num_envs, the decision table; time-to-reward: charts and a table); the site adds the history of every
case's headline over gpuenv commits and over the version of its backend's library (the library each
backend declares). The PNG files sit next to index.html for READMEs and papers.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from gpuenv.escape import mathtext, pyplot
from gpuenv.format import attr, colour, html_table
from gpuenv.measure.fingerprint import drift, machines, without_speed
from gpuenv.modes import by_mode, of
from gpuenv.registry import default_registry
from gpuenv.results.schema import Record

History = dict[str, list[tuple[str, float, Record]]]


def latest(records: list[Record]) -> dict[str, Record]:
    """The newest ok record per case key (one point per case in the plots)."""
    out: dict[str, Record] = {}
    for r in sorted(records, key=lambda r: r.created_utc):
        if r.status == "ok":
            out[r.case_key] = r
    return out


def history_series(records: list[Record], key: str) -> History:
    """case key -> [(x label, value, record)] over time; x is the commit (short sha) or the version of
    the backend's library, depending on `key` ("commit" or "version")."""
    out: History = defaultdict(list)
    registry = default_registry()
    for r in sorted(records, key=lambda r: r.created_utc):
        if r.status != "ok":
            continue
        if key == "commit":
            x = (r.where.git.sha or "unknown")[:8]
        else:
            b = registry.backends.get(r.case.backend)
            lib = (b.library if b else None) or r.case.backend
            x = f"{lib} {r.where.packages.get(lib) or '?'}"
        h = of(r).headline(r)
        out[f"{r.case_key} [{r.workload_id[:6]}]"].append((x, h.value, r))
    return {k: v for k, v in out.items() if len({x for x, _, _ in v}) > 1}


def history_plot(series: History, title: str, path: Path, by_version: bool = False) -> None:
    """One panel per x axis: commits share one; with by_version, each library gets its own panel
    with its releases in release order."""
    from gpuenv.pins import version_key

    panels: dict[str, dict] = defaultdict(dict)
    for key, pts in series.items():
        panels[pts[0][0].rsplit(" ", 1)[0] if by_version else "commits"][key] = pts
    plt = pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 3.6 * len(panels)), squeeze=False)
    for ax, (panel, group) in zip(axes[:, 0], sorted(panels.items())):
        xs = list(dict.fromkeys(x for pts in group.values() for x, _, _ in pts))  # commits: time order
        if by_version:
            xs.sort(key=lambda x: version_key(x.rsplit(" ", 1)[-1]))
        units = set()
        for key, pts in sorted(group.items()):
            at = sorted({xs.index(x) for x, _, _ in pts})
            newest = [max((p for p in pts if xs.index(p[0]) == i), key=lambda p: p[2].created_utc) for i in at]  # one point per x
            heads = [of(r).headline(r) for _, _, r in newest]
            units |= {h.unit for h in heads}
            label = newest[0][2].case.label  # the backend's colour, the same in every figure of the site
            ax.errorbar(at, [h.value for h in heads], yerr=[[h.value - h.ci_low for h in heads], [h.ci_high - h.value for h in heads]],
                        marker="o", capsize=3, label=mathtext(key), color=colour(label))
        ax.set_xticks(range(len(xs)), [mathtext(x) for x in xs], rotation=20, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(mathtext(f"{' / '.join(sorted(units))} (median, 95% interval; log scale)"), fontsize=8)
        ax.set_title(mathtext(f"{title}: {panel}") if by_version else title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}.nav{font-size:14px}pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}
table.kv th{text-align:left;vertical-align:top}.figure{margin:1em 0}
table.claims td,table.decision td{text-align:left;vertical-align:top}
table{border-collapse:collapse;margin:1em 0;font-size:14px;display:block;max-width:100%;overflow-x:auto}td{overflow-wrap:anywhere}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
td:first-child,td:nth-child(2),th{text-align:left}img{max-width:100%;border:1px solid #eee}h2{border-bottom:1px solid #ddd}
.note{color:#666;font-size:13px}"""


def build(records: list[Record], out: Path, num_envs: int | None = None, commit_url: str | None = None) -> Path:
    """index.html (PNGs beside it, interactive figures over them) in `out`, plus claims.html,
    decision.html and one page per case (cases/), with the records themselves (records/). Records of
    different machines (by identity and reference speed, gpuenv.measure.fingerprint) never share a
    plot or a table: each machine gets its own page under machine-N/, and index.html lists them."""
    from gpuenv.report import interactive as ix
    from gpuenv.results.store import mark_output

    out.mkdir(parents=True, exist_ok=True)
    mark_output(out, "a report site (gpuenv report)")  # its records/ are copies: readers skip the site
    registry = default_registry()  # one colour per backend:variant, in the registry's order: the same in every site
    for name in [f"{b.name}:{v}" for b in registry.backends.values() for v in b.variants or ()] + sorted({r.case.label for r in records}):
        colour(name)
    ix.write_plotly_js(out)
    for r in records:
        ix.case_page(r, out, CSS, commit_url)
    ix.claims_page(records, out, CSS)
    groups = machines(records)
    ix.decision_page(records, out, CSS, groups)
    if len(groups) == 1:
        return _page(records, out, num_envs, groups[0][0], "")
    items, options = [], []
    for i, (machine, recs) in enumerate(groups, 1):
        _page(recs, out / f"machine-{i}", num_envs, machine, "../")
        items.append(f"<li><a href='machine-{i}/index.html'>machine {i}</a>: {attr(machine)}<br>"
                     f"<span class='note'>{attr(machine_summary(recs))}</span></li>")
        options.append(f"<option value='machine-{i}/index.html'>machine {i}: {attr(without_speed(machine))}</option>")
    picker = ("<p><label>Go to a machine: <select onchange=\"if(this.value){window.location.href=this.value;}\">"
              f"<option value=''>choose</option>{''.join(options)}</select></label></p>")
    page = _html(
        ix.nav("") + f"<h1>gpuenv results</h1><p class='note'>{len(records)} records from {len(groups)} machines, told apart by identity "
        f"and a reference workload's speed (runs of one --machine-name are one machine); built {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. "
        f"Their numbers are not comparable, so each has its own page.</p>{picker}<ul>{''.join(items)}</ul>", ""
    )
    index = out / "index.html"
    index.write_text(page)
    return index


def machine_summary(records: list[Record]) -> str:
    """One line for the index: how many records and runs, when, which tasks, and each task's fastest
    backend by its headline (throughput records only)."""
    from gpuenv.format import fmt_rate
    from gpuenv.tasks import task_rank

    runs = {r.run_id for r in records}
    days = sorted(r.created_utc[:10] for r in records)
    best: dict[str, tuple[float, str]] = {}
    for r in records:
        if (step := of(r).step_rate(r)) is not None and step.median > best.get(r.case.task, (0.0, ""))[0]:
            best[r.case.task] = (step.median, f"{r.case.label} {fmt_rate(step.median)} env steps/s at {step.num_envs} envs")
    fastest = "; ".join(f"{task}: {best[task][1]}" for task in sorted(best, key=task_rank))
    span = days[0] if days[0] == days[-1] else f"{days[0]} to {days[-1]}"
    return f"{len(records)} records in {len(runs)} run(s), {span}" + (f"; fastest per task: {fastest}" if fastest else "")


def regression_section(records: list[Record]) -> list[str]:
    """`gpuenv regressions` on this machine's records: the change points (regressions first) and what
    the search could not see (short histories, stopped series)."""
    from gpuenv.history.regress import COLUMNS, change_points

    search = change_points(records)
    found = sorted(search.found, key=lambda f: not f.regression)
    out = [f"<h2 id='regressions'>Regressions and stopped series</h2><p class='note'>{len(found)} change point(s) in "
           f"{search.histories} case histories ({search.records} records), as `gpuenv regressions` finds them (permutation test "
           "of the best split, p &lt; 0.01).</p>"]
    if found:
        out.append(html_table(list(COLUMNS), [f.row() for f in found], "regressions"))
    out += [f"<p class='note'>Not seen: {attr(line)}</p>" for line in search.blind_lines()]
    return out


def _html(body: str, prefix: str) -> str:
    from gpuenv.report.interactive import page

    return page(body, CSS, prefix)


def _page(records: list[Record], out: Path, num_envs: int | None, machine: str, prefix: str) -> Path:
    from gpuenv.report import interactive as ix

    out.mkdir(parents=True, exist_ok=True)
    parts = [ix.nav(prefix), f"<h1>gpuenv results</h1><p class='note'>{len(records)} records; built {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. "
             f"Machine: {attr(machine)}. Latest record per case unless a history plot says otherwise.</p>"]
    parts += ix.machine_sections(list(latest(records).values()) + [r for r in records if r.status != "ok"], prefix)
    parts += [f"<p class='note'>Warning: {attr(line)}</p>" for line in drift(records)]
    for mode, mine in by_mode(records):
        parts += mode.site_sections(list(latest(mine).values()), out, num_envs)
    parts += regression_section(records)
    ok = [r for r in records if r.status == "ok"]
    for key, title in (("commit", "History over gpuenv commits"), ("version", "History over library versions")):
        series = history_series(ok, key)
        parts.append(f"<h2 id='history-{key}'>{title}</h2>")
        if series:
            name = f"history-{key}.png"
            history_plot(series, title, out / name, by_version=key == "version")
            parts.append(f"<img class='plot' src='{name}' alt='{title}'>")
        else:
            parts.append("<p class='note'>Not enough history yet: a case needs records from two different "
                         f"{'commits' if key == 'commit' else 'library versions'}.</p>")
    index = out / "index.html"
    index.write_text(_html("".join(parts), prefix))
    return index

"""The interactive half of the report site: plotly figures (hover a point for its case, value,
interval, machine and memory; click it for the case's page), one page per case, the claims page and
the decision page. Self-contained and offline: plotly.min.js is written once at the site's root
from the installed plotly package and every page loads it by a relative path; nothing is fetched.

Every record value reaches a page escaped: as HTML text through `attr`, and inside a figure's JSON
with <, > and & as \\u escapes, so no value can close the script that carries it.
"""

from __future__ import annotations

import json
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpuenv.errors import UserError
from gpuenv.format import attr, colour, curves, fmt_rate, html_table, slug
from gpuenv.measure.fingerprint import identity
from gpuenv.modes import of
from gpuenv.modes.base import StepRate
from gpuenv.results.models import Container
from gpuenv.results.schema import Record, as_dict

PLOTLY_JS = "plotly.min.js"
NAV = (("index.html", "results"), ("claims.html", "claims"), ("decision.html", "decision"))


def write_plotly_js(root: Path) -> None:
    from plotly.offline import get_plotlyjs

    path = root / PLOTLY_JS
    text = get_plotlyjs()
    if not path.exists() or path.stat().st_size != len(text.encode()):
        path.write_text(text)


def _safe_json(value: Any) -> str:
    from plotly.utils import PlotlyJSONEncoder

    return json.dumps(value, cls=PlotlyJSONEncoder).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def figure(div_id: str, data: list[dict], layout: dict, height: int = 420) -> str:
    """A plotly figure: its div, and the script that draws it (clicking a point with a URL in its
    customdata opens that page)."""
    base = {"height": height, "margin": {"l": 70, "r": 20, "t": 40, "b": 60}, "hovermode": "closest", "template": "plotly_white"}
    import plotly.graph_objects as go

    fig = go.Figure(data=data, layout={**base, **layout})  # validates the traces and layout
    spec = fig.to_plotly_json()
    config = {"displaylogo": False, "responsive": True, "showLink": False}
    return (f"<div id='{attr(div_id)}' class='figure'></div>"
            f"<script data-gpuenv='figure'>(function(){{var d=document.getElementById({_safe_json(div_id)});"
            f"Plotly.newPlot(d,{_safe_json(spec['data'])},{_safe_json(spec['layout'])},{_safe_json(config)});"
            "d.on('plotly_click',function(e){var u=e.points[0].customdata;if(u){window.location.href=u;}});})();</script>")


def head(prefix: str) -> str:
    return f"<script src='{prefix}{PLOTLY_JS}'></script>"


def nav(prefix: str) -> str:
    links = " · ".join(f"<a href='{prefix}{href}'>{text}</a>" for href, text in NAV)
    return f"<p class='nav'>{links}</p>"


# --- cases -----------------------------------------------------------------------------------------


def _stem(r: Record) -> str:
    """run/case-<id>: a case rerun into the same run is another record, so another page."""
    from gpuenv.results.store import record_digest

    return f"{slug(r.run_id)}/{slug(r.case_key)}-{record_digest(r)[:8]}"


def case_href(r: Record) -> str:
    """A record's page, relative to the site's root."""
    return f"cases/{_stem(r)}.html"


def record_href(r: Record) -> str:
    return f"records/{_stem(r)}.json"


def reproduce(r: Record) -> list[str]:
    """The exact commands that reproduce a record: the same suite narrowed to this case, here or in
    the image it ran in."""
    args = ["bench", "--suite", r.suite, *of(r).reproduce_args(r)]
    out = [shlex.join(["gpuenv", *args])]
    container = r.where.machine.container
    if container and container.image:
        ref = container.ref or f"gpuenv/{container.image}:latest"
        gpu = ["--gpus", "all"] if r.where.machine.gpus else []
        out.append(shlex.join(["docker", "run", "--rm", *gpu, ref, *args]))
    git = r.where.git
    if git.sha:
        out.insert(0, f"git checkout {git.sha}  # the gpuenv commit it ran with{' (uncommitted changes on top)' if git.dirty else ''}")
    return out


def _kv(rows: list[tuple[str, Any]]) -> str:
    return "<table class='kv'>" + "".join(f"<tr><th>{attr(k)}</th><td>{attr(v)}</td></tr>" for k, v in rows) + "</table>"


def commit_link_template(given: str | None) -> str | None:
    """The URL a record's gpuenv commit links to, with {sha}: the one given, else in GitHub Actions
    this repository's commit page, else none (the site names the commit without a link)."""
    import os

    if given is None and os.environ.get("GITHUB_REPOSITORY"):
        given = f"{os.environ.get('GITHUB_SERVER_URL', 'https://github.com')}/{os.environ['GITHUB_REPOSITORY']}/commit/{{sha}}"
    if given is not None and (given.count("{sha}") != 1 or not given.startswith(("https://", "http://"))):
        raise UserError(f"--commit-url {given!r}: give an http(s) URL with one {{sha}} in it, e.g. https://github.com/ORG/gpuenv/commit/{{sha}}")
    return given


def commit_html(r: Record, template: str | None) -> str:
    sha = r.where.git.sha
    if not sha:
        return "gpuenv commit unknown"
    dirty = " (+ uncommitted changes)" if r.where.git.dirty else ""
    text = f"gpuenv commit {attr(sha[:10])}{dirty}"
    return f"<a href='{attr(template.replace('{sha}', sha))}'>{text}</a>" if template else text


def case_page(r: Record, root: Path, css: str, commit_url: str | None = None) -> None:
    path = root / case_href(r)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec_path = root / record_href(r)
    rec_path.parent.mkdir(parents=True, exist_ok=True)
    rec_path.write_text(json.dumps(as_dict(r), default=str, separators=(",", ":")))  # compact: json's C encoder (indent is pure Python)
    prefix = "../../"
    mode = of(r)
    h = mode.headline(r) if r.status == "ok" else None
    m = r.where.machine
    container = m.container or Container()
    env = r.where.environment
    s = r.summary
    rows: list[tuple[str, Any]] = [
        ("status", r.status + (f": {r.failure.reason}" if r.failure else "")),
        ("headline", f"{human(h.value)} {h.unit} (95% interval {human(h.ci_low)}-{human(h.ci_high)})" if h else "-"),
        ("measurement mode", r.measurement_mode), ("suite", r.suite), ("run", r.run_id), ("created (UTC)", r.created_utc),
        ("native env", r.what.native_env_id), *mode.page_rows(r),
        ("startup s (median)", human(s and s.startup_s_median)), ("compile s (median)", human(s and s.compile_s_median)),
        ("host memory MiB (per env)", s.host_memory_cell() if s else "-"),
        ("device peak MiB", human(s and s.device_peak_mib) if s and s.device_peak_mib is not None else "- (not measured: no GPU)"),
        ("machine", f"{identity(r)}, {m.memory_gib} GiB"),
        ("python", m.python), ("gpuenv commit", r.where.git.sha),
        ("image", container.image or "none (ran outside a gpuenv image)"), ("image id", container.id or "-"),
        ("image base", container.base or "-"),
        ("lock sha256", container.lock_sha256 or (env and env.lock_sha256) or "- (the main install)"),
        ("environment", (env and env.path) or "main install"),
    ]
    packages = sorted(r.where.packages.items())
    phase_rows = mode.phase_rows(r)
    process_rows = mode.process_rows(r)
    details = sorted((k, json.dumps(v) if isinstance(v, dict | list) else v) for k, v in r.what.details.items())
    body = (nav(prefix) + f"<h1>{attr(r.case_key)}</h1>"
            f"<p class='note'><a href='{prefix}{record_href(r)}'>the record (JSON)</a> · run {attr(r.run_id)} · "
            f"{commit_html(r, commit_url)}</p>"
            "<h2>Reproduce</h2><pre>" + attr("\n".join(reproduce(r))) + "</pre>"
            "<h2>Result and provenance</h2>" + _kv(rows)
            + ("<h2>Worker processes</h2><p class='note'>Each process's timed values (env steps/s): the headline is their "
               "median, its interval a bootstrap over processes, then values.</p>"
               + html_table(["process", "values, env steps/s", "startup s", "outcome"], process_rows, "processes")
               if process_rows else "")
            + ("<h2>Phases</h2>" + html_table(["phase", "env steps/s", "ratio to step+reset", "what ran / why not"], phase_rows, "phases")
               if phase_rows else "")
            + "<h2>Backend details</h2>" + _kv(details)
            + "<h2>Package versions</h2>" + html_table(["package", "version"], [list(p) for p in packages], "packages"))
    path.write_text(page(body, css, prefix))


def human(x: Any) -> str:
    """A number as people read it: 34.7k, 1.23M, 0.75, 12.3; text and None (as '-') unchanged."""
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, int | float):
        return str(x)
    if abs(x) >= 1e4:
        return fmt_rate(abs(x)) if x >= 0 else "-" + fmt_rate(-x)
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.1f}"


def page(body: str, css: str, prefix: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>gpuenv results</title><style>{css}</style>"
            f"{head(prefix)}</head><body>{body}</body></html>")


# --- a machine's throughput, interactive -----------------------------------------------------------


def _hover(r: Record, step: StepRate) -> str:
    s = r.summary
    parts = [f"<b>{attr(r.case_key)}</b>",
             f"{fmt_rate(step.median)} env steps/s ({fmt_rate(step.ci_low)}-{fmt_rate(step.ci_high)})",
             f"startup {s.startup_s_median:.1f} s, compile {s.compile_s_median:.1f} s" if s else "",
             f"host memory {attr(s.host_memory_cell() if s else '-')} MiB",
             f"run {attr(r.run_id)}, gpuenv {attr((r.where.git.sha or 'unknown')[:10])}", attr(identity(r)), "click: the case's page"]
    return "<br>".join(parts)


def throughput_figures(records: list[Record], prefix: str) -> list[str]:
    """Per task: env steps/s over num_envs, one line per backend:variant, 95% interval as error bars."""
    from gpuenv.tasks import task_rank

    by_task: dict[str, list[Record]] = defaultdict(list)
    steps: dict[int, StepRate] = {}
    for r in records:
        if (step := of(r).step_rate(r)) is not None:
            by_task[r.case.task].append(r)
            steps[id(r)] = step
    out = []
    for task in sorted(by_task, key=task_rank):
        traces = []
        for name, label, nth, recs in curves(by_task[task]):
            rs = [(r, steps[id(r)]) for r in recs]
            e = [step for _, step in rs]
            traces.append({
                "type": "scatter", "mode": "lines+markers", "name": attr(label),
                "line": {"color": colour(name), "dash": ("solid", "dot", "dash", "dashdot")[nth % 4]},
                "marker": {"color": colour(name)},
                "x": [v.num_envs for v in e], "y": [v.median for v in e],
                "error_y": {"type": "data", "symmetric": False, "array": [v.ci_high - v.median for v in e],
                            "arrayminus": [v.median - v.ci_low for v in e]},
                "text": [_hover(r, step) for r, step in rs], "hovertemplate": "%{text}<extra></extra>",
                "customdata": [prefix + case_href(r) for r, _ in rs],
            })
        out.append(f"<h3>{attr(task)}</h3>" + figure(
            f"scaling-{slug(task)}", traces,
            {"title": {"text": f"{attr(task)}: env steps/s over num_envs (hover a point; click for its case)"},
             "xaxis": {"title": {"text": "num_envs"}, "type": "log", "dtick": 0.30103},
             "yaxis": {"title": {"text": "env steps/s (median, 95% interval)"}, "type": "log"}}))
    return out


def case_table(records: list[Record], prefix: str) -> str:
    """Every record of the page, linked to its case page, with memory and phase columns once measured."""
    from gpuenv.tasks import task_rank

    rows = []
    for r in sorted(records, key=lambda r: (task_rank(r.case.task), r.case.label, r.case.num_envs, r.created_utc)):
        mode = of(r)
        ph = ", ".join(f"{name} {ratio:.2f}" for name, (ratio, _, _) in mode.phase_ratios(r).items()) or "-"
        value = mode.progress_line(r) if r.status == "ok" else r.status  # the mode's own one-line figure
        s = r.summary
        dev = s.device_peak_mib if s else None
        rows.append(f"<tr><td><a href='{attr(prefix + case_href(r))}'>{attr(r.case_key)}</a></td><td>{attr(value)}</td>"
                    f"<td>{attr(s.host_memory_cell() if s else '-')}</td><td>{attr('-' if dev is None else f'{dev:,.0f}')}</td>"
                    f"<td>{attr(ph)}</td><td>{attr(r.run_id)}</td></tr>")
    head_ = "".join(f"<th>{h}</th>" for h in ("case (its page)", "headline", "host MiB (/env)", "device peak MiB",
                                               "phase ratios to step+reset", "run"))
    return f"<table class='cases'><thead><tr>{head_}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def machine_sections(records: list[Record], prefix: str) -> list[str]:
    return (["<h2 id='interactive'>Throughput, interactive</h2>"] + throughput_figures(records, prefix)
            + ["<h2 id='cases'>Every case: its page has the record, image id, lock hash and the command that reproduces it</h2>",
               case_table(records, prefix)])


# --- claims ----------------------------------------------------------------------------------------


def claims_page(records: list[Record], root: Path, css: str) -> Path:
    from gpuenv import claims as cl

    results = cl.check_all(records)
    rows = []
    for res in results:
        c, m = res.claim, res.measured
        why = "; ".join(res.differences) or res.detail
        if res.status == "arithmetic":
            mcell = res.detail
        elif m:
            mcell = f"{cl.with_unit(m.value, c.unit)} ({cl.fmt(m.ci_low, c.unit)}-{cl.fmt(m.ci_high, c.unit)}) on {identity(m.record)}"
        else:
            mcell = "nothing comparable yet"
        case = f"<a href='{attr(case_href(m.record))}'>{attr(m.case_key)}</a>" if m else ""
        ratio = f"{res.ratio:.3g}" if res.ratio else "-"
        rows.append(f"<tr id='claim-{attr(slug(c.id))}'><td>{attr(c.id)}</td><td>{attr(c.who)}<br><span class='note'>{attr(c.source)}</span></td>"
                    f"<td>{attr(c.stated)}<br><span class='note'>{attr(c.hardware)}; {attr(c.protocol)}</span></td>"
                    f"<td>{attr(mcell)}<br>{case}</td><td>{attr(ratio)}</td><td>{attr(why)}</td><td>{attr(res.to_check)}</td></tr>")
    # the chart: claims in a rate unit (ratios, durations and arithmetic stay in the table)
    plotted = [res for res in results if res.claim.unit in ("env steps/s", "frames/s", "physics steps/s")]
    ids = [attr(res.claim.id) for res in plotted]

    def measured_tip(res: cl.Result) -> str:
        c, m = res.claim, res.measured
        if not (m and res.ratio):
            return ""
        return "<br>".join([f"<b>{attr(c.id)}</b>: measured {attr(cl.with_unit(m.value, c.unit))}", attr(m.case_key),
                            attr(identity(m.record)), f"claimed / measured: {res.ratio:.3g}", "click: the case's page"])

    ms = [res.measured for res in plotted]
    traces: list[dict] = [
        {"type": "scatter", "mode": "markers", "name": "claimed", "y": ids, "x": [res.claim.central for res in plotted],
         "text": ["<br>".join([f"<b>{attr(res.claim.id)}</b>", attr(res.claim.who), f"claimed: {attr(res.claim.stated)}",
                               attr(res.claim.hardware)]) for res in plotted],
         "hovertemplate": "%{text}<extra></extra>", "marker": {"symbol": "diamond", "size": 11, "color": "#d62728"}},
        {"type": "scatter", "mode": "markers", "name": "measured (95% interval)", "y": ids, "x": [m.value if m else None for m in ms],
         "text": [measured_tip(res) for res in plotted], "customdata": [case_href(m.record) if m else "" for m in ms],
         "hovertemplate": "%{text}<extra></extra>",
         "error_x": {"type": "data", "symmetric": False, "array": [m.ci_high - m.value if m else None for m in ms],
                     "arrayminus": [m.value - m.ci_low if m else None for m in ms]},
         "marker": {"size": 10, "color": "#1f77b4"}},
    ]
    fig = figure("claims-figure", traces, {
        "title": {"text": "Claimed (red) vs measured (blue), each in the claim's own unit: the gap is the result"},
        "xaxis": {"title": {"text": "rate (log)"}, "type": "log"}, "yaxis": {"automargin": True, "autorange": "reversed"},
        "legend": {"orientation": "h"}}, height=max(420, 34 * len(plotted) + 120))
    measured_n = sum(r.status == "measured" for r in results)
    body = (nav("") + "<h1>Published claims, checked</h1>"
            f"<p class='note'>{len(results)} claims from claims/register.toml; {measured_n} have a measured counterpart. "
            "Each is compared with the closest measured case (same task and backend, nearest num_envs, the claim's unit), "
            "and the ratio claimed / measured is the gap; why they differ is said where it is known. Ratio claims "
            "(EnvPool's 'x' over SubprocVecEnv) and arithmetic are in the table.</p>"
            + fig + "<table class='claims'><thead><tr><th>claim</th><th>who, source</th><th>as stated</th><th>measured</th>"
            "<th>claimed / measured</th><th>why they differ</th><th>to check it</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    path = root / "claims.html"
    path.write_text(page(body, css, ""))
    return path


# --- decision --------------------------------------------------------------------------------------

BUDGETS = (1_000_000, 10_000_000, 50_000_000, 1_000_000_000)


def decision_page(records: list[Record], root: Path, css: str, groups: list[tuple[str, list[Record]]]) -> Path:
    """decision.html; `groups`: the records by machine (fingerprint.machines), as the site numbers its machine pages."""
    from gpuenv.decide import decide
    from gpuenv.tasks import task_rank

    tasks = sorted({r.case.task for r in records if of(r).step_rate(r) is not None}, key=task_rank)
    parts = [nav(""), "<h1>The decision, computed</h1><p class='note'>The course's decision table (course tasks: Godot CPU "
             "is fine; budget &lt; 50M steps: CPU is fine; 20+ hyperparameter configs: consider EnvPool; a NeurIPS submission: "
             "almost surely GPU), answered from the records of one machine per task: per backend the predicted wall-clock to "
             "train for the budget (startup and compile, then the shared SB3 PPO's collection at its collect rate and learning "
             "at its learn rate, or a trainer's own training rate measured end to end, such as Brax's PPO), or, where neither "
             "was measured, to step through it (said so), as "
             "`gpuenv decide --task T --budget STEPS [--configs K]` prints it.</p>"]
    for task in tasks:
        rows = []
        fig_traces: dict[str, list[float]] = defaultdict(list)
        machine = ""
        others: list[str] = []
        needs: list[str] = []
        checks: list = []
        for budget, configs in [*((b, 1) for b in BUDGETS), (10_000_000, 20)]:
            try:
                d = decide(task, budget, configs, records, groups=groups)  # as the CLI: half-finished runs left out, and said
            except UserError as e:
                rows.append([f"{configs} x {budget:,}", str(e), "", ""])
                continue
            machine, needs, checks, others = d.machine, d.needs_gpu, d.checks, d.other_machines
            rows.append([f"{configs} x {budget:,}", d.row, d.answer, "; ".join([*(d.why[:1]), *d.versus[:1], *d.unfinished])])
            if configs == 1:
                for o in d.options:
                    pred = o.predicted_s(budget, 1)
                    name = f"{o.selector} ({'PPO training, predicted' if pred else 'stepping only'})"
                    fig_traces[name].append((pred[0] if pred else o.wall_s(budget, 1)) / 3600)
        traces = [{"type": "scatter", "mode": "lines+markers", "name": attr(sel), "x": BUDGETS[:len(v)], "y": v,
                   "line": {"color": colour(sel.split(" (", 1)[0]), "dash": "solid" if "predicted" in sel else "dot"},
                   "hovertemplate": f"{attr(sel)}: %{{y:.3g}} h to %{{x:,}} steps<extra></extra>"} for sel, v in sorted(fig_traces.items())]
        also = f"; also measured on {attr('; '.join(others))} (`gpuenv decide --machine N`)" if others else ""
        parts.append(f"<h2>{attr(task)}</h2><p class='note'>records of {attr(machine)}{also}</p>")
        parts.append(html_table(["runs x steps", "decision-table row", "answer", "why"], rows, "decision"))
        if traces:
            parts.append(figure(f"decision-{slug(task)}", traces, {
                "title": {"text": f"{attr(task)}: hours to the budget (one run; dotted: stepping only, no training predicted)"},
                "yaxis": {"title": {"text": "hours (log scale)"}, "type": "log"},
                "xaxis": {"title": {"text": "env steps per run (log scale)"}, "type": "log"}}))
        parts += [f"<p class='note'>Model check: {attr(c.text)}</p>" for c in checks]
        parts += [f"<p class='note'>Needs GPU measurements: {attr(n)}</p>" for n in needs]
    path = root / "decision.html"
    path.write_text(page("".join(parts), css, ""))
    return path

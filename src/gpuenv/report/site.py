"""`gpuenv report`: a static site (HTML + PNG, no scripts, works offline) from stored records.

Sections: per task a scaling plot (env steps/s vs num_envs, log-log, a line and 95% band per backend),
a backend comparison at one num_envs, time-to-reward charts, history over gpuenv commits and over
library versions, and the decision table ("wall-clock to 10M / 1B env steps on this machine").
The PNG files sit next to index.html for READMEs and papers.
"""

from __future__ import annotations

import html
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from gpuenv.report.table import fmt_rate
from gpuenv.results.schema import THROUGHPUT, TIME_TO_REWARD
from gpuenv.tasks import task_rank

# The library whose version a backend's history is drawn against.
BACKEND_LIBRARY = {"gymnasium": "gymnasium", "envpool": "envpool", "brax": "brax", "mjx": "mujoco-mjx", "isaaclab": "isaaclab"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latest(records: list[dict]) -> dict[str, dict]:
    """The newest ok record per case key."""
    out: dict[str, dict] = {}
    for r in sorted(records, key=lambda r: r["created_utc"]):
        if r["status"] == "ok":
            out[r["case_key"]] = r
    return out


_PALETTE = ["tab:red", "tab:orange", "tab:green", "tab:blue", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:gray"]
_COLOURS: dict[str, str] = {}


def colour(name: str) -> str:
    """One colour per backend:variant across every plot of a site."""
    if name not in _COLOURS:
        _COLOURS[name] = _PALETTE[len(_COLOURS) % len(_PALETTE)]
    return _COLOURS[name]


def label(r: dict) -> str:
    c = r["case"]
    return f"{c['backend']}:{c['variant']}"


def _by_task(records) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (task_rank(r["case"]["task"]), label(r), r["case"]["num_envs"])):
        out[r["case"]["task"]].append(r)
    return out


def scaling_plot(task: str, recs: list[dict], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines: dict[str, list[dict]] = defaultdict(list)
    for r in recs:
        lines[label(r)].append(r)
    for name, rs in sorted(lines.items()):
        rs.sort(key=lambda r: r["case"]["num_envs"])
        x = [r["case"]["num_envs"] for r in rs]
        s = [r["summary"]["env_steps_per_s"] for r in rs]
        ax.plot(x, [v["median"] for v in s], marker="o", label=name, color=colour(name))
        ax.fill_between(x, [v["ci_low"] for v in s], [v["ci_high"] for v in s], alpha=0.2, color=colour(name))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("num_envs")
    ax.set_ylabel("env steps/s (median, 95% band)")
    ax.set_title(f"{task}: throughput scaling")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def comparison_plot(recs: list[dict], num_envs: int, path: Path) -> bool:
    rows = [r for r in recs if r["case"]["num_envs"] == num_envs]
    if not rows:
        return False
    plt = _plt()
    rows.sort(key=lambda r: (task_rank(r["case"]["task"]), label(r)))
    names = [f"{r['case']['task']} / {label(r)}" for r in rows]
    med = [r["summary"]["env_steps_per_s"]["median"] for r in rows]
    err = [
        [m - r["summary"]["env_steps_per_s"]["ci_low"] for m, r in zip(med, rows)],
        [r["summary"]["env_steps_per_s"]["ci_high"] - m for m, r in zip(med, rows)],
    ]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.5))
    ax.barh(names, med, xerr=err, color="tab:blue", alpha=0.8)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel(f"env steps/s at {num_envs} envs (median, 95% interval)")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def ttr_plot(task: str, recs: list[dict], path: Path) -> None:
    plt = _plt()
    names = [f"{label(r)} / {r['case']['trainer']}" for r in recs]
    t = [r["summary"]["time_to_threshold_s"] for r in recs]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(recs) + 1.5))
    ax.barh(names, [v["iqm"] for v in t], xerr=[[v["iqm"] - v["ci_low"] for v in t], [v["ci_high"] - v["iqm"] for v in t]], color="tab:green", alpha=0.8)
    ax.invert_yaxis()
    ax.set_xlabel(f"wall-clock s to eval return >= {recs[0]['case']['threshold']:g} (IQM over seeds, 95% interval)")
    ax.set_title(f"{task}: PPO time-to-reward")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def history_series(records: list[dict], key: str) -> dict[str, list[tuple[str, float, dict]]]:
    """case key -> [(x label, value, record)] over time; x is the commit (short sha) or the version of
    the backend's library, depending on `key` ("commit" or "version")."""
    out: dict[str, list[tuple[str, float, dict]]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r["created_utc"]):
        if r["status"] != "ok" or r["measurement_mode"] != THROUGHPUT:
            continue
        if key == "commit":
            x = (r["where"]["git"].get("sha") or "unknown")[:8]
        else:
            lib = BACKEND_LIBRARY.get(r["case"]["backend"], r["case"]["backend"])
            x = f"{lib} {r['where']['packages'].get(lib) or '?'}"
        out[r["case_key"]].append((x, r["summary"]["env_steps_per_s"]["median"], r))
    return {k: v for k, v in out.items() if len({x for x, _, _ in v}) > 1}


def history_plot(series: dict[str, list[tuple[str, float, dict]]], title: str, path: Path, by_version: bool = False) -> None:
    """One panel per x axis: commits share one; with by_version, each library gets its own panel
    with its releases in release order."""
    from gpuenv.history.asv_import import _version_key

    panels: dict[str, dict] = defaultdict(dict)
    for key, pts in series.items():
        panels[pts[0][0].rsplit(" ", 1)[0] if by_version else "commits"][key] = pts
    plt = _plt()
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 3.6 * len(panels)), squeeze=False)
    for ax, (panel, group) in zip(axes[:, 0], sorted(panels.items())):
        xs = list(dict.fromkeys(x for pts in group.values() for x, _, _ in pts))  # commits: time order
        if by_version:
            xs.sort(key=lambda x: _version_key(x.rsplit(" ", 1)[-1]))
        for key, pts in sorted(group.items()):
            at = sorted({xs.index(x) for x, _, _ in pts})
            ys = [[v for x, v, _ in pts if xs.index(x) == i] for i in at]
            ax.plot(at, [sum(y) / len(y) for y in ys], marker="o", label=key, color=colour(key))
        ax.set_xticks(range(len(xs)), xs, rotation=20, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("env steps/s (median)")
        ax.set_title(f"{title}: {panel}" if by_version else title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def decision_rows(records: list[dict]) -> list[tuple[str, str, int, float, float, float]]:
    """(task, backend, best num_envs, steps/s, seconds to 10M, seconds to 1B) per task x backend."""
    best: dict[tuple[str, str], dict] = {}
    for r in records:
        k = (r["case"]["task"], label(r))
        if k not in best or r["summary"]["env_steps_per_s"]["median"] > best[k]["summary"]["env_steps_per_s"]["median"]:
            best[k] = r
    rows = []
    for (task, name), r in sorted(best.items(), key=lambda kv: (task_rank(kv[0][0]), kv[0][1])):
        rate = r["summary"]["env_steps_per_s"]["median"]
        rows.append((task, name, r["case"]["num_envs"], rate, 1e7 / rate, 1e9 / rate))
    return rows


def duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def _table(head: list[str], rows: list[list[str]], cls: str) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>'


CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
td:first-child,td:nth-child(2),th{text-align:left}img{max-width:100%;border:1px solid #eee}h2{border-bottom:1px solid #ddd}
.note{color:#666;font-size:13px}"""


def build(records: list[dict], out: Path, num_envs: int | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted({label(r) for r in records}):
        colour(name)
    tp_all = [r for r in records if r["measurement_mode"] == THROUGHPUT and r["status"] == "ok"]
    tp = list(latest(tp_all).values())
    ttr = [r for r in latest([r for r in records if r["measurement_mode"] == TIME_TO_REWARD]).values()]
    machines = sorted({f"{r['where']['machine'].get('cpu_model')} ({r['where']['machine'].get('cpu_logical')} cores), GPU: "
                       + ("; ".join(g.get("name", "?") for g in r["where"]["machine"].get("gpus", [])) or "none") for r in records})
    parts = [f"<h1>gpuenv results</h1><p class='note'>{len(records)} records; built {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. "
             f"Machines: {html.escape('; '.join(machines))}. Latest record per case unless a history plot says otherwise.</p>"]

    if tp:
        parts.append("<h2 id='scaling'>Throughput scaling</h2>")
        for task, recs in _by_task(tp).items():
            name = f"scaling-{task}.png"
            scaling_plot(task, recs, out / name)
            parts.append(f"<h3>{html.escape(task)}</h3><img class='plot' src='{name}' alt='{task} scaling'>")
        sizes = sorted({r["case"]["num_envs"] for r in tp}, key=lambda n: (-sum(r["case"]["num_envs"] == n for r in tp), n))
        n = num_envs or sizes[0]
        parts.append(f"<h2 id='comparison'>Backends at {n} envs</h2>")
        if comparison_plot(tp, n, out / "comparison.png"):
            parts.append("<img class='plot' src='comparison.png' alt='backend comparison'>")
        parts.append("<h2 id='decision'>Decision table: wall-clock to 10M / 1B env steps on this machine</h2>"
                     "<p class='note'>At each backend's fastest measured num_envs, random actions, no learning: a floor for what training costs.</p>")
        parts.append(_table(["task", "backend", "best num_envs", "env steps/s", "10M steps", "1B steps"],
                            [[t, b, n_, fmt_rate(r), duration(a), duration(z)] for t, b, n_, r, a, z in decision_rows(tp)], "decision"))
        rows = []
        for r in sorted(tp, key=lambda r: (task_rank(r["case"]["task"]), label(r), r["case"]["num_envs"])):
            s = r["summary"]["env_steps_per_s"]
            rows.append([r["case"]["task"], label(r), r["case"]["num_envs"], fmt_rate(s["median"]), f"{fmt_rate(s['ci_low'])}-{fmt_rate(s['ci_high'])}", r["run_id"]])
        parts.append("<h2 id='throughput-table'>All throughput cases</h2>" + _table(["task", "backend", "envs", "steps/s", "95% interval", "run"], rows, "throughput"))

    if ttr:
        parts.append("<h2 id='ttr'>PPO time-to-reward</h2>")
        by_task: dict[str, list[dict]] = defaultdict(list)
        for r in ttr:
            if r["status"] == "ok":
                by_task[r["case"]["task"]].append(r)
        for task, recs in sorted(by_task.items(), key=lambda kv: task_rank(kv[0])):
            name = f"ttr-{task}.png"
            ttr_plot(task, recs, out / name)
            parts.append(f"<h3>{html.escape(task)}</h3><img class='plot' src='{name}' alt='{task} time to reward'>")
        rows = [[r["case"]["task"], f"{label(r)} / {r['case']['trainer']}", f"{r['summary']['reached']}/{r['summary']['seeds']}",
                 f"{r['summary']['time_to_threshold_s']['iqm']:.1f}", f"{r['summary']['env_steps_to_threshold']['iqm']:.0f}"]
                for r in ttr if r["status"] == "ok"]
        parts.append(_table(["task", "backend / trainer", "reached", "wall s (IQM)", "env steps (IQM)"], rows, "ttr"))

    for key, title in (("commit", "History over gpuenv commits"), ("version", "History over library versions")):
        series = history_series(tp_all, key)
        parts.append(f"<h2 id='history-{key}'>{title}</h2>")
        if series:
            name = f"history-{key}.png"
            history_plot(series, title, out / name, by_version=key == "version")
            parts.append(f"<img class='plot' src='{name}' alt='{title}'>")
        else:
            parts.append("<p class='note'>Not enough history yet: a case needs records from two different "
                         f"{'commits' if key == 'commit' else 'library versions'}.</p>")

    page = f"<!doctype html><html><head><meta charset='utf-8'><title>gpuenv results</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>"
    index = out / "index.html"
    index.write_text(page)
    return index

"""Formatting shared by every table, page and message: rates, durations, labels, colours, HTML cells, file-name slugs. A leaf."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from gpuenv import escape


def fmt_rate(x: float) -> str:
    if x >= 1e9:
        return f"{x / 1e9:.2f}B"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:,.0f}"


def fmt_s(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


# matplotlib's tab20 (its ten dark shades, then the ten light ones), Dark2, Paired and Set3, then Set1 and
# tab20b's darker shades, as hex, which matplotlib and plotly both read: 63 distinct colours, more than
# gpuenv's 46 backend:variants (the site assigns them in the registry's order, so a backend keeps its
# colour across figures and sites).
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
            "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
            "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#b15928", "#6a3d9a", "#fb9a99",
            "#b2df8a", "#cab2d6", "#fdbf6f", "#a6cee3", "#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
            "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f", "#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#a65628",
            "#f781bf", "#999999", "#ffff33", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#8ca252",
            "#bd9e39", "#ad494a", "#a55194"]
_COLOURS: dict[str, str] = {}


def time_span(times: list[str]) -> str:
    """ISO-8601 UTC times as '2026-12-04 04:44 to 04:45 UTC' (first to last, to the minute)."""
    start, end = (t.replace("T", " ")[:16] for t in (min(times), max(times)))
    if start == end:
        return f"{start} UTC"
    return f"{start} to {end[11:] if end[:10] == start[:10] else end} UTC"


def colour(name: str) -> str:
    """One colour per backend:variant across every plot of a site."""
    if name not in _COLOURS:
        _COLOURS[name] = _PALETTE[len(_COLOURS) % len(_PALETTE)]
    return _COLOURS[name]


def curves(records: list[Any]) -> list[tuple[str, str, int, list[Any]]]:
    """One curve per backend:variant and run, so points of two runs never join: (backend:variant, its
    legend name, with the run where that backend has several, which of its runs it is (0: the first),
    its records by num_envs). Every plot over num_envs draws these (the PNGs and the interactive figures)."""
    lines: dict[tuple[str, str], list[Any]] = {}
    for r in records:
        lines.setdefault((r.case.label, r.run_id), []).append(r)
    runs_of: dict[str, list[str]] = {}
    for label, run in sorted(lines):
        runs_of.setdefault(label, []).append(run)
    return [(label, label if len(runs_of[label]) == 1 else f"{label} (run {run})", runs_of[label].index(run),
             sorted(rs, key=lambda r: r.case.num_envs)) for (label, run), rs in sorted(lines.items())]


def html_table(head: list[str], rows: list[list[Any]], cls: str) -> str:
    h = "".join(f"<th>{attr(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{attr(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>'


attr = escape.html  # a value for an HTML attribute or text: every record value in a page goes through it


def slug(value: Any) -> str:
    """A file-name-safe form of a record value; a value that needed changing gets a short hash so two
    values never share a file."""
    text = str(value)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip(".-")[:60] or "x"
    return safe if safe == text else f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"

"""How often does `gpuenv ab` find a planted slowdown, and how often does an A/A raise a false alarm, on
this machine? A benchmark of the verdicts, run by hand and by the nightly workflow; never a test (what a
real run's verdict is depends on the machine's noise: issue 48).

    python tools/ab_power.py [--by 0.05 --by 0.15 --by 0.30] [--repeats 3] [--blocks 8] [--out DIR]

Each repeat runs `gpuenv ab` A/A (this checkout against itself) and, for each --by, this checkout against
a copy with every step of one backend planted --by slower (tools/plant_slowdown.py), on a small suite of
that backend and an untouched one. It prints, per planted change, the share of planted cases called a
regression (detection), the share of untouched cases called a change (false alarms), the ratios'
interval widths, and writes every run's `ab --json` and a summary JSON with the machine into --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from plant_slowdown import plant  # noqa: E402

# EnvPool's and Gymnasium's CartPole and HalfCheetah at 8 envs: what issue 52 measured, seconds a case
SUITE = """description = "tools/ab_power.py: the planted backend and an untouched one"
[measure]
processes = 1
values = 3
warmups = 1
min_time_s = 0.2
chunk_steps = 10
timeout_s = 300
[[matrix]]
backends = ["{planted}", "{untouched}"]
tasks = ["cartpole", "halfcheetah"]
num_envs = [8]
"""
CHANGED = ("regression", "improvement")


def run_ab(b_side: str, suite: Path, blocks: int, threshold: float, out: Path) -> dict:
    cmd = [sys.executable, "-m", "gpuenv", "ab", ".", b_side, "--suite", str(suite), "--blocks", str(blocks),
           "--threshold", str(threshold), "--out", str(out), "--json"]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=7200)
    if r.returncode not in (0, 1):
        raise SystemExit(f"gpuenv ab exited {r.returncode}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    doc = json.loads(r.stdout)
    doc["wall_s"] = round(time.monotonic() - t0, 1)
    return doc


def tally(docs: list[dict], planted_backend: str) -> dict:
    """Labels of the planted backend's cases and of the untouched ones, over runs."""
    hit = miss = alarms = quiet = 0
    widths = []
    for doc in docs:
        for v in doc["verdicts"]:
            if v.get("ci_low") and v.get("ci_high"):
                widths.append(math.log(v["ci_high"] / v["ci_low"]) / 2)
            if v["case_key"].startswith(planted_backend.replace(":", "-") + "-") and doc["planted_by"]:
                hit, miss = hit + (v["label"] == "regression"), miss + (v["label"] != "regression")
            else:
                alarms, quiet = alarms + (v["label"] in CHANGED), quiet + (v["label"] not in CHANGED)
    widths.sort()
    return {"planted_cases": hit + miss, "found": hit, "untouched_cases": alarms + quiet, "false_alarms": alarms,
            "median_half_width_log": widths[len(widths) // 2] if widths else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--by", type=float, action="append", help="planted slowdowns (fractions; default 0.05, 0.15, 0.30)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--threshold", type=float, default=0.05)
    p.add_argument("--planted", default="envpool:sync", help="the backend:variant slowed down")
    p.add_argument("--untouched", default="gymnasium:dummy", help="the backend:variant left alone")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "local" / "ab-power")
    a = p.parse_args(argv)
    changes = a.by or [0.05, 0.15, 0.30]
    if a.repeats < 1 or any(not 0 < b < 1 for b in changes):
        p.error("--repeats >= 1 and each --by a fraction in (0, 1)")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = a.out / stamp
    out.mkdir(parents=True, exist_ok=True)
    suite = out / "ab-power.toml"
    suite.write_text(SUITE.format(planted=a.planted, untouched=a.untouched))
    rows: dict[str, list[dict]] = {"A/A": []} | {f"{100 * b:g}% slower": [] for b in changes}
    with tempfile.TemporaryDirectory(prefix="gpuenv-ab-power-") as tmp:
        copies = {b: plant(Path(tmp) / f"by{b}", a.planted.split(":")[0], b) for b in changes}
        for rep in range(a.repeats):  # the kinds interleaved within each repeat: the machine's drift hits them alike
            for name, b in [("A/A", None), *((f"{100 * b:g}% slower", b) for b in changes)]:
                doc = run_ab("." if b is None else str(copies[b]), suite, a.blocks, a.threshold, out / "ab")
                doc["planted_by"] = b
                (out / f"{name.replace('/', '').replace('% slower', 'pct')}-{rep}.json").write_text(json.dumps(doc, indent=1))
                rows[name].append(doc)
                print(f"repeat {rep + 1}/{a.repeats}, {name}: {', '.join(v['case_key'] + ' ' + v['label'] for v in doc['verdicts'])} "
                      f"({doc['wall_s']:.0f} s)", flush=True)
    machine = rows["A/A"][0]["machine"]
    summary = {"machine": machine, "blocks": a.blocks, "threshold": a.threshold, "repeats": a.repeats, "planted": a.planted,
               "untouched": a.untouched, "suite": SUITE.format(planted=a.planted, untouched=a.untouched),
               "kinds": {name: tally(docs, a.planted) for name, docs in rows.items()},
               "wall_s": sum(d["wall_s"] for docs in rows.values() for d in docs)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"\nmachine: {machine}; {a.blocks} blocks, threshold {100 * a.threshold:g}%, {a.repeats} repeat(s)")
    print("| change | planted cases found | untouched cases called a change | median half-width of B/A (log) |")
    print("|---|---|---|---|")
    for name, t in summary["kinds"].items():
        found = f"{t['found']} of {t['planted_cases']}" if t["planted_cases"] else "-"
        width = f"{t['median_half_width_log']:.3f}" if t["median_half_width_log"] is not None else "-"
        print(f"| {name} | {found} | {t['false_alarms']} of {t['untouched_cases']} | {width} |")
    print(f"records and summary: {out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())

"""Results history: compare, change points, the report site (opened in headless Chromium)."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from gpuenv.history.changepoints import detect
from gpuenv.history.compare import NOISE, SAME, compare_runs
from gpuenv.history.load import load_records
from gpuenv.history.regress import change_points
from gpuenv.results import schema
from gpuenv.results.store import prepare_dir, write_record

PUBLISHED = ROOT / "results" / "published" / "20261202T140237Z-4d17bd"


def published() -> list[dict]:
    return [schema.load(p) for p in sorted(PUBLISHED.glob("*.json"))]  # v1 on disk, migrated to v2


def derive(records: list[dict], out: Path, run_id: str, factor: float = 1.0, **machine) -> Path:
    """A record set derived from real records: every throughput value scaled by `factor`."""
    d = prepare_dir(out / run_id)
    for r in records:
        r = copy.deepcopy(r)
        r["run_id"] = run_id
        r["created_utc"] = "2026-12-03T00:00:00+00:00"
        r["where"]["machine"].update(machine)
        for p in r["processes"]:
            p["env_steps_per_s"] = [v * factor for v in p.get("env_steps_per_s", [])]
        if r["status"] == "ok":
            for k in ("median", "ci_low", "ci_high"):
                r["summary"]["env_steps_per_s"][k] *= factor
        write_record(d, r)
    return d


def records_of(*paths: Path) -> list:
    """Records as every reader gets them (typed, each once)."""
    records, _ = load_records(list(paths))
    return records


def test_compare_same_run_has_no_detectable_change():
    recs = records_of(PUBLISHED)
    c = compare_runs(recs, recs)
    assert len(c.rows) == sum(r.status == "ok" for r in recs) > 5
    assert {r.verdict for r in c.rows} == {SAME} and not c.regressed
    assert all(r.ratio == pytest.approx(1.0) for r in c.rows)


def test_compare_flags_a_planted_20_percent_slowdown(cli, tmp_path):
    slow = derive(published(), tmp_path, "slow", factor=0.8)
    c = compare_runs(records_of(PUBLISHED), records_of(slow))
    assert all(r.change_pct == pytest.approx(-0.2, abs=0.02) for r in c.rows)
    # slower where the interval excludes 1 (most cases; a one-process case's interval may be too wide),
    # and each of those a regression past the 10% gate; never faster
    slower = [r for r in c.rows if r.verdict == "slower"]
    assert len(slower) >= len(c.rows) // 2 and c.regressed == slower
    assert {r.verdict for r in c.rows} <= {"slower", SAME}
    # A planted 20% slowdown under a 30% gate is reported but does not fail.
    assert not compare_runs(records_of(PUBLISHED), records_of(slow), 0.3).regressed
    r = cli("compare", str(PUBLISHED), str(slow))  # the command: its table, the regression line, exit 1
    assert r.returncode == 1, r.stdout + r.stderr
    assert "slower (REGRESSION)" in r.stdout and "regression:" in r.stderr


def aa_run(records: list[dict], out: Path, spread: float) -> Path:
    """An A/A `gpuenv ab` run derived from real records: both sides the same code, each process's
    values scaled by exp(+-spread) in turn (a machine whose processes move that much)."""
    import math

    d = out / "aa"
    for side in ("A", "B"):
        for r in records:
            r = copy.deepcopy(r)
            r["run_id"] = f"aa-{side}"
            r["tags"] = {"ab": "aa-test", "aa": True, "side": side, "side_label": "HEAD (0123456789)", "paired_run": "x"}
            for i, p in enumerate(r["processes"]):
                f = math.exp(spread if (i + (side == "B")) % 2 else -spread)
                p["env_steps_per_s"] = [v * f for v in p.get("env_steps_per_s", [])]
            write_record(prepare_dir(d / side / r["run_id"]), r)
    return d


def test_compare_allows_for_the_machines_measured_noise(cli, tmp_path):
    # the same code measured twice here differs by 8%: compare's intervals (one run each) call that
    # slower; with this machine's A/A calibration (processes moving +-6%) it is within its noise
    recs = [r for r in published() if r["status"] == "ok" and len(r["processes"]) >= 2]
    slow = derive(recs, tmp_path, "slow", factor=0.92)
    old = derive(recs, tmp_path, "old")
    bare = compare_runs(records_of(old), records_of(slow))
    assert any(r.verdict == "slower" for r in bare.rows) and len(bare.uncalibrated) == len(bare.rows)
    aa = aa_run(recs, tmp_path, 0.06)
    c = compare_runs(records_of(old), records_of(slow), calibration=records_of(aa))
    verdicts = [r.verdict for r in c.rows]  # (a case whose own interval spans 1 stays "no detectable change")
    assert set(verdicts) <= {NOISE, SAME} and verdicts.count(NOISE) >= sum(r.verdict == "slower" for r in bare.rows) > 0
    assert not c.regressed and not c.uncalibrated
    noise = next(iter(c.calibrated.values()))
    assert 0.05 < noise.sd_log < 0.2 and noise.ab_id == "aa-test"  # the planted +-6% and the records' own spread
    # half the speed is beyond that noise: a regression
    slower = derive(recs, tmp_path, "slower", factor=0.5)
    big = compare_runs(records_of(old), records_of(slower), calibration=records_of(aa)).rows
    assert sum(r.regressed for r in big) >= 0.8 * len(big)  # (a case whose processes moved +-29% may still hide it)
    r = cli("compare", str(old), str(slow), "--calibration", str(aa))
    assert r.returncode == 0 and "noise allowed: this machine's A/A calibration" in r.stdout, r.stdout + r.stderr
    j = cli("compare", str(old), str(slow), "--calibration", str(aa), "--json")
    doc = json.loads(j.stdout)
    assert j.returncode == 0 and {row["verdict"] for row in doc["rows"]} <= {NOISE, SAME} and not doc["uncalibrated"]
    assert all(v["ab"] == "aa-test" for v in doc["calibrated"].values()) and doc["regressed"] == []
    r = cli("compare", str(old), str(slow))  # none here: it says what it lacks and how to measure it
    assert "no A/A calibration of this machine" in " ".join(r.stdout.split()), r.stdout


def test_compare_refuses_other_hardware_and_says_which_fields(cli, tmp_path):
    other = derive(published(), tmp_path, "other", cpu_model="Some Other CPU")
    r = cli("compare", str(PUBLISHED), str(other))
    assert r.returncode == 2 and "cpu: " in r.stderr and "Some Other CPU" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    ok = cli("compare", str(PUBLISHED), str(other), "--allow-different")
    assert ok.returncode == 0 and "compared across: cpu" in ok.stdout


def test_compare_bad_input_is_clear(cli, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("compare", str(empty), str(PUBLISHED))
    assert r.returncode == 2 and "no result records in this directory" in r.stderr
    mixed = derive(published()[:3], tmp_path, "mixed")
    (mixed / "broken.json").write_text('{"schema": "gpuenv.result", "schema_ver')
    future = json.loads(next(mixed.glob("*.json")).read_text())
    future["schema_version"] = 99
    (mixed / "future.json").write_text(json.dumps(future))
    r = cli("compare", str(PUBLISHED), str(mixed))
    assert r.returncode == 0, r.stderr
    assert "broken.json: corrupt result file" in r.stderr and "version 99 is not supported" in r.stderr
    assert "3 cases:" in r.stdout and "only in OLD:" in r.stdout
    before = (mixed / "broken.json").read_text()
    assert (mixed / "broken.json").read_text() == before  # nothing is rewritten
    r = cli("compare", str(PUBLISHED), str(tmp_path / "nosuch"))
    assert r.returncode == 2 and "no such file or directory" in r.stderr


# --- change points --------------------------------------------------------------------------------


def test_change_points_find_a_planted_step_and_nothing_in_noise():
    rng = np.random.default_rng(7)
    flat = 1000 * (1 + 0.08 * rng.standard_normal(40))
    assert detect(flat) == []
    step = np.r_[1000 * (1 + 0.08 * rng.standard_normal(20)), 800 * (1 + 0.08 * rng.standard_normal(20))]
    (cp,) = detect(step)
    assert abs(cp.index - 20) <= 1 and cp.change == pytest.approx(-0.2, abs=0.05)
    # The naive rule (flag any point 10% off the previous one) would have raised many alarms here.
    assert np.sum(np.abs(np.diff(flat)) / 1000 > 0.1) > 3


def test_a_history_too_short_for_the_test_shows_no_change_not_a_lucky_one():
    """A permutation test on n points cannot give p below 2 / C(n, n/2): under 10 points no change is
    claimed, whatever the values. Before shuffles that reproduce the split counted as ties, a perfect
    9-point step came out 'significant' in 9 of 20 seeds through rounding."""
    from gpuenv.history.changepoints import min_points

    assert min_points() == 10 and min_points(alpha=0.05) == 8
    rng = np.random.default_rng(0)
    for n in (6, 8, 9):
        for seed in range(20):
            step = np.r_[1000 * (1 + 0.01 * rng.standard_normal(n // 2)), 700 * (1 + 0.01 * rng.standard_normal(n - n // 2))]
            assert detect(step, seed=seed) == [], (n, seed)
    found = [bool(detect(np.r_[1000 * (1 + 0.01 * rng.standard_normal(6)), 700 * (1 + 0.01 * rng.standard_normal(6))], seed=s))
             for s in range(20)]
    assert sum(found) >= 18  # 12 points: a clean 30% step is found


def history(tmp_path: Path, drop_at: int | None, n: int = 24, sha_after: str | None = None, ci: float = 0.03) -> Path:
    base = next(r for r in published() if r["case_key"] == "envpool-sync-halfcheetah-n8")
    rng = np.random.default_rng(3)
    out = tmp_path / "history"
    for i in range(n):
        r = copy.deepcopy(base)
        factor = (0.8 if drop_at is not None and i >= drop_at else 1.0) * (1 + 0.05 * rng.standard_normal())
        r["run_id"] = f"run{i:02d}"
        r["created_utc"] = f"2026-11-{i + 1:02d}T00:00:00+00:00"
        r["where"]["packages"]["envpool"] = "1.2.5" if drop_at is not None and i >= drop_at else "0.8.4"
        if sha_after and drop_at is not None and i >= drop_at:
            r["where"]["git"]["sha"] = sha_after
        for p in r["processes"]:
            p["env_steps_per_s"] = [v * factor for v in p["env_steps_per_s"]]
        for k in ("median", "ci_low", "ci_high"):
            r["summary"]["env_steps_per_s"][k] *= factor
        if ci:  # each point's own 95% interval, +-ci of its median (the base record's own may be wide)
            rate = r["summary"]["env_steps_per_s"]
            rate["ci_low"], rate["ci_high"] = rate["median"] * (1 - ci), rate["median"] * (1 + ci)
        write_record(prepare_dir(out / r["run_id"]), r)
    return out


def test_regressions_find_the_planted_change_and_its_versions(tmp_path):
    search = change_points(records_of(history(tmp_path, drop_at=12)))
    (found,) = search.found
    assert search.histories == 1 and found.regression and search.blind_lines() == []
    case, at, _, _, change, kind, what = found.row()
    assert case.startswith("envpool-sync-halfcheetah-n8@") and at == "#12 run12" and kind == "regression"
    assert "envpool 0.8.4->1.2.5" in what and change.startswith("-")
    assert "machine speed" not in what  # no speed recorded: nothing said of it
    from test_faults import fp_dict

    # the same drop where the machine also slowed down: said beside the versions
    slow_machine = history(tmp_path / "slowvm", drop_at=12)
    for p in slow_machine.rglob("*.json"):
        r = json.loads(p.read_text())
        r["where"]["machine"]["fingerprint"] = fp_dict(16.0 * (0.7 if int(r["run_id"][3:]) >= 12 else 1.0))
        p.write_text(json.dumps(r))
    (moved,) = change_points(records_of(slow_machine)).found
    assert "machine speed" in moved.row()[6] and "the change may be the machine's" in moved.row()[6]
    flat = change_points(records_of(history(tmp_path / "flat", drop_at=None)))
    assert flat.found == [] and flat.histories == 1 and flat.blind_lines() == []


def test_a_change_the_points_own_intervals_do_not_confirm_is_suspicious_not_a_regression(tmp_path, cli):
    """The same planted 20% drop, in points whose own 95% intervals are +-30% wide: the search finds
    the step in the headline values, but the points cannot tell the sides apart, so it is labelled
    suspicious: no exit 1, no alarm. With +-3% intervals it is a regression."""
    wide = history(tmp_path / "wide", drop_at=20, ci=0.30)
    (found,) = change_points(records_of(wide)).found
    assert found.separated is False and found.suspicious and not found.regression
    assert found.row()[5] == "suspicious: within the points' own 95% intervals"
    r = cli("regressions", str(wide), "--alert", str(tmp_path / "alert"))
    out = " ".join(r.stdout.split())
    assert r.returncode == 0 and "suspicious:" in out and "0 alarm(s) written" in out, out
    narrow = history(tmp_path / "narrow", drop_at=20, ci=0.03)
    (found,) = change_points(records_of(narrow)).found
    assert found.separated is True and found.regression and found.row()[5] == "regression"


def test_regressions_alert_on_a_new_regression_with_what_reproduces_it(tmp_path, cli):
    import json

    sha = "abcdef0123456789abcdef0123456789abcdef01"
    fresh = history(tmp_path / "fresh", drop_at=20, sha_after=sha)  # the drop is in the newest 4 of 24 runs
    r = cli("regressions", str(fresh), "--alert", str(tmp_path / "alert"))
    assert r.returncode == 0 and "1 alarm(s) written" in " ".join(r.stdout.split()), r.stdout + r.stderr
    (alarm,) = json.loads((tmp_path / "alert" / "alarms.json").read_text())
    assert alarm["title"] == "gpuenv: envpool-sync-halfcheetah-n8 regressed at run run20"
    body = alarm["body"]
    assert "95% interval" in body and "run `run19`" in body and "run `run20`" in body and "envpool 0.8.4->1.2.5" in body
    assert f"gpuenv ab {sha[:10]}" not in body  # before the drop the commit was the published one's
    assert "gpuenv bench --suite quick --backend envpool:sync --task halfcheetah --num-envs 8" in body
    assert f"{sha[:10]} --suite quick --backend envpool:sync" in body and "gpuenv sweep envpool==0.8.4,1.2.5 --suite quick --backend envpool --task halfcheetah" in body
    summary = (tmp_path / "alert" / "summary.md").read_text()
    assert "## gpuenv regressions: 1 alarm(s)" in summary and alarm["title"] in summary
    # a regression found long ago was alerted on then: no alarm now, the summary still written
    old = history(tmp_path / "old", drop_at=12)
    r = cli("regressions", str(old), "--alert", str(tmp_path / "quiet"))
    assert r.returncode == 0 and json.loads((tmp_path / "quiet" / "alarms.json").read_text()) == []
    assert "1 change point(s)" in (tmp_path / "quiet" / "summary.md").read_text()


def test_regressions_say_what_they_could_not_see(tmp_path, cli):
    """Histories too short to show a change, and cases that stopped while their suite went on."""
    short = change_points(records_of(history(tmp_path / "short", drop_at=None, n=5)))
    assert short.found == [] and [n for _, n in short.short] == [5]
    (line,) = short.blind_lines()
    assert "1 of 1 case histories have fewer than 10 points (median 5, longest 5): no change can be found" in line

    # one backend and task in 12 runs at three sizes: one all along, one that stops after run 5, one
    # that fails from run 8; and another backend's case in runs 0-1 only: the later runs never tried
    # that backend, so it did not stop
    out = tmp_path / "stops"
    by_key = {r["case_key"]: r for r in published()}
    base = [by_key[f"envpool-sync-cartpole-n{n}"] for n in (1, 8, 64)] + [by_key["gymnasium-subproc-pong-n8"]]
    for i in range(12):
        for j, b in enumerate(base):
            if (j == 1 and i > 5) or (j == 3 and i > 1):
                continue
            r = copy.deepcopy(b)
            r["run_id"], r["created_utc"] = f"run{i:02d}", f"2026-11-{i + 1:02d}T00:00:0{j}+00:00"
            if j == 2 and i >= 8:
                r["status"], r["summary"] = "failed", None
                r["failure"] = {"kind": "crashed", "reason": "ImportError: the new release broke it", "process": 0, "stderr_tail": ""}
            write_record(prepare_dir(out / r["run_id"]), r)
    search = change_points(records_of(out))
    stopped = {s.case.split(":", 1)[1]: s for s in search.stopped}
    assert set(stopped) == {base[1]["case_key"], base[2]["case_key"]}
    assert stopped[base[1]["case_key"]].last_run == "run05" and stopped[base[1]["case_key"]].later_runs == 6
    assert stopped[base[1]["case_key"]].newest_failure is None
    assert stopped[base[2]["case_key"]].later_runs == 4 and "crashed: ImportError" in (stopped[base[2]["case_key"]].newest_failure or "")
    r = cli("regressions", str(out))  # the command says it under the table's count
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and f"stopped: env-step-throughput:{base[1]['case_key']} was last measured in run run05" in text
    assert "measured its backend and task without it" in text
    assert "its newest record failed: crashed: ImportError: the new release broke it" in text



# --- report site ----------------------------------------------------------------------------------


def test_report_site_has_plots_and_tables_and_opens_in_chromium(cli, tmp_path):
    hist = history(tmp_path, drop_at=12, n=6)
    site = tmp_path / "site"
    r = cli("report", str(PUBLISHED), str(hist), "--out", str(site))
    assert r.returncode == 0, r.stderr
    page = (site / "index.html").read_text()
    for png in ("scaling-cartpole.png", "scaling-halfcheetah.png", "comparison.png", "history-version.png", "history-commit.png"):
        if png == "history-commit.png":
            continue  # all records come from one commit: the page says so instead
        assert f"src='{png}'" in page and (site / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    assert "Not enough history yet" in page  # over commits
    assert "<table class=\"decision\">" in page and "1B steps" in page
    assert not re.search(r"(src|href)=['\"]https?:", page) and "<script src='plotly.min.js'>" in page  # offline: nothing fetched
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("no chromium here (Debian package `chromium`; .ci/run installs it)")
    shot = tmp_path / "site.png"
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", (site / "index.html").as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert "scaling-halfcheetah.png" in dom.stdout and "decision" in dom.stdout
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,1600",
         f"--screenshot={shot}", (site / "index.html").as_uri()],
        capture_output=True, timeout=120,
    )
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (1600, 1200) and pixels.std() > 0.05  # a rendered page, not a blank one
    keep = ROOT / "results" / "local"  # the screenshot stays for a person to look at (ignored by git)
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "report-screenshot.png")


def test_asv_import_then_publish_draws_the_imported_history(cli, tmp_path):
    pytest.importorskip("asv", reason="asv not installed (pip install 'gpuenv[history]')")
    results = tmp_path / "asv" / "results"
    r = cli("asv-import", str(PUBLISHED), "--results-dir", str(results))
    assert r.returncode == 0, r.stderr
    (machine,) = [p for p in results.iterdir() if p.is_dir()]
    info = json.loads((machine / "machine.json").read_text())
    assert info["gpu"] == "none" and info["driver"] == "none"  # GPU and driver are machine keys
    (result,) = machine.glob("*-existing-gpuenv.json")
    data = json.loads(result.read_text())
    assert isinstance(data["date"], int) and data["commit_hash"].startswith("0658fc6")
    assert data["params"]["envpool"] == "1.2.5" and data["params"]["brax"] == "0.14.2"  # versions as params
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(results_dir=str(results), html_dir=str(tmp_path / "asv" / "html"), repo=str(ROOT))
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    pub = subprocess.run(
        [str(Path(__import__("sys").executable).parent / "asv"), "publish", "--config", str(tmp_path / "asv.conf.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert pub.returncode == 0, pub.stdout + pub.stderr
    html = tmp_path / "asv" / "html"
    graphs = {p.name for p in (html / "graphs" / "summary").glob("*.json")}
    assert "gpuenv_records.throughput_halfcheetah.track_seconds_per_million_env_steps.json" in graphs
    # Smaller is better in asv: throughput is stored as seconds per million env steps.
    series = json.loads((html / "graphs" / "summary" / "gpuenv_records.throughput_cartpole.track_seconds_per_million_env_steps.json").read_text())
    assert series and all(v is None or v > 0 for _, v in series)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("no chromium here")
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", (html / "index.html").as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    # asv's UI takes jQuery/flot/bootstrap from CDNs: offline it shows its own error page, online
    # the graphs. Either way the page asv published is what opened.
    assert "airspeed velocity" in dom.stdout


def test_pytest_benchmark_over_the_synchronised_unit_and_its_export(cli, tmp_path):
    pytest.importorskip("pytest_benchmark", reason="pytest-benchmark not installed (pip install 'gpuenv[history]')")
    out = tmp_path / "pb.json"
    r = subprocess.run(
        [__import__("sys").executable, "-m", "pytest", "bench/pytest", "-q", "-p", "no:cacheprovider",
         "-k", "gymnasium-dummy-cartpole", f"--benchmark-json={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        # a plain pytest run, as `make bench-pytest` is: not one of `make test`'s xdist workers (pytest-benchmark
        # turns itself off where PYTEST_XDIST_WORKER is set)
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (b,) = json.loads(out.read_text())["benchmarks"]
    assert b["stats"]["rounds"] == 5 and b["extra_info"]["env_steps_per_s"] > 0
    gab = tmp_path / "gab.json"
    assert cli("export-gab", str(out), str(gab)).returncode == 0
    (row,) = json.loads(gab.read_text())
    assert row["unit"] == "env steps/s" and row["name"] == "gymnasium-dummy-cartpole-n8"
    assert row["value"] == pytest.approx(b["extra_info"]["env_steps_per_s"], rel=1e-3)
    bad = cli("export-gab", str(tmp_path / "nosuch.json"), str(gab))
    assert bad.returncode == 2 and "not a pytest-benchmark JSON file" in bad.stderr


def test_asv_over_library_releases_uses_a_release_timeline(cli, tmp_path):
    pytest.importorskip("asv", reason="asv not installed (pip install 'gpuenv[history]')")
    hist = history(tmp_path, drop_at=3, n=6)  # envpool 0.8.4 for three runs, then 1.2.5
    results = tmp_path / "asv" / "results"
    r = cli("asv-import", str(hist), "--results-dir", str(results), "--by-version", "envpool")
    assert r.returncode == 0, r.stderr
    timeline = tmp_path / "asv" / "timeline-envpool"
    tags = subprocess.run(["git", "-C", str(timeline), "tag"], capture_output=True, text=True).stdout.split()
    assert tags == ["envpool-0.8.4", "envpool-1.2.5"]
    conf = tmp_path / "asv" / "asv-envpool.conf.json"
    pub = subprocess.run([str(Path(__import__("sys").executable).parent / "asv"), "publish", "--config", str(conf)],
                         capture_output=True, text=True, timeout=300)
    assert pub.returncode == 0, pub.stdout + pub.stderr
    (graph,) = (tmp_path / "asv" / "html-envpool" / "graphs" / "summary").glob("*halfcheetah*.json")
    points = json.loads(graph.read_text())
    assert len(points) == 2  # one point per envpool release, in release order


def test_regressions_over_library_versions(cli, tmp_path):
    hist = history(tmp_path, drop_at=12)  # envpool 0.8.4 then 1.2.5, with the drop at the switch
    r = cli("regressions", str(hist), "--by-version", "envpool")
    assert r.returncode == 0, r.stderr
    assert "1 change point(s)" in r.stdout and "envpool 0.8.4->1.2.5" in r.stdout


def test_compare_two_real_runs_of_this_machine(cli):
    runs = sorted((ROOT / "results" / "published" / "sweeps").glob("*/brax-0.14.2"))
    if len(runs) < 2:
        pytest.skip("needs the two published brax sweeps")
    r = cli("compare", str(runs[0]), str(runs[1]), "--threshold", "0.5")
    assert r.returncode == 0, r.stderr
    assert "brax-generalized-halfcheetah-n64" in r.stdout and "1 cases:" in r.stdout


# --- memory: lower is better, in compare and in change points ------------------------------------


def with_memory(records: list[dict], out: Path, run_id: str, mib: float) -> Path:
    """Real records with a host memory peak planted in each process (about `mib`, a little spread)."""
    d = prepare_dir(out / run_id)
    for r in records:
        r = copy.deepcopy(r)
        r["run_id"] = run_id
        for i, p in enumerate(r["processes"]):
            p.setdefault("resources", {})["memory"] = {"tree_pss_peak_mib": mib * (1 + 0.01 * i), "device_peak_mib": None}
        write_record(d, r)
    return d


def test_compare_flags_a_memory_regression_like_a_slowdown(cli, tmp_path):
    recs = [r for r in published() if r["status"] == "ok"][:3]
    old = with_memory(recs, tmp_path, "old", 200.0)
    same = compare_runs(records_of(old), records_of(with_memory(recs, tmp_path, "same", 201.0)))
    assert len(same.mem_rows) == 3 and {m.verdict for m in same.mem_rows} == {SAME} and not same.mem_regressed
    lean = compare_runs(records_of(old), records_of(with_memory(recs, tmp_path, "lean", 150.0)))
    assert {m.verdict for m in lean.mem_rows} == {"less memory"} and not lean.mem_regressed
    r = cli("compare", str(old), str(with_memory(recs, tmp_path, "fat", 260.0)))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "more memory (REGRESSION)" in r.stdout and "host memory MiB" in r.stdout
    assert f"regression: {recs[0]['case_key']} uses 30% more host memory (202 -> 263 MiB)" in " ".join(r.stderr.split())
    assert "0 regressed by more than 10%" in r.stdout  # the speed did not change: only memory grew


def test_regressions_find_a_memory_step_in_a_case_history(cli, tmp_path):
    base = next(r for r in published() if r["case_key"] == "envpool-sync-halfcheetah-n8")
    rng = np.random.default_rng(5)
    out = tmp_path / "mem-history"
    for i in range(24):
        r = copy.deepcopy(base)
        r["run_id"] = f"run{i:02d}"
        r["created_utc"] = f"2026-11-{i + 1:02d}T00:00:00+00:00"
        mib = (300.0 if i >= 12 else 200.0) * (1 + 0.02 * rng.standard_normal())
        for p in r["processes"]:
            p.setdefault("resources", {})["memory"] = {"tree_pss_peak_mib": mib}
        write_record(prepare_dir(out / r["run_id"]), r)
    res = cli("regressions", str(out))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "1 change point(s) in 2 case histories" in text and "#12 run12" in text  # steps/s: none; memory: one
    assert "200 MiB" in text and "[host" in text
    assert re.search(r"\+(4[5-9]|5[0-5])\.\d% host memory", text), text  # 200 -> 300 MiB
    assert "regression" in text and "improvement" not in text

"""`gpuenv ab A B`: interleaved sides, paired verdicts. The statistics against known values, each
verdict label from planted evidence, and real interleaved runs on the test-only fake backend: an A/A
runs both sides interleaved and its verdicts are the statistics of its records, a planted slowdown's
copy differs, records carry the pairing. No test asserts what label this machine's noise gives a real
run (issue 48): the statistics are tested on synthetic blocks with fixed seeds, and detection and
false-alarm rates are measured by tools/ab_power.py (docs/verdicts.md)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from conftest import ROOT, write_suite

from gpuenv.history import verdicts as vd
from gpuenv.measure import stats

sys.path.insert(0, str(ROOT / "tools"))
from plant_slowdown import plant  # noqa: E402

SUITE = """
[measure]
processes = 1
values = 3
warmups = 0
min_time_s = 0.1
chunk_steps = 5
timeout_s = 120
[[matrix]]
backends = ["fake:ok"]
tasks = ["cartpole", "halfcheetah"]
num_envs = [2]
"""


def test_t_distribution_matches_tables():
    # two-sided p of Student's t and its quantiles, against printed tables
    assert stats.t_quantile(0.975, 7) == pytest.approx(2.3646, abs=1e-4)
    assert stats.t_quantile(0.975, 2) == pytest.approx(4.3027, abs=1e-4)
    assert stats.t_quantile(0.995, 5) == pytest.approx(4.0321, abs=1e-4)
    assert stats.t_sf2(2.0, 5) == pytest.approx(0.10194, abs=1e-5)
    assert stats.t_sf2(1.0, 1) == pytest.approx(0.5, abs=1e-9)
    assert stats.t_sf2(0.0, 9) == pytest.approx(1.0)


def test_paired_ratio_interval_and_p():
    a = [100.0, 110.0, 90.0, 105.0]
    b = [85.0, 95.0, 77.0, 90.0]
    p = stats.paired(a, b)
    logs = [math.log(y / x) for x, y in zip(a, b, strict=True)]
    assert p.ratio == pytest.approx(math.exp(sum(logs) / 4))
    assert p.ci_low < p.ratio < p.ci_high < 1 and p.p < 0.001 and p.n == 4
    # identical sides: ratio 1, p 1; a single pair is refused
    same = stats.paired([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert same.ratio == 1 and same.p == 1
    with pytest.raises(ValueError):
        stats.paired([1.0], [1.0])


def test_benjamini_hochberg_adjusts_in_step_up_order():
    assert stats.benjamini_hochberg([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.05333, 0.05333, 0.2], abs=1e-4)
    assert stats.benjamini_hochberg([]) == []


def _evidence(key, ratio, noise, n=8, higher=True):
    """Pairs with a known ratio B/A and a deterministic spread (alternating +-noise in log space)."""
    a = [1000.0 * (1 + 0.1 * (i % 3)) for i in range(n)]
    b = [x * ratio * math.exp(noise if i % 2 else -noise) for i, x in enumerate(a)]
    return vd.Evidence(key, "env steps/s", higher, a[:n], b[:n])


def test_every_label_from_planted_evidence():
    found = {v.case_key: v for v in vd.decide([
        _evidence("slower", 0.85, 0.01),  # large and tight: regression
        _evidence("faster", 1.20, 0.01),  # improvement
        _evidence("noisy", 0.90, 0.30),  # beyond the threshold, not significant
        _evidence("tiny", 0.98, 0.001),  # significant, within the threshold
        _evidence("same", 1.0, 0.02),  # nothing
        _evidence("short", 0.5, 0.01, n=2),  # two pairs: no verdict
    ], threshold=0.05)}
    assert {k: v.label for k, v in found.items()} == {
        "slower": vd.REGRESSION, "faster": vd.IMPROVEMENT, "noisy": vd.SUSPICIOUS, "tiny": vd.SUSPICIOUS,
        "same": vd.SAME, "short": vd.INSUFFICIENT}
    assert "not significant" in found["noisy"].why and "within 5%" in found["tiny"].why
    assert "1 more" in found["short"].why and found["short"].ratio is None
    assert found["slower"].change == pytest.approx(-0.15, abs=0.01)


def test_lower_is_better_quantities_flip_the_direction():
    # time to reward: B taking 20% longer is a regression
    v = vd.decide([_evidence("ttr", 1.25, 0.01, higher=False)], threshold=0.05)[0]
    assert v.label == vd.REGRESSION and v.change == pytest.approx(-0.2, abs=0.01)


def test_many_cases_are_adjusted_together():
    # the same borderline case alone is a regression; among 40 null cases BH no longer lets it through
    edge = _evidence("edge", 0.90, 0.05, n=5)  # p about 0.009: below 5% alone, not below 5% x 1/41
    alone = vd.decide([edge], threshold=0.05)[0]
    crowd = vd.decide([edge, *[_evidence(f"null{i}", 1.0, 0.05, n=5) for i in range(40)]], threshold=0.05)
    assert alone.label == vd.REGRESSION and alone.q == alone.p
    mixed = next(v for v in crowd if v.case_key == "edge")
    assert mixed.q > mixed.p and mixed.label == vd.SUSPICIOUS


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["HEAD", "no-such-revision-xyz"], "is not a git revision of this repository"),
        (["HEAD", "HEAD", "--blocks", "2"], "give 3 or more paired blocks"),
        (["HEAD", "HEAD", "--threshold", "1.5"], "--threshold must be a fraction"),
        (["HEAD", "tests"], "not a gpuenv checkout"),
        (["HEAD", "HEAD", "--suite", "nosuch"], "unknown suite 'nosuch'"),
        (["envpool==1.2.5", "brax==0.14.2"], "belong to different backends"),
        (["image:", "."], "name the image after image:"),
    ],
)
def test_bad_ab_input_is_one_line_exit_2(cli, args, message):
    r = cli("ab", *args, cwd=ROOT)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def _noisy_blocks(ratio: float, sd: float, n: int, seed: int) -> tuple[list[float], list[float]]:
    """n blocks of an A/B pair on a noisy machine: a shared per-block speed (the VM's drift, up to 2x) and
    each side's own log-normal noise of sd, B slower or faster by `ratio`; fixed seed, no clock."""
    import numpy as np

    rng = np.random.default_rng(seed)
    drift = np.exp(rng.uniform(-0.35, 0.35, n))
    a = 1e5 * drift * np.exp(rng.normal(0, sd, n))
    b = 1e5 * ratio * drift * np.exp(rng.normal(0, sd, n))
    return list(map(float, a)), list(map(float, b))


def test_verdicts_on_synthetic_noisy_blocks_with_fixed_seeds():
    """What the end-to-end runs once asserted on this machine's noise (issue 48), on synthetic blocks instead:
    pairing removes the VM's shared drift, a large slowdown over enough blocks is found, an A/A is quiet,
    and too few blocks say so. The rates on real machines are measured by tools/ab_power.py (docs/verdicts.md)."""
    planted = [vd.Evidence(f"planted{s}", "env steps/s", True, *_noisy_blocks(0.70, 0.10, 8, s)) for s in range(20)]
    found = vd.decide(planted, threshold=0.15)
    assert [v.label for v in found].count(vd.REGRESSION) == 20  # every seed, at the old test's size (8 blocks, 30%)
    assert all(0.6 < v.ratio < 0.8 and v.ci_low < 0.70 * 1.1 and v.ci_high > 0.70 / 1.1 for v in found)
    null = [vd.Evidence(f"aa{s}", "env steps/s", True, *_noisy_blocks(1.0, 0.10, 8, 100 + s)) for s in range(40)]
    labels = [v.label for v in vd.decide(null, threshold=0.05)]
    assert vd.REGRESSION not in labels and vd.IMPROVEMENT not in labels  # 40 A/A cases, adjusted together: no false alarm
    # an unpaired analysis of the same drifting blocks would not see the slowdown: the drift is 2x wider than it
    a, b = _noisy_blocks(0.90, 0.02, 8, 7)
    assert max(a) / min(a) > 1.4 and vd.decide([vd.Evidence("p", "env steps/s", True, a, b)], 0.05)[0].label == vd.REGRESSION
    short = vd.decide([vd.Evidence("short", "env steps/s", True, *_noisy_blocks(0.5, 0.01, 2, 3))], 0.05)[0]
    assert short.label == vd.INSUFFICIENT and short.ratio is None


def test_blocks_are_interleaved_in_the_documented_order():
    from gpuenv.history.ab import block_order

    assert [block_order(b) for b in range(4)] == [[0, 1], [1, 0], [0, 1], [1, 0]]  # A B, B A, ...
    # three sides (a sweep's version sets): each takes each place, each neighbour before and after it
    three = [block_order(b, 3) for b in range(6)]
    assert three == [[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1], [2, 0, 1], [1, 0, 2]]
    for side in range(3):
        assert sorted(order.index(side) for order in three) == [0, 0, 1, 1, 2, 2]


def _verdicts_agree_with_the_records(doc: dict, threshold: float) -> dict:
    """The verdicts `ab --json` printed are the statistics of the records it wrote (recomputed from them)."""
    from gpuenv.history import ab
    from gpuenv.history.load import load_records

    records, _ = load_records([doc["records"]])
    (pairs,) = ab.pairs_of(records).values()
    again = {v.case_key: v for v in ab.analyse(pairs, threshold)}
    found = {v["case_key"]: v for v in doc["verdicts"]}
    assert set(again) == set(found)
    for key, v in found.items():
        assert v["label"] == again[key].label and v["pairs"] == again[key].pairs, (v, again[key])
        assert v["ratio"] == pytest.approx(again[key].ratio)
        assert v["label"] in (vd.REGRESSION, vd.IMPROVEMENT, vd.SUSPICIOUS, vd.SAME, vd.INSUFFICIENT)
    return found


def test_ab_runs_both_sides_interleaved_and_its_verdicts_are_its_records_statistics(cli, tmp_path):
    """End to end on a planted 30% slowdown of one task (tools/plant_slowdown.py): what holds at any speed of
    this machine. Which label a case gets on a busy VM is not asserted here: the statistics are tested on
    synthetic blocks above, and the detection and false-alarm rates are measured by tools/ab_power.py."""
    suite = write_suite(tmp_path / "fake.toml", SUITE)
    planted = plant(tmp_path / "planted", "fake", 0.3, task="cartpole")
    worker = "src/gpuenv/modes/throughput/worker.py"
    assert "class _Planted" in (planted / worker).read_text() and "class _Planted" not in (ROOT / worker).read_text()
    r = cli("ab", ".", str(planted), "--suite", str(suite), "--blocks", "8", "--threshold", "0.15", "--out", str(tmp_path / "out"),
            "--json", cwd=ROOT, timeout=600)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    found = _verdicts_agree_with_the_records(doc, 0.15)
    regressions = sorted(k for k, v in found.items() if v["label"] == vd.REGRESSION)
    assert r.returncode == (1 if regressions else 0)  # exit 1: a regression, and only then
    for k in regressions:
        assert f"regression: {k}" in r.stderr
    assert all(v["pairs"] == 8 for v in found.values())
    assert doc["sides"]["B"]["kind"] == "checkout" and "cores" in doc["machine"]
    # each side's records: ordinary records tagged with the pairing, one process per block, in A B / B A order
    root = Path(doc["records"])
    for case in ("fake-ok-cartpole-n2", "fake-ok-halfcheetah-n2"):
        recs = {p.parent.parent.name: json.loads(p.read_text()) for p in root.glob(f"*/*/{case}.json")}
        assert set(recs) == {"A", "B"}
        a, b = recs["A"], recs["B"]
        assert a["tags"]["side"] == "A" and b["tags"]["paired_run"] == a["run_id"] and a["tags"]["order"] == "AB BA AB BA AB BA AB BA"
        assert len(a["processes"]) == 8 and len(b["processes"]) == 8 and a["settings"]["processes"] == 8
        assert b["tags"]["side_spec"] == str(planted) and a["tags"]["side_spec"] == "."
        assert [p["index"] for p in a["processes"]] == list(range(8)) and all(p["failure"] is None for p in a["processes"] + b["processes"])


def test_a_commits_tree_unpacks_without_a_link_out_of_it(tmp_path):
    """A commit holding an absolute symlink (committed by mistake) once made `gpuenv ab HEAD HEAD` end in a
    traceback: the link is left out, the tree's files are there."""
    import io
    import tarfile

    from gpuenv.history.ab import extract_tree

    archive = tmp_path / "tree.tar"
    with tarfile.open(archive, "w") as t:
        info = tarfile.TarInfo("src/gpuenv/x.py")
        info.size = 2
        t.addfile(info, io.BytesIO(b"x\n"))
        link = tarfile.TarInfo("resources")
        link.type, link.linkname = tarfile.SYMTYPE, "/tmp/somewhere/resources"
        t.addfile(link)
    with tarfile.open(archive) as t:
        extract_tree(t, tmp_path / "tree")
    assert (tmp_path / "tree/src/gpuenv/x.py").read_text() == "x\n"
    assert not (tmp_path / "tree/resources").is_symlink()


def test_ab_of_a_revision_runs_that_commit_and_an_aa_is_quiet(cli, tmp_path):
    import subprocess

    suite = write_suite(tmp_path / "fake.toml", SUITE)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    # a 15% threshold: the A/A is here for the plumbing (false-alarm rates are measured, docs/verdicts.md)
    r = cli("ab", "HEAD", "HEAD", "--suite", str(suite), "--blocks", "4", "--threshold", "0.15", "--out", str(tmp_path / "out"),
            "--json", cwd=ROOT, env=env, timeout=600)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert r.returncode == (1 if any(v["label"] == vd.REGRESSION for v in doc["verdicts"]) else 0)
    assert doc["sides"]["A"]["label"] == f"HEAD ({head[:10]})" == doc["sides"]["B"]["label"]
    _verdicts_agree_with_the_records(doc, 0.15)  # which label this machine's noise gives an A/A: tools/ab_power.py
    assert all(v["pairs"] == 4 and v["ratio"] > 0 for v in doc["verdicts"])
    exported = tmp_path / "cache" / "gpuenv" / "revisions" / head
    assert (exported / "src" / "gpuenv" / "__init__.py").is_file()
    rec = json.loads(next((tmp_path / "out").glob("*/B/*/fake-ok-cartpole-n2.json")).read_text())
    assert rec["where"]["git"] == {"sha": head, "dirty": False}


def test_ctrl_c_in_ab_keeps_both_sides_records_and_leaves_no_worker(tmp_path):
    import os
    import signal
    import subprocess
    import time

    suite = write_suite(tmp_path / "hang.toml", SUITE.replace('backends = ["fake:ok"]', 'backends = ["fake:hang"]').replace(
        'tasks = ["cartpole", "halfcheetah"]', 'tasks = ["cartpole"]'))
    pidfile = tmp_path / "child.pid"
    with open(tmp_path / "err.log", "w") as e:
        proc = subprocess.Popen([sys.executable, "-m", "gpuenv", "ab", ".", ".", "--suite", str(suite), "--blocks", "3",
                                 "--out", str(tmp_path / "out")], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=e,
                                env={**os.environ, "GPUENV_FAKE_CHILD_PIDFILE": str(pidfile)})
        deadline = time.time() + 300
        while not pidfile.exists() and time.time() < deadline:
            time.sleep(0.05)
        worker, child = map(int, pidfile.read_text().split())
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    err = (tmp_path / "err.log").read_text()
    assert proc.returncode == 130 and "interrupted by Ctrl-C (SIGINT)" in err and "Traceback" not in err, err
    recs = {p.parent.parent.name: json.loads(p.read_text()) for p in (tmp_path / "out").rglob("*.json")}
    assert set(recs) == {"A", "B"} and all(r["failure"]["reason"] == "interrupted by Ctrl-C (SIGINT)" for r in recs.values())
    def alive(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except (FileNotFoundError, ProcessLookupError):
            return False

    for pid in (worker, child):  # the hanging worker and the process it started are gone
        deadline = time.time() + 30
        while alive(pid) and time.time() < deadline:
            time.sleep(0.1)
        assert not alive(pid), pid


def test_a_side_that_crashes_where_the_other_ran_fails_ab(cli, tmp_path):
    suite = write_suite(tmp_path / "fake.toml", SUITE)
    broken = plant(tmp_path / "broken", "fake", None, task="cartpole")  # B's fake cartpole stepping raises
    r = cli("ab", ".", str(broken), "--suite", str(suite), "--blocks", "3", "--out", str(tmp_path / "out"), "--json", cwd=ROOT, timeout=600)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    found = {v["case_key"]: v for v in doc["verdicts"]}
    assert found["fake-ok-cartpole-n2"]["label"] == vd.INSUFFICIENT and "B failed" in found["fake-ok-cartpole-n2"]["why"]
    assert found["fake-ok-halfcheetah-n2"]["label"] != vd.INSUFFICIENT
    (line,) = doc["failed"]
    assert line.startswith("fake-ok-cartpole-n2: B failed where A ran (") and "planted crash" in line
    assert "failed: fake-ok-cartpole-n2: B failed where A ran" in " ".join(r.stderr.split())


def test_the_power_benchmark_counts_what_the_verdicts_found():
    """tools/ab_power.py's tally: a planted case called a regression is found, an untouched one called a change is a false alarm."""
    from ab_power import tally

    def doc(by, labels):
        return {"planted_by": by, "verdicts": [{"case_key": k, "label": lab, "ci_low": 0.9, "ci_high": 1.1} for k, lab in labels]}

    docs = [doc(None, [("envpool-sync-cartpole-n8", vd.SAME), ("gymnasium-dummy-cartpole-n8", vd.IMPROVEMENT)]),
            doc(0.3, [("envpool-sync-cartpole-n8", vd.REGRESSION), ("envpool-sync-halfcheetah-n8", vd.SUSPICIOUS),
                      ("gymnasium-dummy-cartpole-n8", vd.SAME)])]
    assert tally(docs[1:], "envpool:sync") == {"planted_cases": 2, "found": 1, "untouched_cases": 1, "false_alarms": 0,
                                               "median_half_width_log": pytest.approx(math.log(1.1 / 0.9) / 2)}
    aa = tally(docs[:1], "envpool:sync")  # in an A/A nothing is planted: every case is untouched
    assert aa["planted_cases"] == 0 and aa["untouched_cases"] == 2 and aa["false_alarms"] == 1

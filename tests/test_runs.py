"""Half-finished runs: what records say about the run they belong to, and `gpuenv decide` refusing
an answer from a run that was stopped half-way unless asked (--partial)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT

from gpuenv.history.load import load_records
from gpuenv.results.runs import half_finished
from gpuenv.results.store import prepare_dir, write_record

MAKE_BENCH = ROOT / "results" / "published" / "20261204T100646Z-df2a69"  # 41 records of one make bench, before invocations


def copied(tmp_path: Path, cases: int | None, drop: int = 0) -> Path:
    """The published make-bench run written again, each record saying its bench command planned `cases`
    cases (None: no invocation, as records before 2026-12-04), the last `drop` records left out."""
    out = prepare_dir(tmp_path / "run")
    files = sorted(MAKE_BENCH.glob("*.json"))
    for p in files[:len(files) - drop]:
        rec = json.loads(p.read_text())
        if cases is not None:
            rec["invocation"] = {"started_utc": "2026-12-04T10:06:46+00:00", "cases": cases}
        write_record(out, rec)
    return out


def test_a_run_missing_cases_its_command_planned_is_half_finished_and_older_runs_are_judged_by_status(tmp_path):
    whole, _ = load_records([copied(tmp_path / "a", 41)])
    assert half_finished(whole) == {}
    killed, _ = load_records([copied(tmp_path / "b", 41, drop=3)])  # killed before its last 3 cases
    assert half_finished(killed) == {
        "20261204T100646Z-df2a69": "38 of the 41 cases its bench command planned at 2026-12-04T10:06:46+00:00 have records"}
    old, _ = load_records([copied(tmp_path / "c", None, drop=3)])  # no invocation: nothing says cases are missing
    assert half_finished(old) == {}


def test_decide_refuses_a_half_finished_run_unless_asked(cli, tmp_path):
    run = copied(tmp_path, 41, drop=3)
    r = cli("decide", "--task", "halfcheetah", "--budget", "49M", str(run))
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert ("error: run 20261204T100646Z-df2a69 of [1] Intel(R) Xeon(R) Processor (2 cores), no GPU is half-finished "
            "(38 of the 41 cases its bench command planned at 2026-12-04T10:06:46+00:00 have records)") in r.stderr
    assert "pass --partial to decide from it anyway" in r.stderr and "--run-id 20261204T100646Z-df2a69" in r.stderr
    r = cli("decide", "--task", "halfcheetah", "--budget", "49M", str(run), "--partial")
    out = " ".join(r.stdout.split())
    assert r.returncode == 0 and "answer: envpool:sync: trains 1 x 49,000,000 steps" in out, r.stderr
    assert "why: from half-finished run 20261204T100646Z-df2a69 (38 of the 41 cases" in out and "as --partial asked" in out


def test_decide_answers_from_the_machines_finished_runs_and_says_which_it_left_out(cli, tmp_path):
    whole = copied(tmp_path / "whole", 41)  # the same machine: one finished run ...
    half = copied(tmp_path / "half", 41, drop=3)  # ... and a later one killed before 3 of its cases
    for p in half.rglob("*.json"):
        rec = json.loads(p.read_text())
        rec["run_id"], rec["created_utc"] = "20261205T000000Z-aaaaaa", rec["created_utc"].replace("2026-12-04", "2026-12-05")
        rec["invocation"]["started_utc"] = "2026-12-05T00:00:00+00:00"
        p.write_text(json.dumps(rec))
    r = cli("decide", "--task", "halfcheetah", "--budget", "49M", str(whole), str(half))
    out = " ".join(r.stdout.split())
    assert r.returncode == 0, r.stderr
    assert "why: left out half-finished run 20261205T000000Z-aaaaaa (38 of the 41 cases its bench command planned" in out
    assert "--partial takes it in" in out and "answer: envpool:sync: trains" in out


def test_a_later_command_into_the_same_run_finishes_it(tmp_path):
    """`gpuenv bench --run-id R` measuring the missing cases: the run's newest command wrote all it planned."""
    run = copied(tmp_path, 41, drop=3)
    files = sorted(MAKE_BENCH.glob("*.json"))
    for p in files[-3:]:
        rec = json.loads(p.read_text())
        rec["invocation"] = {"started_utc": "2026-12-04T11:00:00+00:00", "cases": 3}
        rec["created_utc"] = "2026-12-04T11:01:00+00:00"
        write_record(run, rec)
    records, _ = load_records([run])
    assert half_finished(records) == {}

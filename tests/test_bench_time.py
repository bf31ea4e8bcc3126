"""tools/bench_time.py: where a run's time went, from its records' creation times (docs/testing.md's table)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from bench_time import case_seconds  # noqa: E402


def _record(run, key, backend, created):
    (run / f"{key}.json").write_text(json.dumps({"schema": "gpuenv.result", "case_key": key, "created_utc": created,
                                                 "case": {"backend": backend}}))


def test_a_cases_time_is_the_gap_to_the_record_before_it(tmp_path):
    run = tmp_path / "20261206T204909Z-9b7510"
    run.mkdir()
    _record(run, "b-x-n8", "b", "2026-12-06T20:50:30+00:00")
    _record(run, "a-x-n8", "a", "2026-12-06T20:50:10+00:00")
    (run / "notes.json").write_text("{}")  # not a record
    assert case_seconds(run, None) == [("a-x-n8", "a", None), ("b-x-n8", "b", 20.0)]
    assert case_seconds(run, datetime.fromisoformat("2026-12-06T20:49:10+00:00"))[0] == ("a-x-n8", "a", 60.0)
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_time.py"), str(run), "--start", "2026-12-06T20:49:10+00:00"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "| a | 1 | 60 | 75% |" in r.stdout and "| b-x-n8 | 20 |" in r.stdout, r.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_time.py"), str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and "is not a run folder" in bad.stderr

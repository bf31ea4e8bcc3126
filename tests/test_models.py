"""Typed result records (schema v2): published v1 records migrate, corruptions are named, ids are stable."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from gpuenv.errors import UserError
from gpuenv.results import migrate, models, schema
from gpuenv.results.store import write_record

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "results" / "published"


def _is_record(path: Path) -> bool:
    data = json.loads(path.read_text())
    return isinstance(data, dict) and "schema" in data  # overhead-*.json and the like are not records


RECORDS = sorted(p for p in PUBLISHED.rglob("*.json") if _is_record(p))


def _published(mode: str, status: str) -> dict:
    """The first published record of that mode and status, raw (as written, schema v1)."""
    for p in RECORDS:
        data = json.loads(p.read_text())
        if data["measurement_mode"] == mode and data["status"] == status:
            return data
    raise AssertionError(f"no published {status} {mode} record")


@pytest.fixture(scope="module")
def ok_tp() -> dict:
    return schema.validate(_published("env-step-throughput", "ok"))


@pytest.fixture(scope="module")
def failed_tp() -> dict:
    return schema.validate(_published("env-step-throughput", "failed"))


@pytest.fixture(scope="module")
def ok_ttr() -> dict:
    return schema.validate(_published("time-to-reward", "ok"))


def test_there_are_published_records_of_both_modes():
    modes = {json.loads(p.read_text())["measurement_mode"] for p in RECORDS}
    assert modes == {"env-step-throughput", "time-to-reward"}


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: str(p.relative_to(PUBLISHED)))
def test_published_record_loads_and_migrates(path):
    rec = schema.load(path)
    assert rec["schema_version"] == 2
    assert re.fullmatch(r"[0-9a-f]{16}", rec["workload_id"])
    assert (rec["status"] == "ok") == (rec["failure"] is None) == (rec["summary"] is not None)


def test_v1_record_round_trips():
    for raw in (_published("env-step-throughput", "ok"), _published("time-to-reward", "ok")):
        once = schema.validate(copy.deepcopy(raw))
        assert schema.validate(json.loads(json.dumps(once))) == once


def test_migration_of_failures(failed_tp):
    assert failed_tp["summary"] is None
    assert failed_tp["failure"]["kind"] in {k.value for k in models.FailureKind}
    assert all(p["failure"] is None or p["failure"]["process"] == p["index"] for p in failed_tp["processes"])
    raw = _published("time-to-reward", "ok")
    raw["status"], raw["summary"] = "failed", {}
    raw["runs"] = [{"seed": 0, "status": "failed", "failure": "training diverged (NaN loss)", "stderr_tail": "tb"}]
    raw["failure"] = {"reason": "training diverged (NaN loss)", "seed": 0, "stderr_tail": "tb"}
    rec = schema.validate(raw)
    reason = "training diverged (NaN loss)"
    assert rec["failure"] == {"kind": "diverged", "reason": reason, "process": 0, "stderr_tail": "tb"}
    assert rec["runs"][0]["failure"] == rec["failure"] and "stderr_tail" not in rec["runs"][0]


@pytest.mark.parametrize(
    "reason, kind",
    [
        ("interrupted by the user (Ctrl-C)", "interrupted"),
        ("timed out after 600 s (hung or too slow); killed", "timeout"),
        ("worker killed by SIGSEGV", "killed"),
        ("training diverged", "diverged"),
        ("envpool 0.8.4 has no Ant-v5; gpuenv does not substitute another version", "unsupported"),
        ("gymnasium is older than the adapter", "unsupported"),
        ("gpuenv could not summarise this case: KeyError('x')", "internal"),
        ("MemoryError: ", "oom"),
        ("worker exited with code 1 without a result", "crashed"),
    ],
)
def test_legacy_failure_kinds(reason, kind):
    assert migrate.legacy_failure_kind(reason).value == kind


def _set(path: str, value):
    def mutate(rec):
        *parents, last = path.split(".")
        for p in parents:
            rec = rec[p]
        rec[last] = value

    return mutate


def _delete(path: str):
    def mutate(rec):
        *parents, last = path.split(".")
        for p in parents:
            rec = rec[p]
        del rec[last]

    return mutate


def _swap_interval(rec):
    s = rec["summary"]["env_steps_per_s"]
    s["ci_low"], s["ci_high"] = s["ci_high"] * 2, s["ci_low"]


CORRUPTIONS = [
    ("ok_tp", _set("summary.warnings", 5), "summary.warnings"),
    ("ok_tp", _set("summary.compile_s_median", "x"), "summary.compile_s_median"),
    ("ok_tp", _set("summary.frames_per_s_median", True), "summary.frames_per_s_median"),
    ("ok_tp", _delete("summary.env_steps_per_s.rel_half_width"), "summary.env_steps_per_s.rel_half_width"),
    ("ok_tp", _set("where.machine.gpus", "none"), "where.machine.gpus"),
    ("ok_tp", _set("processes", []), "processes"),
    ("ok_tp", _set("where.git.sha", 123), "where.git.sha"),
    ("ok_tp", _swap_interval, "summary.env_steps_per_s.ci_high"),
    ("ok_tp", _set("case.variant", "sync[/]"), "case.variant"),
    ("ok_tp", _set("case.task", "a/b"), "case.task"),
    ("ok_tp", _set("failure", {"kind": "crashed", "reason": "boom"}), "failure"),
    ("ok_tp", _set("summary.env_steps_per_s.median", float("nan")), "summary.env_steps_per_s.median"),
    ("ok_tp", _set("created_utc", "2026-12-02T14:08:51"), "created_utc"),
    ("ok_tp", _set("unknown_field", 1), "unknown_field"),
    ("failed_tp", _set("failure.kind", "weird"), "failure.kind"),
    ("failed_tp", _set("summary", {}), "summary"),
    ("ok_ttr", _set("summary.time_to_threshold_s.ci_low", 1e9), "summary.time_to_threshold_s.ci_high"),
]


@pytest.mark.parametrize("base, mutate, field", CORRUPTIONS, ids=[c[2] + "-" + c[0] for c in CORRUPTIONS])
def test_corruption_is_a_user_error_naming_the_field(request, base, mutate, field):
    rec = copy.deepcopy(request.getfixturevalue(base))
    mutate(rec)
    with pytest.raises(UserError) as e:
        schema.validate(rec, "x.json")
    msg = str(e.value)
    assert msg.startswith("x.json: invalid result record: ") and "\n" not in msg
    assert f"field '{field}'" in msg


def test_an_int_is_a_fine_float(ok_tp):
    rec = copy.deepcopy(ok_tp)
    rec["summary"]["compile_s_median"] = 3
    assert schema.validate(rec)["summary"]["compile_s_median"] == 3.0


def test_ttr_failed_run_needs_a_failure(ok_ttr):
    rec = copy.deepcopy(ok_ttr)
    rec["runs"][0] = {"seed": 0, "status": "failed", "failure": None}
    with pytest.raises(UserError, match=r"field 'runs\[0\]\.failure'"):
        schema.validate(rec)
    rec["runs"][0]["failure"] = {"kind": "crashed", "reason": "worker exited with code 1"}
    schema.validate(rec)


def test_ttr_ok_needs_a_finished_run(ok_ttr):
    rec = copy.deepcopy(ok_ttr)
    rec["runs"] = [{"seed": i, "status": "failed", "failure": {"kind": "crashed", "reason": "x"}} for i in range(3)]
    with pytest.raises(UserError, match="field 'runs'"):
        schema.validate(rec)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (_set("schema_version", 3), "schema version 3 is not supported by this gpuenv (reads versions 1, 2)"),
        (_set("schema_version", True), "schema version True is not supported"),
        (_set("measurement_mode", "x"), "unknown measurement_mode 'x' (known: env-step-throughput, time-to-reward)"),
        (_set("schema", "other"), "not a gpuenv result record"),
    ],
)
def test_envelope_errors(ok_tp, mutate, message):
    rec = copy.deepcopy(ok_tp)
    mutate(rec)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        schema.validate(rec)


def test_nan_in_a_file_is_refused(tmp_path, ok_tp):
    p = tmp_path / "nan.json"
    p.write_text(json.dumps(ok_tp).replace(str(ok_tp["summary"]["env_steps_per_s"]["median"]), "NaN", 1))
    with pytest.raises(UserError, match="corrupt result file"):
        schema.load(p)


def test_workload_id(ok_tp, ok_ttr):
    other = copy.deepcopy(ok_tp)  # same workload, another run on another machine
    other["run_id"], other["where"]["machine"]["cpu_model"], other["what"]["catalogue"]["notes"] = "r2", "other", "?"
    assert schema.seal(other)["workload_id"] == ok_tp["workload_id"]
    as_int = copy.deepcopy(ok_ttr)
    as_int["case"]["threshold"] = int(as_int["case"]["threshold"])  # 475 and 475.0 are one workload
    assert schema.seal(as_int)["workload_id"] == ok_ttr["workload_id"]
    ids = set()
    for chunk_steps in (10, 100):
        rec = copy.deepcopy(ok_tp)
        rec["case"]["chunk_steps"] = rec["settings"]["chunk_steps"] = chunk_steps
        ids.add(schema.seal(rec)["workload_id"])
    assert len(ids) == 2


def test_same_case_in_published_runs_has_one_workload_id():
    """Records of one case measured with the same settings share a workload id; other settings (the
    Godot suite's longer values) give another."""
    by_key: dict[tuple[str, str], set[str]] = {}
    ids_per_case: dict[str, set[str]] = {}
    for p in RECORDS:
        rec = schema.load(p)
        by_key.setdefault((rec["case_key"], json.dumps(rec["settings"], sort_keys=True)), set()).add(rec["workload_id"])
        ids_per_case.setdefault(rec["case_key"], set()).add(rec["workload_id"])
    assert any(len(ids) == 1 for ids in by_key.values())
    assert all(len(ids) == 1 for ids in by_key.values()), "the same measurement got two workload ids"
    assert any(len(ids) > 1 for ids in ids_per_case.values())  # godot-uncapped-ballchase-n16 at min_time_s 0.5 and 0.15


def test_header_and_write_record_seal(tmp_path, ok_tp):
    h = schema.header(run_id="r1", case_key="k", suite="s", status="ok", mode="env-step-throughput")
    assert h["schema_version"] == 2 and "workload_id" not in h
    rec = {k: v for k, v in copy.deepcopy(ok_tp).items() if k != "workload_id"}
    path = write_record(tmp_path, rec)
    assert json.loads(path.read_text()) == schema.load(path) == ok_tp


def test_json_schema_is_up_to_date():
    doc = ROOT / "docs" / "results-schema.json"
    assert json.loads(doc.read_text()) == schema.json_schema(), (
        "docs/results-schema.json is stale: regenerate it with "
        "`python -m gpuenv.results.schema --write docs/results-schema.json`"
    )

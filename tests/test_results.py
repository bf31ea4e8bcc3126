"""Result schema v2 round trip, validation on read, atomic never-overwriting store."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuenv.backends.base import Case
from gpuenv.errors import UserError
from gpuenv.modes.base import Outcome, RecordContext, failure
from gpuenv.modes.throughput.build import build_record
from gpuenv.modes.throughput.suite import MeasureSpec, PlannedCase
from gpuenv.results import schema
from gpuenv.results.store import load_dir, write_record
from gpuenv.run.provenance import provenance


def fake_result(rates):
    return {
        "ok": True,
        "facts": {
            "native_env_id": "CartPole-v1",
            "obs_shape": [4],
            "action_space": {"kind": "discrete", "n": 2, "low": [], "high": []},
            "reset_mode": "test",
            "device": "cpu",
            "details": {},
        },
        "startup_s": 1.0,
        "phases_s": {"import": 0.5, "build_and_reset": 0.5, "compile": 0.01},
        "compile_cache": "n/a",
        "loops": 10,
        "steps_per_value": 1000,
        "calibration_s": [0.1],
        "warmup_s": [0.1],
        "value_s": [1000 / r for r in rates],
        "env_steps_per_s": rates,
        "resources": {"samples": 1, "cpu_percent_mean": 50.0, "bottleneck": "cpu: 1 core"},
    }


def make_record(status="ok"):
    pc = PlannedCase(Case("gymnasium", "dummy", "cartpole", 8), MeasureSpec())
    outcomes = [Outcome(i, fake_result([100.0 + i, 101.0, 99.0]), None) for i in range(3)]
    if status == "failed":
        outcomes.append(Outcome(3, None, failure("killed", "worker killed by SIGSEGV", 3, "boom"), "boom"))
    return build_record(pc, outcomes, RecordContext("t", "r1", WHERE))


WHERE = provenance()


def test_round_trip(tmp_path):
    rec = make_record()
    path = write_record(tmp_path, rec)
    back = schema.load(path)
    assert back == json.loads(json.dumps(schema.seal(rec)))
    assert back["schema_version"] == 2 and len(back["workload_id"]) == 16
    assert back["summary"]["env_steps_per_s"]["median"] == pytest.approx(101.0)
    assert back["what"]["physics"]["frame_skip"] == 1
    assert back["what"]["action_distribution"].startswith("uniform")


def test_failed_record_keeps_finished_processes_and_reason(tmp_path):
    rec = make_record("failed")
    assert rec["status"] == "failed"
    assert rec["failure"]["reason"] == "worker killed by SIGSEGV"
    assert rec["failure"]["kind"] == "killed" and rec["failure"]["process"] == 3
    assert rec["summary"] is None
    assert sum(1 for p in rec["processes"] if p.get("env_steps_per_s")) == 3
    assert rec["processes"][3]["failure"]["kind"] == "killed"
    assert [p["failure"] for p in rec["processes"][:3]] == [None] * 3
    schema.load(write_record(tmp_path, rec))


def test_unknown_schema_version_is_refused_clearly(tmp_path):
    rec = make_record()
    rec["schema_version"] = 3
    p = tmp_path / "future.json"
    p.write_text(json.dumps(rec))
    with pytest.raises(UserError, match="schema version 3 is not supported"):
        schema.load(p)


def test_version_1_records_are_migrated(tmp_path):
    ok = schema.seal(make_record())
    v1 = {k: v for k, v in ok.items() if k != "workload_id"} | {"schema_version": 1}
    (tmp_path / "v1.json").write_text(json.dumps(v1))
    back = schema.load(tmp_path / "v1.json")
    assert back["schema_version"] == 2 and back["workload_id"] == ok["workload_id"]
    failed = schema.seal(make_record("failed"))
    v1 = {k: v for k, v in failed.items() if k != "workload_id"} | {"schema_version": 1, "summary": {}}
    v1["failure"] = {"reason": "worker killed by SIGSEGV", "stderr_tail": "boom"}
    v1["processes"][3]["failure"] = "worker killed by SIGSEGV"
    back = schema.validate(v1, "v1.json")
    assert back["summary"] is None
    assert back["failure"]["kind"] == "killed" and back["failure"]["reason"] == "worker killed by SIGSEGV"
    assert back["processes"][3]["failure"]["kind"] == "killed"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.pop("case"), "field 'case' is missing"),
        (lambda r: r["case"].__setitem__("num_envs", "8"), "field 'case.num_envs' input should be a valid integer"),
        (lambda r: r.__setitem__("status", "great"), "field 'status' .*got 'great'"),
        (lambda r: r.__setitem__("schema", "other"), "not a gpuenv result record"),
        (lambda r: r.__setitem__("summary", {}), "field 'summary.startup_s_median' is missing"),
    ],
)
def test_invalid_records_are_named(mutate, message):
    rec = copy.deepcopy(schema.seal(make_record()))
    mutate(rec)
    with pytest.raises(UserError, match=message):
        schema.validate(rec, "x.json")


def test_corrupt_file_is_named_and_the_rest_still_loads(tmp_path):
    write_record(tmp_path, make_record())
    (tmp_path / "broken.json").write_text('{"schema": "gpuenv.res')
    records, problems = load_dir(tmp_path)
    assert len(records) == 1
    assert len(problems) == 1 and "broken.json" in problems[0] and "corrupt" in problems[0]


def test_records_are_never_overwritten(tmp_path):
    a = make_record()
    b = make_record()
    b["run_id"] = "r2"
    pa = write_record(tmp_path, a)
    pb = write_record(tmp_path, b)
    assert pa != pb and pb.name.endswith("-2.json")
    assert json.loads(pa.read_text())["run_id"] == "r1"
    assert not list(tmp_path.glob(".*.tmp"))  # no temp files left behind


def test_invalid_record_is_not_written(tmp_path):
    rec = make_record()
    rec["status"] = "nope"
    with pytest.raises(UserError):
        write_record(tmp_path, rec)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r["summary"]["env_steps_per_s"].__setitem__("median", 0), "median' input should be greater than 0"),
        (lambda r: r["summary"].__setitem__("env_steps_per_s", {"median": 1.0}), "field 'summary.env_steps_per_s.ci_low' is missing"),
        (lambda r: r["processes"].__setitem__(0, "x"), r"field 'processes\[0\]' input should be a valid dictionary"),
    ],
)
def test_nested_fields_are_validated(mutate, message):
    rec = copy.deepcopy(schema.seal(make_record()))
    mutate(rec)
    with pytest.raises(UserError, match=message):
        schema.validate(rec, "x.json")


def test_failed_record_needs_a_reason():
    rec = schema.seal(make_record("failed"))
    rec["failure"] = {"kind": "crashed"}
    with pytest.raises(UserError, match="field 'failure.reason' is missing"):
        schema.validate(rec, "x.json")
    rec["failure"] = {"kind": "exploded", "reason": "x"}
    with pytest.raises(UserError, match="field 'failure.kind'"):
        schema.validate(rec, "x.json")


def test_nan_in_a_file_is_corrupt(tmp_path):
    p = write_record(tmp_path, make_record())
    p2 = tmp_path / "nan.json"
    p2.write_text(p.read_text().replace('"startup_s": 1.0', '"startup_s": NaN', 1))
    with pytest.raises(UserError, match="non-finite number NaN"):
        schema.load(p2)


def test_records_are_readable_by_others(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        p = write_record(tmp_path, make_record())
    finally:
        os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644


def test_speedup_uses_the_baseline_of_the_same_run():
    from gpuenv.report.table import tables

    def rec(run_id, backend, variant, rate):
        r = make_record()
        r["run_id"] = run_id
        r["case"].update(backend=backend, variant=variant)
        for p in r["processes"]:
            p["env_steps_per_s"] = [rate, rate * 1.001, rate * 0.999]
        return r

    records = [
        rec("a", "gymnasium", "subproc", 100.0),
        rec("a", "envpool", "sync", 1000.0),
        rec("b", "gymnasium", "subproc", 500.0),
    ]
    from rich.console import Console

    console = Console(width=200, record=True)
    for t in tables([schema.typed(schema.seal(r)) for r in records]):
        console.print(t)
    text = console.export_text()
    assert "10.00x" in text and "2.00x" not in text


def test_only_variables_that_change_speed_are_recorded_and_never_a_credential(monkeypatch):
    """Records are published: `where.env` holds what changes speed (XLA, CUDA, thread counts), not
    Terraform's TF_* (gpuenv runs no TensorFlow; TF_TOKEN_* are credentials) nor any *KEY/*TOKEN name."""
    from gpuenv.measure.system import speed_env

    for name, value in {"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "CUDA_VISIBLE_DEVICES": "0",
                        "OMP_NUM_THREADS": "2", "TF_CLI_CONFIG_FILE": "/home/u/.terraformrc", "TF_TOKEN_app_terraform_io": "s3cr3t",
                        "NVIDIA_API_KEY": "nvapi-s3cr3t", "CUDA_AUTH_TOKEN": "s3cr3t"}.items():
        monkeypatch.setenv(name, value)
    env = speed_env()
    assert {"XLA_FLAGS", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"} <= set(env)
    assert not {"TF_CLI_CONFIG_FILE", "TF_TOKEN_app_terraform_io", "NVIDIA_API_KEY", "CUDA_AUTH_TOKEN"} & set(env)
    assert "s3cr3t" not in json.dumps(provenance()["env"])


def test_a_records_digest_is_computed_once_and_is_never_part_of_the_record():
    """Loading dedups by the digest and the report site names every page by it: one hash per record."""
    from pathlib import Path

    from gpuenv.results.store import record_digest

    path = next((Path(__file__).resolve().parents[1] / "results" / "published" / "20261204T162312Z-e05585").glob("*.json"))
    a, b = schema.read(path), schema.read(path)
    digest = record_digest(a)
    assert a == b  # computed on one, not yet on the other: still equal
    assert len(digest) == 64 and digest == record_digest(b)  # the same content, the same record
    assert a.digest_once(lambda r: "not computed again") == digest
    assert "_digest" not in json.dumps(schema.as_dict(a)) and a == b  # derived: never written, never compared
    c = schema.typed({**schema.as_dict(a), "run_id": "another-run"})
    assert record_digest(c) != digest  # another run of the case is another record


def _h200_positional() -> dict:
    path = Path(__file__).parent.parent / "results/published/20261204T160308Z-6e1253/brax-positional-halfcheetah-n2048.json"
    return json.loads(path.read_text())


def test_physics_steps_come_from_what_the_backend_ran_never_the_catalogues_frame_skip():
    """The H200 record of 2026-12-04 (before backends reported it) multiplied by the catalogue's
    frame_skip 5 where Brax's positional pipeline ran 16 steps: readers give it no physics figure; a
    record with the reported count gets env steps/s x that count, in the table and in claims."""
    from gpuenv.claims.check import in_unit
    from gpuenv.modes.throughput.report import physics_cell, solver_notes

    old = schema.typed(schema.validate(_h200_positional(), "old.json"))
    assert old.what.physics.frame_skip == 5 and old.what.details["n_frames"] == 16
    assert old.physics_steps_per_s() is None and physics_cell(old) == "-"
    assert in_unit([(old, Path("old.json"))], "physics steps/s") == [] and in_unit([(old, Path("old.json"))], "env steps/s")
    raw = _h200_positional()
    raw["what"]["physics"]["physics_steps_per_env_step"] = 16
    raw["what"]["details"].update(solver="newton", iterations=1, ls_iterations=4, eulerdamp=False, integrator="euler", precision="float32",
                                  solver_settings="Brax's MJX settings")
    new = schema.typed(schema.validate(raw, "new.json"))
    env = new.ok_summary.env_steps_per_s.median
    assert new.physics_steps_per_s() == pytest.approx(16 * env) and physics_cell(new).endswith("(x16)")
    assert solver_notes([new, old]) == [
        "solver settings, Brax's MJX settings: newton, 1 iterations, 4 line-search, Euler damping off, euler, float32: halfcheetah brax:positional"]

"""Phases measured apart (issue 16): step without resets, step+reset, through the shared PPO VecEnv,
+inference, +update; device memory from the libraries a worker loaded."""

from __future__ import annotations

import os
import time
import types

import numpy as np
import pytest
from conftest import fake_suite, write_suite

from gpuenv.backends.base import Case, action_pool
from gpuenv.errors import UserError
from gpuenv.measure.monitor import device_memory
from gpuenv.modes.throughput.build import summarize_case
from gpuenv.modes.throughput.phases import check_names, shared_definition
from gpuenv.modes.throughput.record import ThroughputCase, ThroughputRecord, ThroughputSummary
from gpuenv.modes.throughput.report import phase_tables, phases_markdown
from gpuenv.registry import default_registry
from gpuenv.results.schema import load

# --- suite keys ---------------------------------------------------------------------------------


def test_phase_names_are_checked_and_step_reset_is_the_case_itself():
    assert check_names(["update", "step+reset", "step"], "s") == ("step", "update")  # phases order
    with pytest.raises(UserError, match="unknown phase 'infer'"):
        check_names(["infer"], "s")
    with pytest.raises(UserError, match="must be a list"):
        check_names("step", "s")


def test_a_bad_phase_in_a_suite_is_one_line_and_exit_2(cli, tmp_path):
    suite = write_suite(tmp_path / "p.toml", '[[matrix]]\nbackends = ["envpool:sync"]\ntasks = ["halfcheetah"]\n'
                        'num_envs = [2]\nphases = ["step", "warp"]\n')
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "unknown phase 'warp'" in r.stderr and "[[matrix]] #1" in r.stderr


def test_the_shared_definition_is_the_ppo_suites_sb3_case_of_the_task():
    hp, source = shared_definition("halfcheetah", "envpool", "sync")
    assert source == "suites/ppo.toml case ppo-sb3-envpool-sync-halfcheetah-n1"
    assert hp["n_steps"] == 512 and hp["normalize"] is True
    assert shared_definition("ballchase", "godot", "uncapped")[1] == "suites/ppo.toml case ppo-sb3-godot-uncapped-ballchase-n16"
    assert shared_definition("franka_scene", "genesis", "default") is None  # suites/ppo.toml trains no franka_scene
    # another backend's sb3 case of the task is the definition where this backend has none
    assert shared_definition("halfcheetah", "brax", "generalized")[1] == "suites/ppo.toml case ppo-sb3-gymnasium-subproc-halfcheetah-n1"


# --- resets suppressed ----------------------------------------------------------------------------


def _actions(stepper, n, steps=64):
    return action_pool(stepper.facts.action_space, n, steps, 0)


def _envpool_dones(s, action):
    _, _, term, trunc, _ = s.env.step(action.astype(np.float64))
    return term | trunc


def _sb3_dones(s, action):
    return s.env.step(action)[2]


@pytest.mark.parametrize("backend, variant, dones", [("envpool", "sync", _envpool_dones), ("gymnasium", "dummy", _sb3_dones)])
def test_without_resets_runs_past_the_time_limit(backend, variant, dones):
    import importlib

    adapter = importlib.import_module(f"gpuenv.backends.{backend}.adapter")
    native = default_registry().native("halfcheetah", backend)
    case = Case(backend, variant, "halfcheetah", 2, chunk_steps=1)
    ends = {}
    for name, opener in (("open", adapter.open), ("without", adapter.open_without_resets)):
        s = opener(case, native)
        pool = _actions(s, 2)
        ends[name] = sum(int(np.sum(dones(s, pool[i % len(pool)]))) for i in range(native.episode_steps + 5))
        assert ("none: time limit removed" in s.facts.reset_mode) == (name == "without")
        s.close()
    assert ends == {"open": 2, "without": 0}  # both envs hit the 1000-step limit, or neither does


def test_brax_without_resets_has_no_episode_or_auto_reset_wrapper():
    from gpuenv.backends.brax import adapter

    native = default_registry().native("halfcheetah", "brax")
    case = Case("brax", "generalized", "halfcheetah", 2, chunk_steps=1)
    with_resets, without = adapter.open(case, native), adapter.open_without_resets(case, native)
    assert "truncation" in with_resets.state.info and "first_obs" in with_resets.state.info  # EpisodeWrapper, AutoReset
    assert "truncation" not in without.state.info and "first_obs" not in without.state.info
    assert without.facts.details["episode_length"] is None and "VmapWrapper only" in without.facts.reset_mode


# --- a real case with every phase, end to end ---------------------------------------------------


PHASES_SUITE = """
[measure]
processes = 2
values = 2
warmups = 0
min_time_s = 0.05
chunk_steps = 10
timeout_s = 300
[[matrix]]
backends = ["envpool:sync"]
tasks = ["halfcheetah", "cartpole"]
num_envs = [4]
phases = ["step", "vecenv", "inference", "collect", "learn", "update"]
phase_ppo = { n_steps = 16, n_epochs = 1, batch_size = 64 }
"""


def test_every_phase_is_measured_apart_and_tabled(cli, tmp_path):
    suite = write_suite(tmp_path / "phases.toml", PHASES_SUITE)
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    recs = {rec["case"]["task"]: rec for rec in (load(p) for p in (tmp_path / "out").rglob("*.json"))}
    hc, cp = recs["halfcheetah"]["summary"]["phases"], recs["cartpole"]["summary"]["phases"]
    assert recs["halfcheetah"]["settings"]["phases"] == ["step", "vecenv", "inference", "collect", "learn", "update"]
    for name in ("step", "vecenv", "inference", "collect", "learn", "update"):
        p = hc[name]
        assert p["env_steps_per_s"]["n_processes"] == 2 and p["absent"] is None and p["failed"] is None, (name, p)
        assert p["vs_step_reset"]["ci_low"] <= p["vs_step_reset"]["ci_high"]
    assert "time limit removed" in hc["step"]["how"]
    assert hc["step"]["reset_cost_us"] is not None and isinstance(hc["step"]["reset_cost_within_noise"], bool)
    assert hc["update"]["chunk_steps"] == 16 and hc["update"]["warmups"] == 0  # one rollout, of the suite's size
    assert hc["learn"]["chunk_steps"] == 16 and "samples learned per second" in hc["learn"]["how"]
    assert "collect_rollouts" in hc["collect"]["how"] and hc["collect"]["chunk_steps"] == 16  # one SB3 rollout a chunk
    # the wall-clock model reads these phases: a PPO iteration is its rollout (at collect's rate) then its update
    # (at learn's). How near that lands to +update measured whole depends on the machine's load (beside other
    # tests' it once read 0.44), so it is not asserted here: the model is checked against real trainings (decide)
    from gpuenv.decide import parts_of
    from gpuenv.history.load import load_records

    rate = {n: hc[n]["env_steps_per_s"]["median"] for n in ("collect", "learn", "update")}
    (record,), _ = load_records(list((tmp_path / "out").rglob("*halfcheetah*.json")))
    parts = parts_of(record)
    assert parts is not None and parts.rate == pytest.approx(1 / (1 / rate["collect"] + 1 / rate["learn"])) and rate["update"] > 0
    assert recs["halfcheetah"]["settings"]["phase_ppo"] == {"batch_size": 64, "n_epochs": 1, "n_steps": 16}
    assert hc["inference"]["details"]["definition"] == ("suites/ppo.toml case ppo-sb3-envpool-sync-halfcheetah-n1 with "
                                                        "batch_size=64, n_epochs=1, n_steps=16 (the suite's phase_ppo)")
    assert hc["inference"]["details"]["policy_device"] == "cpu" and hc["vecenv"]["details"]["normalize"] is True
    assert cp["step"]["absent"].startswith("cartpole ends episodes on a termination condition")
    assert cp["step"]["env_steps_per_s"] is None and cp["update"]["env_steps_per_s"]["median"] > 0
    out = " ".join(r.stdout.split())
    assert "halfcheetah: where the rate goes" in out and "+inference" in out and "+update" in out
    assert "envpool:sync / cartpole phase step: n/a: cartpole ends episodes" in out


# --- summaries and tables from synthetic results -------------------------------------------------


def _result(rates, phases):
    return {"env_steps_per_s": rates, "phases_s": {"compile": 0.0}, "compile_cache": "n/a", "startup_s": 1.0,
            "steps_per_value": 100, "value_s": [0.1] * len(rates), "recalibrated": False,
            "resources": {"bottleneck": None, "memory": {"tree_pss_peak_mib": 100.0}}, "phases": phases}


def _phase(rates):
    return {"env_steps_per_s": rates, "how": "h", "chunk_steps": 10, "warmups": 1, "details": {}}


def test_phase_summary_reset_cost_and_absent_reasons():
    results = [
        _result([1000.0, 1010.0], {"step": _phase([2000.0, 2020.0]), "update": {"absent": "no PPO env"},
                                   "inference": {"failed": "RuntimeError: boom"}}),
        _result([990.0, 1000.0], {"step": _phase([1990.0, 2000.0]), "update": {"absent": "no PPO env"},
                                  "inference": {"failed": "RuntimeError: boom"}}),
    ]
    s = summarize_case(results, 1, 1, num_envs=4, episode_steps=1000)
    ThroughputSummary.model_validate(s)  # the record model takes what the builder writes
    ph = s["phases"]
    assert 1.9 < ph["step"]["vs_step_reset"]["median"] < 2.1
    # 1000 steps x (1/1000 - 1/2000) s = 0.5 s per env reset, amortised over the batch
    assert ph["step"]["reset_cost_us"] == pytest.approx(0.5e6, rel=0.03) and ph["step"]["reset_cost_within_noise"] is False
    assert ph["update"] == {"absent": "no PPO env"}
    assert ph["inference"] == {"failed": "RuntimeError: boom"}
    # the parts of a record the tables read (model_construct: the rest of a record is not needed here)
    rec = ThroughputRecord.model_construct(status="ok", run_id="r", summary=ThroughputSummary.model_validate(s),
                                           case=ThroughputCase.model_construct(task="halfcheetah", backend="b", variant="v", num_envs=4))
    md = phases_markdown([rec])
    assert "| halfcheetah | b:v | 4 | 2,000 (2.00x) | 1,000 (1x) |  | failed |  |  | n/a | 500,000.0 |" in md
    assert phase_tables([rec])[0].title.startswith("halfcheetah: where the rate goes")


# --- device memory --------------------------------------------------------------------------------


def test_device_memory_comes_from_the_libraries_loaded_and_is_absent_otherwise():
    fake_jax = types.SimpleNamespace(devices=lambda: [types.SimpleNamespace(memory_stats=lambda: {"peak_bytes_in_use": 3 * 2**20})])
    cuda = types.SimpleNamespace(is_initialized=lambda: True, max_memory_allocated=lambda: 2**20)
    fake_torch = types.SimpleNamespace(cuda=cuda)
    procs = [types.SimpleNamespace(pid=11, usedGpuMemory=5 * 2**20), types.SimpleNamespace(pid=99, usedGpuMemory=2**30)]
    nvml = (types.SimpleNamespace(nvmlDeviceGetComputeRunningProcesses=lambda h: procs), object())
    d = device_memory([11, 12], nvml, {"jax": fake_jax, "torch": fake_torch})
    assert d["device_peak_mib"] == 4.0 and d["nvml_process_mib"] == 5.0  # only this worker's process tree
    assert "jax memory_stats" in d["device_source"] and "torch cuda.max_memory_allocated" in d["device_source"]
    assert device_memory([1], None, {}) == {"device_peak_mib": None, "device_source": None, "nvml_process_mib": None}


def test_jax_on_the_cpu_reports_no_device_memory_and_workers_turn_preallocation_off(monkeypatch):
    import jax

    from gpuenv.backends import jax_cache

    assert device_memory([1], None, {"jax": jax})["device_peak_mib"] is None  # CPU: memory_stats() is None
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    assert jax_cache.worker_env()["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")  # the user's choice stands
    assert jax_cache.worker_env()["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"


def test_a_phase_that_hangs_loses_only_itself_the_cases_figure_is_kept(cli, tmp_path):
    suite = fake_suite(tmp_path / "hang.toml", '"fake:phasehang", "fake:ok"', timeout=15, task="halfcheetah",
                       matrix_extra='phases = ["step"]\n')
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    recs = {rec["case"]["variant"]: rec for rec in (load(p) for p in (tmp_path / "out").rglob("*.json"))}
    hung = recs["phasehang"]
    assert hung["status"] == "ok" and hung["summary"]["env_steps_per_s"]["median"] > 0  # measured before the phase
    assert hung["processes"][0]["incomplete"].startswith("timeout: timed out after 15 s")
    step = hung["summary"]["phases"]["step"]
    assert step["env_steps_per_s"] is None and step["not_finished_within_s"] == 15 and step["failed"] is None
    assert recs["ok"]["summary"]["phases"]["step"]["how"] == "none: fake, no time limit"  # the other case is untouched
    out = " ".join(r.stdout.split())
    assert "not finished in 15 s" in out  # the table says what happened, with the time
    assert "phase step: not finished in 15 s: the case's timeout_s (15 s) stopped the worker while this phase ran" in out


def test_a_phase_cut_off_by_the_timeout_is_not_finished_and_any_other_end_is_a_failure():
    from gpuenv.modes.throughput.phases import NOT_FINISHED, unfinished

    pending = {"failed": NOT_FINISHED}
    assert unfinished(pending, "timeout: timed out after 300 s (hung or too slow); killed", 300.0) == {"not_finished_within_s": 300.0}
    assert unfinished(pending, "killed: worker killed by SIGSEGV", 300.0) == {"failed": f"{NOT_FINISHED} (killed: worker killed by SIGSEGV)"}
    assert unfinished({"failed": "RuntimeError: x"}, "timeout: ...", 300.0) == {"failed": "RuntimeError: x"}  # it ended by itself
    assert unfinished(pending, None, 300.0) is pending


def test_phase_ppo_sizes_are_checked(tmp_path):
    from gpuenv.modes.throughput.phases import check_sizes

    assert check_sizes({"n_steps": 64}, "s") == (("n_steps", 64),)
    for bad, msg in (({"lr": 1}, "not a size it can set"), ({"n_steps": 0}, "must be an integer in 1.."),
                     ({"n_steps": True}, "must be an integer"), ([1], "must be a table")):
        with pytest.raises(UserError, match=msg):
            check_sizes(bad, "s")


def test_the_jax_cache_falls_back_when_home_is_not_writable(tmp_path, monkeypatch):
    from gpuenv.backends import jax_cache

    home = tmp_path / "not-a-dir"
    home.write_text("")  # no directory can be made under it, whoever runs this (root included)
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    env = jax_cache.worker_env()
    assert env["JAX_COMPILATION_CACHE_DIR"].endswith(f"gpuenv-jax-{os.getuid()}")
    assert os.path.isdir(env["JAX_COMPILATION_CACHE_DIR"])


def test_the_worker_keeps_each_phase_as_it_finishes():
    """measure_phases reports after every phase (the worker checkpoints then): a later phase that
    hangs cannot take an earlier one's number with it."""
    import gpuenv_fake.adapter as fake
    from gpuenv.measure.timing import MeasureSettings
    from gpuenv.modes.throughput.phases import measure_phases

    native = default_registry().native("halfcheetah", "fake")
    case = Case("fake", "ok", "halfcheetah", 1, chunk_steps=5)
    seen: list[list[str]] = []
    out = measure_phases({"names": ["step", "vecenv"]}, fake, case, native, fake.open(case, native).facts.action_space,
                         MeasureSettings(min_time_s=0.01, values=1, warmups=0), time.perf_counter,
                         done=lambda o: seen.append(sorted(o)))
    assert seen == [["step"], ["step", "vecenv"]]
    assert out["step"]["env_steps_per_s"] and out["vecenv"]["absent"].startswith("fake declares no batched env")


def test_the_phase_table_never_cuts_a_backend_label_on_a_narrow_terminal():
    """`show` once printed "brax:genera…" in the phase table: its backend column is unbroken and as wide as
    the longest label, like the main table's, and a phase no row measured (+update here) takes no column."""
    from pathlib import Path

    from rich.console import Console

    from gpuenv.history.load import load_records

    run = Path(__file__).resolve().parents[1] / "results" / "published" / "20261205T115429Z-f686a5"
    records, _ = load_records([run])
    (table,) = [t for t in phase_tables(records) if "halfcheetah" in str(t.title)]
    console = Console(width=110, record=True, color_system=None)
    console.print(table)
    text = console.export_text()
    body = [ln for ln in text.splitlines() if ln.startswith("│")]
    assert "brax:generalized" in text and "gymnasium:subproc" in text and not any("…" in ln for ln in body), text
    assert "+update" not in text.split("step:")[0] and "learn" in text

"""PPO time-to-reward: suite validation, the run protocol (censoring, divergence), statistics, and the
records, with the scripted `fake` trainer in real worker processes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import write_suite

from gpuenv.errors import Diverged, UserError
from gpuenv.measure import stats
from gpuenv.modes import get_mode
from gpuenv.modes.base import Plan
from gpuenv.modes.ttr.build import summarize_runs
from gpuenv.modes.ttr.suite import PpoCase, RunSpec, TtrItem
from gpuenv.modes.ttr.train import run_training
from gpuenv.registry import default_registry
from gpuenv.results.schema import as_dict, load, validate
from gpuenv.run import runner
from gpuenv.suites import load_any

DEFAULT_REGISTRY = default_registry()


def run_ppo_plan(cases: list[PpoCase], run: RunSpec, *, suite: str, run_id: str, out_dir):
    plan = Plan(suite, [TtrItem(c, run) for c in cases], [], f"{run.seeds} seeds each")
    return [(as_dict(r), p) for r, p in runner.run_plan(get_mode("time-to-reward"), plan, run_id=run_id, out_dir=out_dir)]

FAKE = PpoCase(
    backend="fake",
    variant="ok",
    task="cartpole",
    trainer="fake",
    num_envs=2,
    threshold=475.0,
    max_env_steps=1000,
    max_time_s=60.0,
    eval_every_steps=100,
    eval_episodes=2,
)


class Clock:
    """A clock that advances 1 s per reading: every interval the protocol measures is known."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def spec(case: PpoCase, **hp) -> dict:
    return {"mode": "time-to-reward", "case": replace(case, hyperparams=hp).to_dict(), "seed": 0}


def test_run_stops_at_the_first_evaluation_that_reaches_the_threshold():
    r = run_training(spec(FAKE, returns=[10, 200, 480, 500]), clock=Clock())
    assert r["outcome"] == "reached" and r["stopped_by"] == "threshold"
    assert r["env_steps_to_threshold"] == 300
    assert [p["env_steps"] for p in r["curve"]] == [100, 200, 300]  # no evaluation after reaching
    # Wall time counts everything; train time leaves out startup and the earlier evaluations.
    reached = r["curve"][-1]
    assert r["time_to_threshold_s"] == reached["wall_s"]
    assert r["train_time_to_threshold_s"] == pytest.approx(reached["wall_s"] - r["startup_s"] - sum(p["eval_s"] for p in r["curve"]))
    assert all(p["train_s"] > 0 for p in r["curve"])
    assert r["train_time_to_threshold_s"] < r["time_to_threshold_s"]


def test_run_that_misses_is_censored_at_the_step_budget_not_dropped():
    r = run_training(spec(FAKE, returns=[10] * 20), clock=Clock())
    assert r["outcome"] == "censored" and r["stopped_by"] == "max_env_steps"
    assert r["env_steps_to_threshold"] == FAKE.max_env_steps
    assert r["time_to_threshold_s"] == r["wall_s"]  # the budget it spent, a lower bound
    assert len(r["curve"]) == 10


def test_run_is_censored_at_the_time_budget():
    r = run_training(spec(replace(FAKE, max_time_s=12.0), returns=[10] * 20), clock=Clock())
    assert r["outcome"] == "censored" and r["stopped_by"] == "max_time_s"
    assert r["env_steps_to_threshold"] < FAKE.max_env_steps


def test_divergence_raises():
    with pytest.raises(Diverged, match="nan"):
        run_training(spec(FAKE, diverge_at_eval=2), clock=Clock())
    with pytest.raises(Diverged, match="evaluation return is nan"):
        run_training(spec(FAKE, returns=[float("nan")]), clock=Clock())


def test_seeds_run_in_workers_a_diverged_seed_fails_and_the_others_go_on(tmp_path, monkeypatch):
    # Seed 1 of 3 diverges: its run is failed with the reason, seeds 0 and 2 still run.
    monkeypatch.setenv("GPUENV_FAKE_DIVERGE_SEED", "1")
    case = replace(FAKE, hyperparams={"reach_at_eval": 2})
    written = run_ppo_plan([case], RunSpec(seeds=3, pass_min_seeds=2, timeout_s=60), suite="t", run_id="r1", out_dir=tmp_path)
    (record, path), = written
    assert load(path) == record
    assert [r["status"] for r in record["runs"]] == ["reached", "failed", "reached"]
    failure = record["runs"][1]["failure"]
    assert failure["kind"] == "diverged" and "nan" in failure["reason"] and failure["process"] == 1
    assert record["runs"][0]["failure"] is None and record["runs"][2]["failure"] is None
    assert record["status"] == "ok" and record["failure"] is None
    s = record["summary"]
    assert (s["reached"], s["failed"], s["passed"]) == (2, 1, True)
    assert s["success_rate"] == pytest.approx(2 / 3)
    assert s["env_steps_to_threshold"]["iqm"] == 200
    # Memory: each run's process-tree PSS peak over its evaluations; device memory absent here, never 0.
    mem = record["runs"][0]["memory"]
    assert 20 < mem["tree_pss_peak_mib"] < 4096 and mem["device_peak_mib"] is None
    assert s["host_memory_mib"] >= min(r["memory"]["tree_pss_peak_mib"] for r in record["runs"] if r["status"] != "failed")
    assert s["host_memory_mib_per_env"] == pytest.approx(s["host_memory_mib"] / FAKE.num_envs, abs=0.01)
    assert s["device_peak_mib"] is None
    # Learning curves are in the record and in TensorBoard event files.
    assert record["runs"][0]["curve"][0]["env_steps"] == 100
    assert list((tmp_path / "tensorboard" / case.key / "seed0").glob("events.out.tfevents.*"))


def test_a_case_whose_seeds_all_diverge_is_failed_with_kind_diverged(tmp_path):
    case = replace(FAKE, hyperparams={"diverge_at_eval": 1})
    (record, path), = run_ppo_plan([case], RunSpec(seeds=2, pass_min_seeds=1, timeout_s=60), suite="t", run_id="r1", out_dir=tmp_path)
    assert load(path) == record
    assert record["status"] == "failed" and record["summary"] is None
    assert record["failure"]["kind"] == "diverged"
    assert [r["failure"]["kind"] for r in record["runs"]] == ["diverged", "diverged"]


def test_summary_counts_censored_runs_at_their_budget():
    runs = [
        {"status": "reached", "time_to_threshold_s": 10.0, "train_time_to_threshold_s": 5.0, "env_steps_to_threshold": 100,
         "startup_s": 1.0, "compile_s": 0.0, "eval_s": 1.0},
        {"status": "censored", "time_to_threshold_s": 50.0, "train_time_to_threshold_s": 40.0, "env_steps_to_threshold": 1000,
         "startup_s": 1.0, "compile_s": 0.0, "eval_s": 1.0},
    ]
    s = summarize_runs(runs, RunSpec(seeds=2, pass_min_seeds=2))
    assert (s["reached"], s["censored"], s["passed"]) == (1, 1, False)
    assert s["time_to_threshold_s"]["iqm"] == pytest.approx(30.0)
    assert any("lower bounds" in w for w in s["warnings"])


def test_a_fixed_step_budget_case_has_no_pass_criterion(tmp_path):
    """pass_min_seeds = 0 on a case: no pass criterion (for a fixed step budget, whose seeds end censored), so
    its censored seeds pass where [run]'s criterion would fail them; the run settings the plan gives the case
    (the record's settings) carry the case's value, never its record's case."""
    from gpuenv.modes.ttr.suite import plan

    path = _suite(tmp_path, run="[run]\nseeds = 3\npass_min_seeds = 2\n", extra="pass_min_seeds = 0\n")
    _, suite = load_any(str(path), DEFAULT_REGISTRY)
    (item,) = plan(suite, DEFAULT_REGISTRY, backends=None, tasks=None, num_envs=None).items
    assert item.run.pass_min_seeds == 0 and item.run.seeds == 3 and "pass_min_seeds" not in item.case.to_dict()
    censored = {"status": "censored", "time_to_threshold_s": 50.0, "train_time_to_threshold_s": 40.0, "env_steps_to_threshold": 1000,
                "startup_s": 1.0, "compile_s": 0.0, "eval_s": 1.0}
    s = summarize_runs([censored] * 3, item.run)
    assert (s["reached"], s["censored"], s["pass_min_seeds"], s["passed"]) == (0, 3, 0, True)
    assert not summarize_runs([censored] * 3, RunSpec(seeds=3, pass_min_seeds=2))["passed"]


# --- statistics ---------------------------------------------------------------------------------


def test_iqm_trims_a_quarter_each_side():
    assert stats.iqm([1, 2, 3, 4, 100, 200, 300, 400]) == pytest.approx((3 + 4 + 100 + 200) / 4)
    assert stats.iqm([5.0]) == 5.0
    assert stats.iqm([1, 2, 3]) == 2.0  # floor(3/4) = 0 trimmed: the mean, as rliable does


def test_aggregate_interval_brackets_the_iqm_and_shrinks_with_agreement():
    wide = stats.aggregate([10, 20, 30, 40, 50, 60, 70, 80])
    assert wide.ci_low <= wide.iqm <= wide.ci_high
    tight = stats.aggregate([44, 45, 45, 45, 46, 45, 44, 46])
    assert tight.ci_high - tight.ci_low < wide.ci_high - wide.ci_low


def test_probability_faster_with_censoring():
    fast = [(10.0, True), (11.0, True), (12.0, True)]
    slow = [(50.0, True), (60.0, True), (70.0, True)]
    assert stats.prob_faster(fast, slow)[0] == 1.0
    assert stats.prob_faster(slow, fast)[0] == 0.0
    assert stats.prob_faster(fast, fast)[0] == pytest.approx(0.5)
    # A run censored at 100 s loses to any run that reached sooner than 100 s ...
    assert stats.prob_faster(fast, [(100.0, False)])[0] == 1.0
    # ... but nothing is known against a run that reached after 100 s, or another censored run.
    assert stats.prob_faster([(150.0, True)], [(100.0, False)])[0] == 0.5
    assert stats.prob_faster([(100.0, False)], [(100.0, False)])[0] == 0.5
    p, lo, hi = stats.prob_faster(fast + slow, slow)
    assert lo <= p <= hi


# --- suite validation ---------------------------------------------------------------------------

CASE = """
[[case]]
task = "cartpole"
backends = ["gymnasium:dummy"]
trainer = "sb3"
num_envs = 8
threshold = {threshold}
max_env_steps = {budget}
max_time_s = 30
eval_every_steps = 1000
eval_episodes = 5
"""


def _suite(tmp_path, run="", threshold=475, budget=10000, extra=""):
    body = 'kind = "time-to-reward"\n' + run + CASE.format(threshold=threshold, budget=budget) + extra
    return write_suite(tmp_path / "s.toml", body)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": 600}, "threshold 600 is unreachable: the largest possible episode return of cartpole"),
        ({"budget": 500}, "budget max_env_steps=500 is below eval_every_steps=1000"),
        ({"run": "[run]\nseeds = 0\n"}, "seeds must be >= 1"),
        ({"run": "[run]\nseeds = 3\npass_min_seeds = 4\n"}, "pass_min_seeds must be between 1 and seeds"),
        ({"run": "[run]\nseeds = 3\n", "extra": "pass_min_seeds = 4\n"}, "pass_min_seeds must be between 0 (a fixed step budget"),
        ({"extra": "pass_min_seeds = -1\n"}, "#1: pass_min_seeds must be between 0"),
        ({"extra": "[case.hyperparams]\nlearning_rat = 0.1\n"}, "trainer 'sb3' has no hyperparameter 'learning_rat'"),
        ({"budget": 10500}, "max_env_steps=10500 must be a multiple of eval_every_steps=1000"),
        ({"run": "[run]\ntimeout_s = 40\n"}, "timeout_s=40 must be at least 1.5 x max_time_s=30"),
        ({"extra": "[case.hyperparams]\nlearning_rate = \"lin_x\"\n"}, "learning_rate = 'lin_x': use a number or 'lin_<start>'"),
        ({"extra": "[case.hyperparams]\npolicy_kwargs = { activation_fn = \"gelu\" }\n"}, "activation_fn = 'gelu': use one of tanh, relu, elu"),
    ],
)
def test_bad_suites_fail_before_training(tmp_path, kwargs, message):
    path = _suite(tmp_path, **kwargs)
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        load_any(str(path), DEFAULT_REGISTRY)


def test_trainer_must_fit_backend(tmp_path):
    path = write_suite(tmp_path / "s.toml", 'kind = "time-to-reward"\n' + CASE.format(threshold=1, budget=1000).replace('"sb3"', '"brax_ppo"'))
    with pytest.raises(UserError, match="trainer 'brax_ppo' cannot train on gymnasium:dummy"):
        load_any(str(path), DEFAULT_REGISTRY)


def test_shipped_ppo_suites_load():
    for name in ("ppo-smoke", "ppo"):
        mode, s = load_any(name, DEFAULT_REGISTRY)
        assert mode.name == "time-to-reward" and s.cases, name
    _, smoke = load_any("ppo-smoke", DEFAULT_REGISTRY)
    cartpole = {f"{c.backend}:{c.variant}" for c in smoke.cases if c.task == "cartpole"}
    assert cartpole == {"gymnasium:dummy", "gymnasium:subproc", "gymnasium:async", "pufferlib:mp", "envpool:sync", "gymnax:jit"}
    assert all(c.threshold == 475 for c in smoke.cases if c.task == "cartpole")
    assert (smoke.run.seeds, smoke.run.pass_min_seeds) == (3, 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "0"], "seeds must be >= 1"),
        (["--num-envs", "4"], "--num-envs does not apply to time-to-reward suites"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(cli, tmp_path, args, message):
    r = cli("bench", "--suite", "ppo-smoke", "--out", str(tmp_path), *args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_ppo_bench_with_fake_trainer_prints_table_and_keeps_records(cli, tmp_path):
    suite = write_suite(
        tmp_path / "fake.toml",
        'kind = "time-to-reward"\n[run]\nseeds = 2\npass_min_seeds = 2\ntimeout_s = 60\n'
        + CASE.format(threshold=475, budget=1000).replace('"gymnasium:dummy"', '"fake"').replace('"sb3"', '"fake"')
        + "[case.hyperparams]\nreach_at_eval = 1\n",
    )
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cartpole: time to eval return >= 475" in r.stdout
    assert "2/2" in r.stdout and "P(A reaches the threshold sooner" not in r.stdout  # one case: no pairs
    (path,) = (tmp_path / "out").glob("*/*.json")
    record = json.loads(path.read_text())
    validate(record)
    assert record["measurement_mode"] == "time-to-reward"
    shown = cli("show", "--markdown", str(path))
    assert shown.returncode == 0 and "| cartpole (>= 475) | fake:ok / fake |" in shown.stdout

"""The claims register and `gpuenv claims`, `gpuenv decide`, and the interactive site (opened in
headless Chromium through its chromedriver: a point hovered, its tooltip read, the claims page
screenshotted), and the publish workflow's build step run here on results/published."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from gpuenv import claims as cl
from gpuenv.decide import decide, parse_steps
from gpuenv.errors import UserError
from gpuenv.history.load import load_records
from gpuenv.results.schema import load, typed

PUBLISHED = ROOT / "results" / "published"
ONE_RUN = PUBLISHED / "20261202T140237Z-4d17bd"


def rec(name: str) -> dict:
    return load(ONE_RUN / f"{name}.json")  # through the reader: migrated to the current schema


def check_all(records: list[dict], path: Path) -> list:
    """The claims checked against these records (edited as dicts here), read as the readers take them."""
    return cl.check_all([typed(r) for r in records], path)


def one_claim(tmp_path: Path, check: str, value: float, unit: str = "env steps/s") -> Path:
    """A register of one claim with this [claim.check] body."""
    p = tmp_path / "register.toml"
    p.write_text(f'[[claim]]\nid = "x"\nwho = "w"\nstated = "s"\nvalue = {value}\nunit = "{unit}"\nhardware = "h"\n'
                 f'hardware_class = "cpu"\nprotocol = "p"\nsource = "s"\n[claim.check]\n{check}')
    return p


def test_the_register_holds_the_course_claims_and_the_anchors_each_with_its_source():
    claims = cl.load_register()
    ids = {c.id for c in claims}
    for seed in ("course-godot", "course-envpool-atari", "course-envpool-mujoco", "course-isaac", "course-mjx", "course-brax",
                 "course-1b-at-40k", "course-1b-at-5m", "course-sb3-wrapping", "course-envpool-10x", "course-envpool-atari-64",
                 "course-subproc-atari-64"):
        assert seed in ids, seed
    whos = " ".join(c.who for c in claims)
    for anchor in ("EnvPool", "Brax", "MJX", "Isaac Lab", "ManiSkill", "Godot RL"):
        assert anchor in whos, anchor
    assert all(c.source and c.hardware and c.protocol for c in claims)
    raw = tomllib.loads(cl.REGISTER.read_text())
    assert len(raw["claim"]) == len(claims)


def test_every_claim_gets_a_measured_counterpart_or_the_run_it_needs(cli):
    r = cli("claims", str(PUBLISHED))
    assert r.returncode == 0, r.stderr
    blocks = r.stdout.split("\n\n")[1:]
    ids = [c.id for c in cl.load_register()]
    assert len([b for b in blocks if b.strip()]) == len(ids)
    for cid, block in zip(ids, blocks):
        assert block.startswith(f"{cid}: "), block[:80]
        assert ("measured: " in block and "claimed / measured: " in block) or "to check it: " in block \
            or "the arithmetic holds" in block, block
    out = r.stdout
    # the course's 1B-step arithmetic, checked; EnvPool's frames converted; a GPU claim says which run checks it
    assert "1,000,000,000 steps / 40,000 steps/s = 25,000 s (6.9 h); stated 7.0 h: the arithmetic holds" in out
    assert "the claim counts frames (env steps x frame_skip 4)" in out
    assert "to check it on its hardware: gpuenv bench --backend isaaclab --task cartpole --num-envs 4096 on a GPU machine" in out
    assert "maniskill is not a gpuenv backend" in out
    data = json.loads(cli("claims", str(PUBLISHED), "--json").stdout)
    assert {d["id"] for d in data} == set(ids) and all(d["status"] in ("measured", "arithmetic", "not measured") for d in data)


def test_a_rate_claim_in_frames_uses_the_closest_case_and_converts_the_unit(tmp_path):
    path = one_claim(tmp_path, 'kind = "rate"\nbackend = "envpool:sync"\ntask = "pong"\nnum_envs = 6\nframe_skip = 4\n', 1e6, "frames/s")
    recs = [rec("envpool-sync-pong-n1"), rec("envpool-sync-pong-n8"), rec("envpool-sync-pong-n64")]
    (res,) = check_all(recs, path)
    assert res.measured is not None and res.measured.case_key == "envpool-sync-pong-n8"  # nearest to 6 on a log scale
    steps = recs[1]["summary"]["env_steps_per_s"]["median"]
    assert res.measured.value == pytest.approx(4 * steps) and res.ratio == pytest.approx(1e6 / (4 * steps))
    assert any("num_envs: claimed at 6, closest measured 8" in d for d in res.differences)


def test_the_claims_own_protocol_run_tells_protocol_from_hardware(tmp_path):
    path = one_claim(tmp_path, 'kind = "rate"\nbackend = "envpool:sync"\ntask = "pong"\nnum_envs = 8\n'
                               'protocol_backend = "envpool:sync-pinned"\n', 1e5)
    ours = rec("envpool-sync-pong-n8")
    theirs = copy.deepcopy(ours)
    theirs["case"]["variant"], theirs["case_key"] = "sync-pinned", "envpool-sync-pinned-pong-n8"
    for k in ("median", "ci_low", "ci_high"):
        theirs["summary"]["env_steps_per_s"][k] *= 1.16
    (res,) = check_all([ours, theirs], path)
    assert res.protocol_run is not None and res.protocol_run.case_key == "envpool-sync-pinned-pong-n8"
    line = next(d for d in res.differences if d.startswith("protocol:"))
    assert "measured 1.16x gpuenv's" in line and "is hardware" in line
    (alone,) = check_all([ours], path)
    assert any("is not measured in the same run yet: gpuenv bench --backend envpool:sync-pinned --task pong --num-envs 8" in d
               for d in alone.differences)
    other_run = copy.deepcopy(theirs)
    other_run["run_id"] = "20990101T000000Z-000000"  # another run (another time, maybe machine): not a protocol pair
    (apart,) = check_all([ours, other_run], path)
    assert apart.protocol_run is None


def test_a_ratio_claim_takes_both_sides_from_the_newest_run_that_has_both(tmp_path):
    path = one_claim(tmp_path, 'kind = "ratio"\nnumerator = "envpool:sync"\ndenominator = "gymnasium:subproc"\ntask = "cartpole"\n'
                               'num_envs = 8\n', 10, "x")
    old_a, old_b = rec("envpool-sync-cartpole-n8"), rec("gymnasium-subproc-cartpole-n8")

    def moved(r: dict, run: str, factor: float, n: int | None = None) -> dict:
        r = copy.deepcopy(r)
        r["run_id"] = run
        if n:
            r["case"]["num_envs"], r["case_key"] = n, r["case_key"].replace("-n8", f"-n{n}")
        for k in ("median", "ci_low", "ci_high"):
            r["summary"]["env_steps_per_s"][k] *= factor
        return r

    only_num = moved(old_a, "20990101T000000Z-aaaaaa", 3.0)  # a newer run without the denominator: not paired
    (res,) = check_all([old_a, old_b, only_num], path)
    assert res.measured is not None and res.measured.record.run_id == old_a["run_id"]
    newer = [moved(old_a, "20990102T000000Z-bbbbbb", 2.0), moved(old_b, "20990102T000000Z-bbbbbb", 0.5),
             moved(old_a, "20990102T000000Z-bbbbbb", 1.0, 64), moved(old_b, "20990102T000000Z-bbbbbb", 1.0, 64)]
    (res,) = check_all([old_a, old_b, only_num, *newer], path)
    want = 4 * old_a["summary"]["env_steps_per_s"]["median"] / old_b["summary"]["env_steps_per_s"]["median"]
    assert res.measured is not None and res.measured.value == pytest.approx(want) and "at 8 envs" in res.detail


def test_a_ratio_claim_pairs_both_backends_at_one_num_envs(tmp_path):
    path = one_claim(tmp_path, 'kind = "ratio"\nnumerator = "envpool:sync"\ndenominator = "gymnasium:subproc"\ntask = "cartpole"\n'
                               'num_envs = 8\n', 10, "x")
    a, b = rec("envpool-sync-cartpole-n8"), rec("gymnasium-subproc-cartpole-n8")
    (res,) = check_all([a, b, rec("gymnasium-subproc-cartpole-n64")], path)
    want = a["summary"]["env_steps_per_s"]["median"] / b["summary"]["env_steps_per_s"]["median"]
    assert res.measured is not None and res.measured.value == pytest.approx(want)
    assert res.measured.ci_low < want < res.measured.ci_high and "at 8 envs" in res.detail


def test_a_bad_register_is_one_line_naming_the_claim_and_key(cli, tmp_path):
    path = one_claim(tmp_path, 'kind = "rate"\n', 1, "FPS")
    r = cli("claims", str(ONE_RUN), env={"GPUENV_CLAIMS": str(path)})
    assert r.returncode == 2 and "claim x: unit 'FPS' is not one of" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    path.write_text(path.read_text().replace('unit = "FPS"', 'unit = "frames/s"\ncolour = "red"'))
    r = cli("claims", str(ONE_RUN), env={"GPUENV_CLAIMS": str(path)})
    assert r.returncode == 2 and "unknown key 'colour'" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("check, value, msg", [
    ('kind = "arithmetic"\nsteps = 1e9\n', 1, "an arithmetic check needs check.rate"),
    ('kind = "rate"\nbackend = "envpool"\ntask = "pong"\nnum_envs = 0\n', 1, "num_envs must be a positive number (got 0)"),
    ('kind = "rate"\nbackend = "envpool"\ntask = "pong"\n', '"10"', "value must be a positive number (got '10')"),
    ('kind = "rate"\nbackend = "envpool"\ntask = "pong"\n', -5, "value must be a positive number (got -5)"),
    ('kind = "ratio"\nnumerator = "envpool"\ntask = "pong"\n', 2, "a ratio check needs check.denominator"),
    ('kind = "rate"\nbackend = 3\ntask = "pong"\n', 1, "backend must be text"),
])
def test_register_values_are_checked_before_any_arithmetic(cli, tmp_path, check, value, msg):
    path = one_claim(tmp_path, check, value)
    r = cli("claims", str(ONE_RUN), env={"GPUENV_CLAIMS": str(path)})
    assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# --- decide -------------------------------------------------------------------------------------------


VM = "5"  # the project's 2-core Intel VM in results/published, as `gpuenv show results/published` numbers machines


def test_decide_answers_the_course_question_from_this_machines_records(cli):
    r = cli("decide", "--task", "halfcheetah", "--budget", "49M", str(PUBLISHED), "--machine", VM)  # paths positional, as in claims, report
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert f"from records of [{VM}] Intel(R) Xeon(R) Processor (2 cores), no GPU" in out
    assert "row: budget < 50M steps: CPU is fine" in out
    # the newest published run (make bench at 688bf61) measured +inference and learn for halfcheetah: the
    # answer is predicted PPO training, hours, not minutes of stepping; backends without parts say so
    assert re.search(r"answer: envpool:\w+: trains 1 x 49,000,000 steps in [\d.]+ h \[[\d.]+ h-[\d.]+ h\] on the records' machine \(\[5\] Intel",
                     out), out
    assert "training not predicted" in out and "on this machine" not in out
    assert "needs GPU measurements:" in out and "brax:generalized" in out and "mjx:jax" in out
    table = r.stdout.split("row:")[0]
    assert "gymnasium:subproc" in table and "stepping to budget" in table
    old = cli("decide", "--task", "halfcheetah", "--budget", "49M", "--results", str(PUBLISHED), "-m", VM)  # the old spelling still works
    assert old.returncode == 0 and old.stdout == r.stdout


def test_a_budget_of_exactly_50M_is_not_below_the_courses_50M(published_records):
    """The course wrote "Gesamt-Budget < 50M Timesteps": 49,999,999 steps land on its CPU row, 50,000,000 do
    not (the GPU row, which says why), and neither does 25M x 2 configs (the total counts)."""
    from gpuenv.decide import ROWS

    assert decide("halfcheetah", 49_999_999, 1, published_records, machine=VM).row == ROWS["small"]
    at = decide("halfcheetah", 50_000_000, 1, published_records, machine=VM)
    assert at.row == ROWS["gpu"]
    assert any(w.startswith("50,000,000 steps in all is not below the course's 50,000,000 (the course's 'Gesamt-Budget < 50M "
                            "Timesteps': exactly 50M is not below it)") for w in at.why), at.why
    assert decide("halfcheetah", 25_000_000, 2, published_records, machine=VM).row == ROWS["gpu"]


def test_decide_never_answers_with_a_protocol_no_trainer_steps(published_records):
    """Genesis's reused target (its speed benchmark's loop, 3.4x the fresh-target rate on the AMD VM) is measured and
    shown, never the answer: a trainer picks a new action every step."""
    d = decide("franka_scene", 49_000_000, 1, published_records)
    assert d.machine.startswith("[3] AMD EPYC"), d.machine  # make bench at 01608be measured both protocols
    assert d.answer.startswith("genesis:random (64 envs)") and {o.selector for o in d.options} == {"genesis:random"}
    assert "genesis:reused-noself left out: one joint target set once and reused for every step (Genesis's speed-benchmark protocol)" in "\n".join(d.why)


def test_decide_answers_from_the_newest_machine_and_names_the_others(cli, published_records):
    """The newest halfcheetah records answer unless --machine picks another. The lent H200's gpu-check
    runs (seven runs whose reference speed moved 2x: one machine by its name): the answer is theirs,
    says it measured no CPU backend, and lists the other machines with the flag that picks one. Brax's own PPO, measured end to end
    there, trains in minutes where the shared SB3 PPO on the same GPU is predicted to take a day."""
    from gpuenv.decide import EndToEnd, Parts

    newest = decide("halfcheetah", 49_000_000, 1, published_records)  # no --machine: the newest records' machine
    assert newest.machine.startswith("[3] AMD EPYC (2 cores)"), newest.machine  # make bench at 7a77e44 (01608be's machine)
    d = decide("halfcheetah", 49_000_000, 1, published_records, machine="lent-h200")
    assert d.machine.startswith("[8] lent-h200: ") and "NVIDIA H200" in d.machine and "over 7 runs" in d.machine
    assert {o.selector for o in d.options} == {"brax:positional", "brax:generalized", "mjx:jax"} and all(o.device == "gpu" for o in d.options)
    brax = next(o for o in d.options if o.selector == "brax:generalized")
    # parts of another run of the same machine (the newest run with parts is half-finished, so left out)
    assert brax.num_envs == 8192 and isinstance(brax.training, Parts) and brax.training.num_envs == 1024
    native = next(o for o in d.options if o.selector == "brax:positional")
    assert isinstance(native.training, EndToEnd) and native.training.num_envs == 2048 and native.training.seeds == 1
    assert native.training.rate == pytest.approx(10485760 / 29.582495214597913)  # env steps / training s of its one seed
    assert native.training.fixed_s == pytest.approx(11.989064133999996 + 55.860793590545654)  # startup + compile
    mid, lo, hi = native.predicted_s(49_000_000, 1)
    assert mid == pytest.approx(native.training.fixed_s + 49e6 / native.training.rate) and lo == mid == hi  # one seed: no spread
    assert mid < 300 < brax.predicted_s(49_000_000, 1)[0] / 100  # minutes, against a day
    assert d.answer.startswith("brax:positional: trains 1 x 49,000,000 steps in 3 min") and "Brax's native trainer" in d.answer
    assert "not composed: the interval is the spread of its 1 seed(s)' training rates; measured end to end (" in d.answer
    assert d.answer.endswith("one seed, so no seed checks another") and d.validation.seeds == 0 and d.validation.error_low is None
    assert any("no CPU backend was measured on this machine" in w for w in d.why)
    assert not [n for n in d.needs_gpu if "projection" in n]  # brax and mjx were measured on its GPU: no claim stands in
    assert len(d.other_machines) == 6 and all(o.startswith("[") for o in d.other_machines)
    # from the VM, the H200's GPU simulator is set beside the VM's quickest CPU backend, each on its own machine
    vm = decide("halfcheetah", 10**9, 1, published_records, machine=VM)
    (across,) = [v for v in vm.versus if v.startswith("measured on another machine, [8] lent-h200")]
    assert "brax:positional on its GPU, training 48 min for 1 x 1,000,000,000 steps at 2048 envs" in across and "against envpool:sync here, training" in across
    assert "the GPU machine finishes first above" in across
    assert not [v for v in d.versus if v.startswith("measured on another machine")]  # the H200 measured its GPU itself
    r = cli("decide", "--task", "halfcheetah", "--budget", "49M", str(PUBLISHED), "--machine", "9")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--machine '9' names none of the machines with halfcheetah records" in r.stderr
    r = cli("decide", "--task", "halfcheetah", "--budget", "49M", str(PUBLISHED), "--machine", "xeon")
    assert r.returncode == 2 and "names 4 of the machines" in r.stderr


def test_a_time_to_reward_record_is_the_training_model_where_no_parts_were_measured(published_records):
    """The AMD VM ran ppo-smoke but measured no collect or learn phase: its SB3 runs' own training rate,
    measured whole, predicts training (named so); a run that never reached its threshold says so."""
    from gpuenv.decide import EndToEnd

    d = decide("cartpole", 1_000_000, 1, published_records, machine="1")
    o = next(o for o in d.options if o.selector == "gymnasium:dummy")
    assert isinstance(o.training, EndToEnd) and o.training.trainer.startswith("Stable-Baselines3 PPO (torch, CPU)")
    assert o.training.seeds == 3 and o.training.rates[1] <= o.training.rate <= o.training.rates[2]
    assert "measured end to end" in o.training.how and "ppo-smoke suite" in o.training.trainer
    assert "PPO training" in d.answer or any("measured end to end" in w for w in d.why)
    h200 = decide("halfcheetah", 49_000_000, 1, published_records, machine="lent-h200")
    native = next(o for o in h200.options if o.selector == "brax:positional")
    assert native.ttr.startswith("PPO (brax_ppo, ppo-brax_ppo-brax-positional-halfcheetah-n2048) did not reach return 3000 within "
                                 "its budget (10,000,000 env steps or 300 s), 0/1 seeds, training at 354,458 env steps/s"), native.ttr


@pytest.fixture(scope="module")
def published_records() -> list:
    records, _ = load_records([PUBLISHED])
    return records


@pytest.mark.parametrize("task, budget, configs, row, answer", [
    ("halfcheetah", 10_000_000, 20, "20+ hyperparameter configs: consider EnvPool", "envpool:"),
    ("halfcheetah", 10**9, 1, "a NeurIPS submission: almost surely GPU", "a GPU simulator"),
    ("ballchase", 10**6, 1, "course tasks: Godot CPU is fine", "godot:"),
])
def test_decide_lands_in_each_row_of_the_table(published_records, task, budget, configs, row, answer):
    d = decide(task, budget, configs, published_records, machine=VM)
    assert d.row == row and d.answer.startswith(answer), d.answer
    assert d.options and all(o.rate > 0 for o in d.options)
    if budget == 10**9:
        assert any("this machine measured no backend on a GPU" in w for w in d.why)
        # the published claims of the GPU backends never measured on a GPU on this machine, as projections
        assert any(n.startswith("unverified projection from course material (decision lecture)'s claim 'Brax ~10M steps/s' (RTX 3090): "
                                "1 x 1,000,000,000 steps of brax stepping in 100 s at that rate, no training, not measured here") and
                   "make gpu-check" in n for n in d.needs_gpu), d.needs_gpu


def with_learn(record: dict, learn: float, inference: float | None = None) -> dict:
    """A throughput record given +inference and learn phases (rates with +-5% intervals)."""
    r = copy.deepcopy(record)
    def phase(rate):
        return {"env_steps_per_s": {"median": rate, "ci_low": 0.95 * rate, "ci_high": 1.05 * rate, "rel_half_width": 0.05,
                                    "n_values": 9, "n_processes": 3, "confidence": 0.95},
                "how": "test", "details": {"definition": "suites/ppo.toml case test"}}
    phases = r["summary"].setdefault("phases", {}) or {}
    r["summary"]["phases"] = {**phases, "learn": phase(learn), **({"inference": phase(inference)} if inference else {})}
    r["settings"]["phases"] = sorted(set(r["settings"].get("phases", [])) | {"learn", "inference"})
    return r


def write_records(folder: Path, records: list[dict]) -> Path:
    from gpuenv.results.store import prepare_dir, write_record

    d = prepare_dir(folder)
    for r in records:
        write_record(d, r)
    return folder


def test_decide_predicts_training_from_its_parts(cli, tmp_path):
    run = PUBLISHED / "20261203T221232Z-6a690a"
    recs = [load(p) for p in sorted(run.glob("*.json"))]
    hc = next(r for r in recs if r["case_key"] == "envpool-sync-halfcheetah-n8")
    inference = hc["summary"]["phases"]["inference"]["env_steps_per_s"]["median"]
    recs = [with_learn(r, 2000.0) if r is hc else r for r in recs]
    folder = write_records(tmp_path / "run", recs)
    records, _ = load_records([folder])
    d = decide("halfcheetah", 49_000_000, 1, records)
    o = next(o for o in d.options if o.selector == "envpool:sync")
    mid, lo, hi = o.predicted_s(49_000_000, 1)
    assert mid == pytest.approx(o.training.fixed_s + 49e6 * (1 / inference + 1 / 2000.0))  # the startup of the parts' own size
    assert lo < mid < hi and o.training.num_envs == 8 and o.training.rate < min(inference, 2000.0)
    # the decision ranks by training where predicted: envpool:sync, the only option with parts
    assert d.answer.startswith("envpool:sync: trains 1 x 49,000,000 steps in") and "SB3 PPO, suites/ppo.toml case ppo-sb3-envpool-sync-halfcheetah-n1" in d.answer
    r = cli("decide", "--task", "halfcheetah", "--budget", "49M", str(folder))
    out = " ".join(r.stdout.split())
    assert r.returncode == 0 and "PPO training = startup+compile + steps / training rate" in out, out
    assert "(1/rate = 1/collection + 1/learning)" in out
    j = cli("decide", "--task", "halfcheetah", "--budget", "49M", str(folder), "--json")
    doc = json.loads(j.stdout)
    (env,) = [x for x in doc["options"] if x["backend"] == "envpool:sync"]
    assert env["training"]["predicted_s"] == pytest.approx(mid) and env["training"]["learning_samples_per_s"] == 2000.0
    assert doc["answer"] == d.answer and doc["versus_the_course"] and doc["machine"].startswith("[1] Intel")


def with_phases(record: dict, learner: str, collect: float, learn: float | None = None) -> dict:
    """A throughput record given a collect phase (and a learn phase) of one learner (phases.learner_key)."""
    r = copy.deepcopy(record)
    def phase(rate):
        return {"env_steps_per_s": {"median": rate, "ci_low": 0.95 * rate, "ci_high": 1.05 * rate, "rel_half_width": 0.05,
                                    "n_values": 9, "n_processes": 3, "confidence": 0.95},
                "how": "test", "details": {"definition": "suites/ppo.toml case test", "learner": learner}}
    r["summary"]["phases"] = {"collect": phase(collect), **({"learn": phase(learn)} if learn else {})}
    r["settings"]["phases"] = ["collect", *(["learn"] if learn else [])]
    return r


def test_one_learn_phase_serves_every_backend_of_the_same_learner_and_decide_json_has_the_pick(cli, tmp_path):
    """Learning costs the network, batch, epochs and device, not the simulator: a backend whose collect phase
    ran the same learner (task, definition but n_steps, device, threads) takes the learn rate another
    backend's record measured, and says whose; another learner's is never taken. decide --json carries the
    pick, the row's key, the course's threshold and the validation as fields."""
    from gpuenv.modes.throughput.phases import learner_key

    key = learner_key("halfcheetah", {"n_steps": 64, "batch_size": 64, "n_epochs": 20}, "cpu", 2)
    assert key == learner_key("halfcheetah", {"n_steps": 16, "batch_size": 64, "n_epochs": 20}, "cpu", 2)  # n_steps: no part of it
    assert key != learner_key("halfcheetah", {"n_steps": 64, "batch_size": 32, "n_epochs": 20}, "cpu", 2)
    assert key != learner_key("ant", {"n_steps": 64, "batch_size": 64, "n_epochs": 20}, "cpu", 2)
    run = PUBLISHED / "20261203T221232Z-6a690a"
    recs = {r["case_key"]: r for r in (load(p) for p in sorted(run.glob("*.json")))}
    env = with_phases(recs["envpool-sync-halfcheetah-n8"], key, 4000.0, 2000.0)
    gym = with_phases(recs["gymnasium-subproc-halfcheetah-n8"], key, 1000.0)  # collect only
    other = with_phases(recs["gymnasium-dummy-halfcheetah-n8"], key.replace('"cpu"', '"cuda"'), 3000.0)  # another device's learner
    kept = [r for k, r in recs.items() if k.endswith("halfcheetah-n8") and k not in
            ("envpool-sync-halfcheetah-n8", "gymnasium-subproc-halfcheetah-n8", "gymnasium-dummy-halfcheetah-n8")]
    folder = write_records(tmp_path / "run", [env, gym, other, *kept])
    d = decide("halfcheetah", 10_000_000, 1, load_records([folder])[0])
    by = {o.selector: o for o in d.options}
    g = by["gymnasium:subproc"].training
    assert g is not None and g.learn[0] == 2000.0 and g.collect[0] == 1000.0 and g.learn_case == "envpool-sync-halfcheetah-n8"
    assert g.how.endswith("(learn phase of envpool-sync-halfcheetah-n8: the same learner)")
    assert by["envpool:sync"].training.learn_case == ""  # its own
    assert by["gymnasium:dummy"].training is None  # a cuda learner is not the cpu one
    doc = json.loads(cli("decide", "--task", "halfcheetah", "--budget", "10M", str(folder), "--json").stdout)
    assert doc["row_key"] == "small" and doc["pick"]["backend"] == "envpool:sync" == d.pick.selector
    assert doc["pick"]["training"]["predicted_s"] == pytest.approx(d.pick.predicted_s(10_000_000, 1)[0])
    assert doc["course"] == {"budget_limit_steps": 50_000_000, "total_steps": 10_000_000, "below_budget_limit": True,
                             "configs_envpool": 20, "course_task": False}
    assert doc["validation"]["kind"] == "not validated" and doc["validation"]["checks"] == []
    # no suite trains halfcheetah at the parts' 8 envs on it (validate and ppo train it at 1): none would check them
    assert doc["validation"]["would_validate"] is None
    assert doc["validation"]["text"] == "not validated: no time-to-reward suite trains it with this trainer at the parts' size yet"
    assert doc["validation"]["text"] in doc["answer"] and doc["gpu_measured_here"] is False


def test_the_training_model_is_checked_against_time_to_reward_on_the_same_machine(tmp_path):
    from gpuenv.decide import model_checks

    ttr_run = PUBLISHED / "20261202T164356Z-a56388"  # ppo-smoke on the AMD VM: cartpole at 8 envs
    ttr = load(ttr_run / "ppo-sb3-gymnasium-dummy-cartpole-n8.json")
    amd = load(ONE_RUN / "gymnasium-dummy-cartpole-n8.json")  # a throughput record of the same machine, backend, size
    intel = load(PUBLISHED / "20261203T221232Z-6a690a" / "gymnasium-dummy-cartpole-n8.json")
    folder = write_records(tmp_path / "parts", [ttr, with_learn(amd, 3000.0, 9000.0)])
    other = write_records(tmp_path / "other", [ttr, with_learn(intel, 3000.0, 9000.0)])
    (check,) = model_checks(load_records([folder])[0])
    reached = [x for x in ttr["runs"] if x["status"] == "reached"]
    steps = sorted(x["env_steps_to_threshold"] for x in reached)[len(reached) // 2]
    assert check.case_key == ttr["case_key"] and check.task == "cartpole" and check.seeds == len(reached)
    assert check.predicted_s == pytest.approx(steps * (1 / 9000 + 1 / 3000), rel=0.2)
    assert check.error == pytest.approx(check.predicted_s / check.measured_s - 1)
    assert check.predicted_lo < check.predicted_s < check.predicted_hi
    assert model_checks(load_records([other])[0]) == []  # parts of another machine never predict this one's runs
    d = decide("cartpole", 10_000_000, 1, load_records([folder])[0])  # the prediction names the check that covers it
    assert d.validation is not None and d.validation.kind == "model checks" and d.validation.checks == (ttr["case_key"],)
    assert d.validation.error_low == d.validation.error_high == pytest.approx(check.error)
    assert (f"validated by 1 time-to-reward run(s) of this machine ({ttr['case_key']}; {len(reached)} seed(s)): error "
            f"{100 * check.error:+.0f}%") in d.answer


def test_a_seed_stopped_at_its_step_budget_checks_the_model_too(tmp_path):
    """A fixed step budget (time to N steps) checks the time model as a reached threshold does: each seed's
    training seconds against the parts' prediction for the steps it trained; a failed seed checks nothing."""
    from gpuenv.decide import model_checks

    ttr = load(PUBLISHED / "20261202T164356Z-a56388" / "ppo-sb3-gymnasium-dummy-cartpole-n8.json")
    runs = [x for x in ttr["runs"] if x["status"] == "reached"]
    assert len(runs) >= 2
    runs[0] = {**runs[0], "status": "censored", "env_steps_to_threshold": 40_000.0, "train_time_to_threshold_s": 10.0}
    failed = {"seed": 99, "status": "failed", "failure": {"kind": "crashed", "reason": "test"}}
    ttr["runs"] = [*runs, failed]
    amd = load(ONE_RUN / "gymnasium-dummy-cartpole-n8.json")
    folder = write_records(tmp_path / "parts", [ttr, with_learn(amd, 3000.0, 9000.0)])
    (check,) = model_checks(load_records([folder])[0])
    assert check.seeds == len(runs) and check.reached == len(runs) - 1  # the failed seed is none of them
    per_seed = sorted(x["env_steps_to_threshold"] * (1 / 9000 + 1 / 3000) for x in runs)
    assert check.predicted_s == pytest.approx(per_seed[len(per_seed) // 2], rel=0.2)
    assert check.measured_s == sorted(x["train_time_to_threshold_s"] for x in runs)[len(runs) // 2]
    assert f"(median of {len(runs)} seeds trained to the threshold ({len(runs) - 1}) or the budget (1), " in check.text
    assert check.text.endswith(f"error {100 * check.error:+.0f}%")


def test_the_run_that_would_validate_trains_at_the_parts_size_in_the_quickest_suite():
    """would_validate names the quickest time-to-reward suite (ppo-smoke, validate, ppo) with a case at the parts'
    num_envs: a training of another size is never paired with them (model_checks), so it is never suggested."""
    from gpuenv.decide import would_validate

    assert would_validate("cartpole", "envpool:sync", num_envs=8) == "gpuenv bench --suite ppo-smoke --task cartpole --backend envpool:sync"
    assert would_validate("halfcheetah", "envpool:sync", num_envs=1) == "gpuenv bench --suite validate --task halfcheetah --backend envpool:sync"
    assert would_validate("halfcheetah", "envpool:sync", num_envs=8) is None  # validate and ppo train it at 1 env
    assert would_validate("halfcheetah", "envpool:sync") == "gpuenv bench --suite validate --task halfcheetah --backend envpool:sync"
    assert would_validate("inverted_pendulum", "gymnasium:subproc", num_envs=8).startswith("gpuenv bench --suite validate ")


def test_a_training_of_another_definition_than_the_parts_checks_nothing(tmp_path):
    """The parts predict the learner they measured (phases.learner_key: the task, the definition but n_steps,
    the device, torch's threads): a time-to-reward record that ran another is no check of them."""
    from gpuenv.decide import model_checks
    from gpuenv.modes import of
    from gpuenv.modes.throughput.phases import learner_key

    ttr = load(PUBLISHED / "20261202T164356Z-a56388" / "ppo-sb3-gymnasium-dummy-cartpole-n8.json")
    amd = load(ONE_RUN / "gymnasium-dummy-cartpole-n8.json")
    same = learner_key("cartpole", ttr["case"]["hyperparams"], "cpu", ttr["what"]["details"]["torch_threads"])
    other = learner_key("cartpole", {**ttr["case"]["hyperparams"], "batch_size": 32}, "cpu", ttr["what"]["details"]["torch_threads"])
    for key, checks in ((same, 1), (other, 0)):
        folder = write_records(tmp_path / str(checks), [ttr, with_phases(amd, key, 9000.0, 3000.0)])
        recs = load_records([folder])[0]
        trained = next(r for r in recs if r.case_key == ttr["case_key"])
        assert of(trained).trained_learner(trained) == same
        assert len(model_checks(recs)) == checks


def test_a_measured_end_to_end_prediction_is_checked_seed_against_seed(published_records):
    """A native trainer's (or the shared one's where no parts were measured) end-to-end rate: each seed's training
    time predicted from the other seeds' median rate, the errors shown with the prediction (leave one out)."""
    from statistics import median

    from gpuenv.decide import EndToEnd, end_to_end_checks

    d = decide("cartpole", 1_000_000, 1, published_records, machine="1")
    o = next(o for o in d.options if o.selector == "gymnasium:dummy")
    assert isinstance(o.training, EndToEnd) and o.training.seeds == 3
    (rec,) = [r for r in published_records if r.case_key == o.training.case_key and r.run_id == "20261202T164356Z-a56388"]
    runs = [(x.env_steps_to_threshold, x.train_time_to_threshold_s) for x in rec.runs if x.status != "failed"]
    want = sorted((s / median(a / b for j, (a, b) in enumerate(runs) if j != i)) / t - 1 for i, (s, t) in enumerate(runs))
    assert o.training.runs == tuple(runs)  # the seeds of the record the model took: the newest of its case
    assert end_to_end_checks(o.training) == pytest.approx(want) and len(want) == 3
    line = next(w for w in d.why if w.startswith("vs gymnasium:dummy") or "gymnasium:dummy at" in w) if d.pick is not o else d.answer
    assert f"each of its 3 seeds' training time from the other seeds' rate: error {100 * want[0]:+.0f}% to {100 * want[-1]:+.0f}%" in line


@pytest.mark.parametrize("args, msg", [
    (["--task", "halfcheetah", "--budget", "lots"], "--budget 'lots' is not a number of steps"),
    (["--task", "halfcheetah", "--budget", "1e400"], "must be between 1 and 1e15 steps"),
    (["--task", "nosuch", "--budget", "1M"], "unknown task 'nosuch'"),
    (["--task", "halfcheetah", "--budget", "1M", "--configs", "0"], "--configs must be >= 1"),
    (["--task", "hopper", "--budget", "1M"], "no ok record of task 'hopper'"),
])
def test_bad_decide_input_is_one_line_and_exit_2(cli, args, msg):
    r = cli("decide", *args, "--results", str(ONE_RUN))
    assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_budgets_parse_with_suffixes():
    assert parse_steps("50M") == 50_000_000 and parse_steps("1B") == 10**9 and parse_steps("2e7") == 20_000_000
    assert parse_steps("200k") == 200_000 and parse_steps("1_000") == 1000
    with pytest.raises(UserError):
        parse_steps("-5")


# --- the site -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([str(ROOT / ".venv/bin/gpuenv") if (ROOT / ".venv/bin/gpuenv").exists() else "gpuenv", "report", str(PUBLISHED),
                        "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return out


def test_site_is_self_contained_with_claims_decision_and_case_pages(site):
    js = site / "plotly.min.js"
    assert js.stat().st_size > 1_000_000  # plotly itself, written from the installed package: no CDN
    pages = list(site.rglob("*.html"))
    for p in pages:
        text = p.read_text()
        assert not re.search(r"(src|href)=['\"]https?:", text), p  # offline: nothing fetched
        tags = set(re.findall(r"<script[^>]*>", text))
        assert tags <= {"<script src='plotly.min.js'>", "<script src='../plotly.min.js'>", "<script src='../../plotly.min.js'>",
                        "<script data-gpuenv='figure'>"}, (p, tags)
    machine_pages = sorted(site.glob("machine-*/index.html"))
    assert len(machine_pages) >= 2  # records of different machines never share a page
    claims = (site / "claims.html").read_text()
    assert "course-envpool-10x" in claims and "claims-figure" in claims
    decision = (site / "decision.html").read_text()
    assert "budget &lt; 50M steps: CPU is fine" in decision and "halfcheetah" in decision
    (case,) = (site / "cases" / "20261202T140237Z-4d17bd").glob("envpool-sync-pong-n8-*.html")  # one page per record
    text = case.read_text()
    assert "gpuenv bench --suite quick --backend envpool:sync --task pong --num-envs 8" in text
    rec_href = f"records/20261202T140237Z-4d17bd/{case.stem}.json"
    assert "lock sha256" in text and "image id" in text and rec_href in text
    assert json.loads((site / rec_href).read_text())["case_key"] == "envpool-sync-pong-n8"
    rows = "".join(p.read_text() for p in machine_pages)
    # memory and phase columns carry values once measured (the 2026-12-03 quick run has both)
    assert re.search(r"envpool-sync-halfcheetah-n8</a></td><td>[^<]+</td><td>[\d,]+ \([\d.,]+\)</td><td>[^<]*</td>"
                     r"<td>step [01]\.\d\d, vecenv 0\.\d\d, inference 0\.\d\d, (?:collect 0\.\d\d, )?(?:learn|update) 0\.\d\d</td>", rows), \
        "no memory/phase cells"


def figures(html: str) -> list[list[dict]]:
    """The traces of every interactive figure of a page (the JSON each figure's script hands plotly)."""
    dec = json.JSONDecoder()
    return [dec.raw_decode(html, m.end())[0] for m in re.finditer(r"Plotly\.newPlot\(d,", html)]


def test_site_index_picks_machines_and_every_figure_keeps_a_backends_colour_and_a_runs_points_apart(site):
    index = (site / "index.html").read_text()
    machine_pages = sorted(site.glob("machine-*/index.html"))
    assert "<select onchange=" in index and index.count("<option value='machine-") == len(machine_pages)
    assert "fastest per task: halfcheetah: brax:positional 609.5k env steps/s at 2048 envs" in index  # the H200's line
    colours: dict[str, str] = {}
    for page in [*machine_pages, site / "decision.html"]:
        for traces in figures(page.read_text()):
            for t in traces:
                backend = t["name"].split(" (", 1)[0]
                assert colours.setdefault(backend, t["line"]["color"]) == t["line"]["color"], (page, backend)
    assert len(colours) >= 8 and len(set(colours.values())) == len(colours)  # one colour each, the same everywhere
    h200 = next(p for p in machine_pages if "lent-h200" in p.read_text()).read_text()
    names = {t["name"] for traces in figures(h200) for t in traces}
    assert {"brax:generalized (run 20261204T155524Z-01948c)", "brax:generalized (run 20261204T155935Z-829c61)"} <= names
    vm = next(p for p in machine_pages if "over 11 runs" in p.read_text()).read_text()  # the VM with most history
    assert "<h2 id='regressions'>Regressions and stopped series</h2>" in vm and re.search(r"\d+ change point\(s\) in \d+ case histories", vm)
    assert "Not seen: " in vm and "case histories have fewer than" in vm  # what the search could not see is said
    decision = figures((site / "decision.html").read_text())
    assert decision and all(t["type"] == "scatter" for traces in decision for t in traces)  # no bars on a log axis
    (case,) = (site / "cases" / "20261204T125404Z-e1eb10").glob("brax-generalized-halfcheetah-n1024-*.html")
    text = case.read_text()
    assert "83.9k env steps/s (95% interval 83.7k-84.1k)" in text and not re.search(r"\de[+-]\d\d", text)
    assert "Worker processes" in text and re.search(r"<td>0</td><td>83\.\dk, 84\.\dk, 83\.\dk</td><td>17\.2</td><td>ok</td>", text)


def test_a_hostile_record_value_reaches_the_claims_page_escaped(tmp_path):
    from gpuenv.report.site import build

    bad = rec("envpool-sync-pong-n8")
    bad["where"]["machine"]["cpu_model"] = "<script>document.title='pwned'</script><img src=x onerror='alert(1)'>"
    build([typed(bad), typed(rec("gymnasium-subproc-pong-n8"))], tmp_path / "site")
    claims = (tmp_path / "site" / "claims.html").read_text()
    assert "envpool-sync-pong-n8" in claims  # it matched a claim, so its machine is on the page
    assert "<script>document" not in claims and "onerror='" not in claims and "&lt;script&gt;" in claims
    assert "\\u0026lt;script\\u0026gt;" in claims  # inside the figure's JSON: HTML-escaped, then \\u-escaped


def chrome():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no chromium + chromedriver here (Debian packages chromium, chromium-driver; .ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    o = webdriver.ChromeOptions()
    o.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1300,1500"):
        o.add_argument(a)
    return webdriver.Chrome(service=Service(driver), options=o)


def test_chromium_hover_shows_the_points_tooltip_and_a_click_opens_its_case(site):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = next(p for p in sorted(site.glob("machine-*/index.html")) if "scaling-cartpole" in p.read_text())
    d = chrome()
    try:
        d.get(page.as_uri())
        WebDriverWait(d, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#scaling-cartpole .scatterlayer .point"))
        point = d.find_elements(By.CSS_SELECTOR, "#scaling-cartpole .scatterlayer .point")[0]
        d.execute_script("arguments[0].scrollIntoView({block: 'center'})", point)
        ActionChains(d).move_to_element(point).perform()
        WebDriverWait(d, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#scaling-cartpole .hoverlayer .hovertext"))
        tip = d.execute_script("return [...document.querySelectorAll('#scaling-cartpole .hoverlayer .hovertext tspan.line')]"
                               ".map(t => t.textContent).join('\\n')")
        lines = tip.splitlines()
        assert re.fullmatch(r"\S+-cartpole-n\d+", lines[0]) and "env steps/s" in lines[1], tip
        assert "startup" in tip and "host memory" in tip and lines[-1] == "click: the case's page", tip
        key = lines[0]
        ActionChains(d).click(point).perform()
        WebDriverWait(d, 10).until(lambda d: "/cases/" in d.current_url)
        assert re.search(rf"/{key}-[0-9a-f]{{8}}\.html$", d.current_url) and "Reproduce" in d.page_source
    finally:
        d.quit()


def test_chromium_draws_each_backend_in_one_colour_across_two_figures_and_keeps_a_screenshot(site):
    """What the browser drew, not what the page asked for: the legend's line colour of each backend in
    two rendered figures of one machine page (cartpole's and halfcheetah's scaling plots)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = next(p for p in sorted(site.glob("machine-*/index.html"))
                if "scaling-cartpole" in p.read_text() and "scaling-halfcheetah" in p.read_text())
    read = ("return [...document.querySelectorAll('#' + arguments[0] + ' .legend .traces')].map(t => "
            "[t.querySelector('.legendtext').textContent, getComputedStyle(t.querySelector('.legendlines path')).stroke])")
    d = chrome()
    try:
        d.get(page.as_uri())
        drawn = {}
        for fig in ("scaling-cartpole", "scaling-halfcheetah"):
            WebDriverWait(d, 30).until(lambda d, fig=fig: d.find_elements(By.CSS_SELECTOR, f"#{fig} .legend .traces"))
            drawn[fig] = {name.split(" (", 1)[0]: colour for name, colour in d.execute_script(read, fig)}
        shot = site / "machine.png"
        d.save_screenshot(str(shot))
    finally:
        d.quit()
    both = set(drawn["scaling-cartpole"]) & set(drawn["scaling-halfcheetah"])
    assert len(both) >= 3, drawn  # envpool and gymnasium vectorisers are in both
    for backend in both:
        assert drawn["scaling-cartpole"][backend] == drawn["scaling-halfcheetah"][backend], (backend, drawn)
    for fig, colours in drawn.items():
        assert len(set(colours.values())) == len(colours), (fig, colours)  # no two backends share one
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] > 1000 and pixels.std() > 0.05  # a rendered page, not a blank one
    keep = ROOT / "results" / "local"  # for a person to look at (ignored by git)
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "machine-screenshot.png")


def test_chromium_renders_the_claims_page_and_keeps_a_screenshot(site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    d = chrome()
    try:
        d.get((site / "claims.html").as_uri())
        WebDriverWait(d, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#claims-figure .point")) > 10)
        shot = site / "claims.png"
        d.save_screenshot(str(shot))
    finally:
        d.quit()
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] > 1000 and pixels.std() > 0.05  # a rendered page, not a blank one
    keep = ROOT / "results" / "local"  # for a person to look at (ignored by git)
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "claims-screenshot.png")


# --- publish ------------------------------------------------------------------------------------------


def test_the_publish_workflows_build_step_builds_both_sites_from_published_records(tmp_path):
    """The workflow's own build commands, run here with results/published as the results branch's
    records: the report site (claims and decision pages included) and asv's."""
    pytest.importorskip("asv", reason="asv not installed (pip install 'gpuenv[history]')")
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text())
    step = next(s for s in wf["jobs"]["build"]["steps"] if s.get("name") == "Build the sites")
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(work)], check=True)  # asv reads main's history
    subprocess.run(["git", "-C", str(work), "checkout", "-q", "-B", "main"], check=True)  # the workflow runs on main, whatever this checkout's branch
    for tree in ("src", "claims", "suites"):  # the code under test, committed or not
        shutil.copytree(ROOT / tree, work / tree, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    (work / "results-branch").mkdir()
    shutil.copytree(PUBLISHED, work / "results-branch" / "records")
    bin_dir = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin"
    lines = [ln for ln in step["run"].splitlines() if ln.strip() and not ln.strip().startswith("python -m pip install")]
    env = {k: v for k, v in os.environ.items() if k != "GPUENV_PLUGINS"}  # the workflow's runner has no test plug-ins
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHONPATH=str(work / "src"))
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    site = work / "site"
    for page in ("index.html", "claims.html", "decision.html", "plotly.min.js", "asv/index.html"):
        assert (site / page).is_file(), page
    assert list((site / "cases").rglob("*.html"))


def test_the_registers_model_says_the_first_mistake_as_before(tmp_path):
    """The register became a pydantic model; its one line per mistake, and which mistake it names
    first when there are several, are the hand-written checks' (unknown key, text, missing, the
    id used twice, unit, value, check keys and kind, numbers, range, what the kind needs)."""
    base = ('id="x"\nwho="w"\nstated="s"\nunit="env steps/s"\nhardware="h"\nhardware_class="cpu"\nprotocol="p"\n'
            'source="src"\n')
    chk = '[claim.check]\nkind="rate"\nbackend="envpool"\ntask="pong"\n'
    cases = [
        (base + 'value=1\n[claim.check]\nkind="foo"\n', "check.kind must be one of rate, ratio, training-ratio, phase, arithmetic"),
        (base.replace('unit="env steps/s"', 'unit="FPS"') + 'value=1\n', "missing 'check'"),
        (base + 'value_low=5\nvalue_high=1\n[claim.check]\nkind="rate"\n', "value_low is above value_high"),
        (base + 'zeta=1\nalpha=2\nvalue=1\n' + chk, "unknown key 'alpha'"),
        (base + chk + 'zz=1\n', "give either value or both value_low and value_high"),
        (base + 'value=1\n' + chk + 'num_envs=1.5\nrate=-1\n', "rate must be a positive number (got -1)"),
        ("[[claim]]\n" + base + 'value=1\n' + chk + "[[claim]]\n" + base.replace('unit="env steps/s"', 'unit="FPS"')
         + 'value=1\n' + chk, "the id is used twice"),
    ]
    for body, msg in cases:
        p = tmp_path / "r.toml"
        p.write_text(body if body.startswith("[[claim]]") else "[[claim]]\n" + body)
        with pytest.raises(UserError, match=re.escape(msg)):
            cl.load_register(p)
    p.write_text("[[claim]]\n" + base + "value=10\n" + chk)
    (c,) = cl.load_register(p)
    assert c.value == 10 and isinstance(c.value, int)  # as written: --json prints 10, not 10.0


def test_the_course_rule_beside_the_numbers_and_the_crossover_budget():
    from gpuenv.decide import ROWS, Option, crossover, versus_rule

    cpu = Option("envpool:sync", 64, 50_000.0, (45_000.0, 55_000.0), 1.0, "cpu", False, "cpu-case")
    gpu = Option("brax:generalized", 8192, 2_000_000.0, (1.9e6, 2.1e6), 60.0, "gpu", True, "gpu-case")
    # brax pays 59 s more up front and gains 1/50k - 1/2M s per step: repaid from about 3.0M steps on
    x = crossover(cpu, gpu, 1)
    assert x == pytest.approx(59 / (1 / 50_000 - 1 / 2_000_000))
    assert crossover(gpu, cpu, 1) is None  # the slower one with the larger startup never catches up
    small = versus_rule(ROWS["small"], cpu, gpu, [cpu, gpu], 10_000_000, 1)
    assert small[0].startswith("the course's rule (budget < 50M steps: CPU is fine) points to envpool:sync")
    assert "measured here, brax:generalized is faster" in small[0]
    assert f"above {x:,.0f} steps per run" in small[1]
    agree = versus_rule(ROWS["gpu"], gpu, gpu, [cpu, gpu], 10**9, 1)
    assert "and the numbers agree: brax:generalized is the fastest measured" in agree[0]
    blind = versus_rule(ROWS["gpu"], cpu, cpu, [cpu], 10**9, 1)
    assert "cannot be checked here: no GPU simulator was measured on a GPU" in blind[0] and "no crossover budget" in blind[1]


def test_report_links_each_records_commit_and_refuses_a_template_without_sha(cli, tmp_path):
    r = cli("report", str(ONE_RUN), "--out", str(tmp_path / "s"), "--commit-url", "https://example.org/c/{sha}")
    assert r.returncode == 0, r.stderr
    page = next((tmp_path / "s" / "cases").rglob("*.html")).read_text()
    assert re.search(r"run 20261202T140237Z-4d17bd · <a href='https://example.org/c/[0-9a-f]{40}'>gpuenv commit [0-9a-f]{10}", page), page[:2000]
    r = cli("report", str(ONE_RUN), "--out", str(tmp_path / "t"), "--commit-url", "https://example.org/c/")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give an http(s) URL with one {sha} in it" in r.stderr
    assert not (tmp_path / "t").exists()


def test_decide_without_a_task_answers_every_measured_task_in_one_line_each(cli):
    """What `make bench` ends with: per task of the records, the row and the answer naming the machine."""
    r = cli("decide", "--budget", "49M", str(PUBLISHED / "20261204T100646Z-df2a69"))
    assert r.returncode == 0, r.stderr
    tasks = re.findall(r"^  ([a-z_]+): ", r.stdout, re.M)  # one answer line each (wrapped lines start at column 0)
    assert tasks == ["cartpole", "halfcheetah", "ant", "pong", "ballchase"], r.stdout
    out = " ".join(r.stdout.split())
    assert "halfcheetah: budget < 50M steps: CPU is fine -> envpool:sync: trains 1 x 49,000,000 steps in" in out
    assert "ballchase: course tasks: Godot CPU is fine -> godot:" in out and "on the records' machine ([1] Intel(R) Xeon(R)" in out
    j = json.loads(cli("decide", "--budget", "49M", "-t", "cartpole", "-t", "pong", str(PUBLISHED), "-m", VM, "--json").stdout)
    assert [d["task"] for d in j] == ["cartpole", "pong"] and all(d["machine"].startswith(f"[{VM}] ") for d in j)


def test_decide_numbers_machines_as_show_does_counting_a_machine_with_only_failed_records(published_records, cli, tmp_path):
    from gpuenv.measure.fingerprint import runs_by_machine

    failed = rec("envpool-sync-pong-n8")
    failed["where"]["machine"]["name"] = "0-broken-box"  # sorts first among the machines
    failed["run_id"], failed["status"], failed["summary"] = "20261205T000000Z-bbbbbb", "failed", None
    failed["failure"] = {"kind": "crashed", "reason": "no process finished", "process": None, "stderr_tail": ""}
    records = [*published_records, typed(failed)]
    shown = {label: n for n, label, _, _ in runs_by_machine(records)}  # show's numbers
    h200 = next(n for label, n in shown.items() if label.startswith("lent-h200"))
    assert h200 == 9 and next(iter(shown)).startswith("0-broken-box")
    d = decide("halfcheetah", 49_000_000, 1, records, machine=str(h200))
    assert d.machine.startswith(f"[{h200}] lent-h200: ")  # the machine show calls [8], not the one after it


def test_another_machines_gpu_that_starts_quicker_but_steps_slower_finishes_first_only_for_short_runs():
    from gpuenv.decide import Option, across_machines

    cpu = Option("envpool:sync", 8, 10_000.0, (9_000.0, 11_000.0), 60.0, "cpu", False, "envpool-sync-halfcheetah-n8")
    gpu = Option("brax:generalized", 1024, 5_000.0, (4_900.0, 5_100.0), 10.0, "gpu", True, "brax-generalized-halfcheetah-n1024")
    (line,) = across_machines([cpu], [("[2] lent-h200: x", [gpu])], 1_000_000, 1)
    # stepping: 60 s + n/10k here, 10 s + n/5k there: the GPU machine is first only below 500,000 steps
    assert line.endswith("; the GPU machine finishes first only below 500,000 steps per run: it is slower per step"), line
    slow = Option("brax:generalized", 1024, 5_000.0, (4_900.0, 5_100.0), 90.0, "gpu", True, "brax-generalized-halfcheetah-n1024")
    (line,) = across_machines([cpu], [("[2] lent-h200: x", [slow])], 1_000_000, 1)
    assert line.endswith("; the GPU machine never finishes first: it is slower per step"), line


def test_an_option_without_a_training_prediction_says_why_and_what_would_give_one():
    """'training not predicted' names its cause: no shared definition for the task, a variant the shared
    trainer does not run, an env served from its own environment, or a phase these records lack (and the
    command that measures it), with the time-to-reward run that would measure it end to end where a suite has one."""
    from gpuenv.decide import not_predicted

    assert not_predicted("go2_scene", "genesis:random").startswith("nothing to train")
    minatar = not_predicted("breakout_minatar", "gymnax:jit")  # suites/ppo.toml defines it: the quick suite's phases would measure it
    assert "(these records have no collect phase of it: gpuenv bench --suite quick --task breakout_minatar measures it)" in minatar
    # Ocean's environment has SB3 (its lock pins it): its phases run in its worker, so not the served reason
    assert "no collect phase of it" in not_predicted("ocean_breakout", "ocean:native")
    assert "(the shared PPO trainer runs envpool as sync, not async-pinned)" in not_predicted("pong", "envpool:async-pinned")
    godot = not_predicted("ballchase", "godot:uncapped")
    assert "(these records have no collect phase of it: gpuenv bench --suite quick --task ballchase measures it)" in godot
    assert godot.endswith("a time-to-reward run would measure it end to end: gpuenv bench --suite ppo-smoke --task ballchase "
                          "--backend godot:uncapped")
    assert "served from its own environment" in not_predicted("inverted_pendulum", "genesis:random")


def test_a_speed_scene_without_reward_has_nothing_to_train_not_a_missing_prediction():
    """franka_scene rewards nothing: decide says there is nothing to train, never 'training not predicted',
    and --json carries the reason as a field."""
    from gpuenv.decide import not_predicted, nothing_to_train

    assert nothing_to_train("franka_scene") == "nothing to train: franka_scene has no reward (a speed scene: stepping only)"
    assert nothing_to_train("halfcheetah") is None
    assert not_predicted("franka_scene", "genesis:random") == nothing_to_train("franka_scene")


SMOKE_TTR = PUBLISHED / "20261202T164356Z-a56388"  # ppo-smoke on the AMD VM: one CartPole definition on three backends


def _training_fps(r: dict) -> list[float]:
    return sorted(x["env_steps_to_threshold"] / x["train_time_to_threshold_s"] for x in r["runs"] if x["status"] != "failed")


def test_a_training_ratio_claim_is_one_runs_training_fps_over_anothers(tmp_path):
    """kind training-ratio: median training fps (startup, compile, evaluation apart) of one backend over
    another's, one run, the interval every seed pairing spans; with no such run, the suite that would measure it."""
    a, b = load(SMOKE_TTR / "ppo-sb3-envpool-sync-cartpole-n8.json"), load(SMOKE_TTR / "ppo-sb3-gymnasium-dummy-cartpole-n8.json")
    path = one_claim(tmp_path, 'kind = "training-ratio"\nnumerator = "envpool:sync"\ndenominator = "gymnasium:dummy"\n'
                               'task = "cartpole"\nnum_envs = 8\nsuite = "ppo-smoke"\n', 10, "x")
    (res,) = check_all([a, b], path)
    fa, fb = _training_fps(a), _training_fps(b)
    assert res.status == "measured" and res.measured is not None
    assert res.measured.value == pytest.approx(fa[len(fa) // 2] / fb[len(fb) // 2])
    assert (res.measured.ci_low, res.measured.ci_high) == pytest.approx((fa[0] / fb[-1], fa[-1] / fb[0]))
    assert res.ratio == pytest.approx(10 / res.measured.value) and "env steps/s of training at 8 envs" in res.detail
    assert res.measured.interval == "the span of every seed pairing"  # not a 95% interval, and said so
    (none,) = check_all([a], path)
    assert none.status == "not measured" and none.to_check == "gpuenv bench --suite ppo-smoke"
    bad = one_claim(tmp_path, 'kind = "training-ratio"\nnumerator = "envpool"\ndenominator = "gymnasium"\ntask = "pong"\n', 10, "x")
    with pytest.raises(UserError, match="a training-ratio check needs check.suite"):
        cl.load_register(bad)


def test_one_definition_on_two_backends_gets_a_speedup_row_faster_over_slower():
    """The speedup table (the course's exercise #1): pairs of records of one definition on two backends, the faster
    by median training fps over the slower, the fps ratio's interval over every seed pairing, the wall-clock ratio of
    IQMs with its bootstrap interval, and each seed's wall-clock (+ where censored)."""
    from gpuenv.modes.ttr.report import speedup_table, speedups, tables

    recs, _ = load_records(sorted(SMOKE_TTR.glob("ppo-sb3-*cartpole-n8.json")))
    pairs = speedups(recs)
    assert len(pairs) == 3  # three backends, one definition: every pair once
    for p in pairs:
        fast, slow = p.fast.training_rates(), p.slow.training_rates()
        assert sorted(fast)[len(fast) // 2] >= sorted(slow)[len(slow) // 2]
        r, lo, hi = p.fps_ratio()
        assert lo <= r <= hi and lo == pytest.approx(fast[0] / slow[-1]) and hi == pytest.approx(fast[-1] / slow[0])
        w, wlo, whi = p.wall_ratio()
        assert wlo <= w <= whi
    brax = load_records([SMOKE_TTR / "ppo-brax_ppo-brax-positional-inverted_pendulum-n256.json"])[0]
    assert speedups(recs + brax) == pairs  # another task's (and trainer's) record pairs with none
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(speedup_table("cartpole", pairs))
    out = console.export_text()
    assert "[all seed pairings]" in out and "x [" in out and " | " in out
    assert any("speedup" in str(t.title) for t in tables(recs))

"""PufferLib Ocean (PufferAI's pufferlib 3.0.0, its C envs) in its own Python environment: the lock
(numpy<2, gymnasium 0.29.1, gym 0.23.0) and pufferlib built from its hash-checked sdist by the
backend's build step (gcc: .ci/run installs it), then Ocean's Breakout through `gpuenv bench` for real.
Where the package index cannot be reached (the venv, the lock or the sdist's download fails) the real
test skips and says why; any other failure of the build fails it."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import tarfile

import numpy as np
import pytest
from conftest import ROOT, TINY_TTR, own_python, served_training, write_suite

from gpuenv.backends.ocean import build
from gpuenv.registry import default_registry

INFO = default_registry().get("ocean")


def test_declared_in_its_own_environment_with_the_versions_oceans_runtime_needs():
    env = INFO.environment
    assert env is not None and env.python == "3.11" and env.build_step == "gpuenv.backends.ocean.build:install"
    lock = (ROOT / env.lock).read_text()
    assert "\nnumpy==1." in lock and "\ngymnasium==0.29.1 \\\n" in lock and "\ngym==0.23.0 \\\n" in lock
    assert "\nsetuptools==" in lock and "\nwheel==" in lock  # the build runs without isolation
    assert not re.search(r"^pufferlib==", lock, re.M)  # built by the step, not installed from an index
    assert set(default_registry().offers("ocean_breakout")) == {"ocean"}
    # the main install's `pufferlib` module is Metta's pufferlib-core: Ocean's needs gym besides
    assert "gym" in INFO.requires


def _sdist(tmp_path, names):
    path = tmp_path / "pufferlib-3.0.0.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        for n in names:
            info = tarfile.TarInfo(f"pufferlib-3.0.0/{n}")
            info.size = 1
            t.addfile(info, io.BytesIO(b"x"))
    return path


def test_the_source_is_prepared_without_githubs_downloads_and_a_changed_sdist_is_refused(tmp_path, monkeypatch):
    sdist = _sdist(tmp_path, ["setup.py", "pufferlib/ocean/impulse_wars/binding.c", "pufferlib/ocean/breakout/binding.c"])
    src = build.prepare(sdist, tmp_path / "work")
    for d in build.EMPTY:  # what setup.py would download from GitHub when missing; nothing on Linux reads them
        assert (src / d).is_dir() and not any((src / d).iterdir())
    assert not (src / "pufferlib/ocean/impulse_wars/binding.c").exists()  # Box2D's one user: left out
    assert (src / "pufferlib/ocean/breakout/binding.c").exists()
    # a download whose sha256 differs is refused and leaves nothing behind; the right one is kept under its name
    monkeypatch.setattr(build, "SDIST_URL", sdist.as_uri())
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    monkeypatch.setattr(build, "SDIST_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="expected 0000"):
        build.fetch(downloads)
    assert not any(downloads.iterdir())
    monkeypatch.setattr(build, "SDIST_SHA256", hashlib.sha256(sdist.read_bytes()).hexdigest())
    assert build.fetch(downloads).read_bytes() == sdist.read_bytes() and len(list(downloads.iterdir())) == 1


def test_the_build_hides_nvcc_so_pufferlibs_kernel_is_built_for_torchs_cpu_wheel(tmp_path):
    """pufferlib's setup.py builds its CUDA kernel whenever `nvcc` is on PATH (a CUDA toolkit torch's CPU
    wheel cannot use): the build's PATH finds everything it found before but nvcc, the compilers beside it too."""
    import shutil

    cuda, usr = tmp_path / "cuda" / "bin", tmp_path / "usr" / "bin"
    for d in (cuda, usr):
        d.mkdir(parents=True)
    for f in (cuda / "nvcc", usr / "nvcc", usr / "g++", usr / "gcc"):
        f.write_text("#!/bin/sh\n")
        f.chmod(0o755)
    path = f"{cuda}:{usr}:/bin"
    hidden = build.without_nvcc(path, tmp_path / "work")
    assert shutil.which("nvcc", path=path) and shutil.which("nvcc", path=hidden) is None
    assert shutil.which("g++", path=hidden) and shutil.which("gcc", path=hidden) and shutil.which("sh", path=hidden)
    assert hidden.split(":")[2] == "/bin" and build.without_nvcc("/bin:/usr/bin", tmp_path / "w2") == "/bin:/usr/bin"


def test_a_sweep_of_pufferlib_is_refused_in_one_line(cli):
    r = cli("sweep", "pufferlib==3.0.0,2.0.6")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "ocean cannot be swept: its environment builds pufferlib with a build step" in r.stderr


@pytest.mark.backend
def test_ocean_breakout_builds_and_steps_for_real_and_records_its_settings(cli, tmp_path):
    r = cli("bench", "--suite", "smoke", "--backend", "ocean", "--task", "ocean_breakout", "--num-envs", "2",
            "--processes", "1", "--out", str(tmp_path), timeout=1200)
    if any(f"could not {w}" in r.stderr for w in ("create the venv", "install the lock")) or "URLError" in r.stderr:
        pytest.skip(f"Ocean's environment could not be built here (no package index): {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    (rec,) = (json.loads(p.read_text()) for p in tmp_path.rglob("*.json"))
    assert rec["status"] == "ok" and rec["summary"]["env_steps_per_s"]["median"] > 0
    d = rec["what"]["details"]
    assert d["pufferlib"] == build.VERSION and d["env_kwargs"]["frameskip"] == 4 and d["env_kwargs"]["brick_rows"] == 6
    assert rec["what"]["obs_shape"] == [118] and rec["where"]["machine"]["python"].startswith("3.11.")
    e = rec["where"]["environment"]
    assert e["name"] == "ocean" and e["build_step"].startswith("gpuenv.backends.ocean.build:install ")
    assert e["lock_sha256"] == hashlib.sha256((ROOT / INFO.environment.lock).read_bytes()).hexdigest()


OCEAN_PHASES = """
[measure]
processes = 1
values = 2
warmups = 0
min_time_s = 0.05
chunk_steps = 10
timeout_s = 600
[[matrix]]
backends = ["ocean:native"]
tasks = ["ocean_breakout"]
num_envs = [4]
phases = ["collect", "learn"]
phase_ppo = { n_steps = 8, n_epochs = 1, batch_size = 32 }
"""


def test_the_shared_definitions_collect_and_learn_run_in_oceans_worker_unserved(cli, tmp_path):
    """Ocean's lock has SB3: the policy phases build the shared definition (suites/ppo.toml's ocean_breakout case)
    on Ocean's env in its own worker, stepped in that process (no served env), and decide reads them."""
    r = cli("bench", "--suite", str(write_suite(tmp_path / "phases.toml", OCEAN_PHASES)), "--out", str(tmp_path / "out"), timeout=1200)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    (rec,) = (json.loads(p.read_text()) for p in (tmp_path / "out").rglob("*.json"))
    phases = rec["summary"]["phases"]
    for name in ("collect", "learn"):
        assert phases[name]["failed"] is None and phases[name]["absent"] is None, (name, phases[name])
        assert phases[name]["env_steps_per_s"]["median"] > 0
    d = phases["collect"]["details"]
    assert d["definition"].startswith("suites/ppo.toml case ppo-sb3-ocean-native-ocean_breakout-n8 with ") and "env_process" not in d
    assert rec["where"]["environment"]["name"] == "ocean"
    out = cli("decide", "--task", "ocean_breakout", "--budget", "1M", "--json", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    pick = json.loads(out.stdout)["pick"]
    assert pick["backend"] == "ocean:native" and pick["training"]["predicted_s"] > 0 and pick["why_no_training"] is None


def test_the_main_installs_pufferlib_is_not_oceans_and_telling_them_apart_imports_neither(tmp_path):
    """Metta's pufferlib-core (the main install's `pufferlib`) has no Ocean: the ocean backend is never run in
    the main interpreter, and finding that out imports no pufferlib (its __init__ imports torch)."""
    import subprocess
    import sys

    code = ("import sys; from gpuenv.registry import default_registry; b = default_registry().get('ocean'); "
            "print(b.missing(), b.in_own_image(), 'pufferlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "['pufferlib.ocean', 'gym'] False False", out


def pinned(package: str) -> str:
    """The version Ocean's lock pins."""
    (version,) = re.findall(rf"^{re.escape(package)}==(\S+)", (ROOT / INFO.environment.lock).read_text(), re.M)
    return version


OCEAN_PPO = """
[[case]]
task = "ocean_breakout"
backends = ["ocean:native"]
trainer = "sb3"
num_envs = 4
threshold = 864.0
max_env_steps = 2048
max_time_s = 300
eval_every_steps = 1024
eval_episodes = 2
[case.hyperparams]
n_steps = 128
batch_size = 256
n_epochs = 1
"""


@pytest.mark.backend
def test_the_shared_ppo_trainer_trains_on_ocean_served_from_its_environment(cli, tmp_path):
    """The time-to-reward trainer runs in the main install (its torch and SB3, the versions every shared
    training names), and Breakout steps in a process of Ocean's environment (gpuenv.backends.served); the
    record names both. (Ocean's environment pins SB3 too, for the throughput suite's policy phases.)"""
    rec, run = served_training(cli, tmp_path, "ocean", "--suite", str(write_suite(tmp_path / "ocean-ppo.toml", TINY_TTR + OCEAN_PPO)))
    assert [p["env_steps"] for p in run["curve"]] == [1024, 2048] and all(0 <= p["eval_return"] <= 864 for p in run["curve"])
    d = run["details"]
    assert d["pufferlib"] == build.VERSION and d["env_kwargs"]["frameskip"] == 4
    w = rec["where"]
    # the trainer's process (numpy 2 here), its simulator from Ocean's environment, whose own versions are beside
    assert w["packages"]["pufferlib"] == build.VERSION and w["packages"]["torch"] and w["packages"]["numpy"].startswith("2.")
    assert w["environment"]["packages"]["numpy"].startswith("1.") and w["environment"]["packages"]["stable-baselines3"] == pinned("stable-baselines3")



OCEAN_CARTPOLE_SIDE = """
import json, sys
import numpy as np
from gpuenv.backends.ocean import BACKEND
from gpuenv.backends.ocean.adapter import episode_ends, make_env

native = BACKEND.tasks["ocean_cartpole"]
actions = np.array(json.loads(sys.argv[1]), dtype=np.float32)  # (steps, envs) of 0/1
env, details = make_env(native, actions.shape[1], 11)
obs, _ = env.reset(seed=11)
rows = [obs.tolist()]
flags = []
for a in actions:
    obs, reward, terminal, truncation, _ = env.step(a)
    ended, truncated = episode_ends(native, reward, terminal, truncation)
    rows.append(obs.tolist())
    flags.append([reward.tolist(), terminal.tolist(), ended.tolist(), truncated.tolist()])
print("RUN", json.dumps({"rows": rows, "flags": flags, "details": details}))
# a balancing controller to the time limit: the 200th step ends the episode unflagged, rewarded 0
obs, _ = env.reset(seed=12)
limit = []
for t in range(201):
    obs, reward, terminal, truncation, _ = env.step((obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.float32))
    ended, truncated = episode_ends(native, reward, terminal, truncation)
    limit.append([float(reward[0]), bool(terminal[0]), bool(truncation[0]), bool(ended[0]), bool(truncated[0]), obs[0].tolist()])
print("LIMIT", json.dumps(limit))
"""


@pytest.mark.backend
def test_ocean_cartpole_follows_gymnasiums_equations_with_rules_of_its_own():
    """Ocean's CartPole steps Gymnasium's CartPole equations (from the same state, under the same actions, the
    same trajectory until the pole falls, within float32's rounding), but ends episodes its own way: reward 0
    on the ending step, a 200-step limit it does not flag (episode_ends reports it as a truncation), reset
    noise of 0.04. So it is the logical task ocean_cartpole, not cartpole."""
    import gymnasium as gym

    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, (40, 3))
    r = subprocess.run([own_python("ocean"), "-c", OCEAN_CARTPOLE_SIDE, json.dumps(actions.tolist())],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in r.stdout.splitlines() if line.startswith(("RUN", "LIMIT"))}
    rows, flags = np.array(out["RUN"]["rows"]), out["RUN"]["flags"]
    assert np.abs(rows[0]).max() <= 0.04  # U(-0.04, 0.04) reset noise on every state variable
    for i in range(3):
        theirs = gym.make("CartPole-v1").unwrapped
        theirs.reset(seed=0)
        theirs.state = rows[0, i].astype(np.float64)
        for t, a in enumerate(actions[:, i]):
            obs, reward, terminated, _, _ = theirs.step(int(a))
            reward_o, terminal_o, ended_o, truncated_o = (f[i] for f in flags[t])
            if terminated:  # Ocean ends it on the same step, rewarded 0 (Gymnasium: 1), and restarts at once
                assert terminal_o and ended_o and not truncated_o and reward_o == 0.0 and reward == 1.0
                assert t >= 5  # random actions keep a pole up for some steps
                break
            assert not terminal_o and not ended_o and reward_o == 1.0
            assert np.allclose(rows[t + 1, i], obs, rtol=1e-4, atol=1e-5), (i, t, rows[t + 1, i], obs)
        else:
            pytest.fail(f"env {i}: random actions kept the pole up for 40 steps")
    limit = out["LIMIT"]
    assert all(step[:5] == [1.0, False, False, False, False] for step in limit[:199])
    reward, terminal, truncation, ended, truncated, obs = limit[199]
    assert (reward, terminal, truncation, ended, truncated) == (0.0, False, False, True, True) and np.abs(obs).max() <= 0.04
    assert limit[200][:5] == [1.0, False, False, False, False]  # the next episode's first step



RANDOM_STATE_SIDE = """
import json
import numpy as np
from gpuenv.backends.ocean import BACKEND
from gpuenv.backends.ocean.adapter import make_env, own_random_state

native = BACKEND.tasks["ocean_cartpole"]
def run(second):  # 4 envs pushed left: each falls within about 10 steps and resets from the C random state
    env, _ = make_env(native, 4, 3)
    env.reset(seed=3)
    rows = []
    for t in range(60):
        if t == 30 and second is not None:
            second()
        obs = env.step(np.zeros(4, dtype=np.float32))[0]
        rows.append(obs.tolist())
    return rows

def other_env():
    e, _ = make_env(native, 2, 99)
    e.reset(seed=99)
    for _ in range(30):
        e.step(np.zeros(2, dtype=np.float32))

def isolated():
    with own_random_state(99):
        other_env()

print(json.dumps([run(None), run(isolated), run(other_env)]))
"""


@pytest.mark.backend
def test_a_second_ocean_env_in_own_random_state_leaves_the_first_ones_draws_alone():
    """Ocean's C envs share the C library's random state, reseeded by any env's creation and reset: the
    harness's eval envs (pufferl's evaluation) run in a state of their own, so training's resets draw as if
    no evaluation had happened; without that, they would not."""
    r = subprocess.run([own_python("ocean"), "-c", RANDOM_STATE_SIDE], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    alone, beside_isolated, beside_shared = json.loads(r.stdout.strip().splitlines()[-1])
    assert beside_isolated == alone
    assert beside_shared[:30] == alone[:30] and beside_shared != alone

@pytest.mark.backend
def test_pufferlibs_own_trainer_learns_ocean_cartpole_in_its_environment(cli, tmp_path):
    """The ppo-smoke suite's pufferl case, one seed: PufferLib's PPO (its C++ kernel built against torch's CPU
    wheel by the build step) in Ocean's environment, evaluated by the harness, reaches its threshold; the
    record holds PufferLib's config as it ran."""
    r = cli("bench", "--suite", "ppo-smoke", "--case", "ppo-pufferl-ocean-native-ocean_cartpole-n1024", "--seeds", "1",
            "--out", str(tmp_path / "out"), timeout=1200)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    (rec,) = (json.loads(p.read_text()) for p in (tmp_path / "out").glob("*/*.json"))
    assert rec["status"] == "ok", rec["failure"]
    (run,) = rec["runs"]
    assert run["status"] == "reached" and run["curve"][-1]["eval_return"] >= 195 and run["eval_s"] > 0
    assert len(run["curve"]) >= 2 and run["curve"][0]["eval_return"] < 195  # it learned: one batch does not balance it
    d = run["details"]
    assert d["trainer"].startswith("pufferlib.pufferl.PuffeRL") and d["pufferlib"] == build.VERSION and d["device"] == "cpu"
    c = d["train_config"]
    assert c["learning_rate"] == 0.05 and c["gamma"] == 0.95 and c["optimizer"] == "muon"  # PufferLib's CartPole config
    assert c["batch_size"] == 1024 * 64 and d["env_kwargs"] == {"num_envs": 1024} and d["policy"].startswith("Policy + Recurrent")
    w = rec["where"]
    assert w["environment"]["name"] == "ocean" and w["environment"]["served"] is None
    assert w["packages"]["torch"].endswith("+cpu") and w["packages"]["numpy"].startswith("1.")


@pytest.mark.parametrize(("line", "says"), [
    ('optimizer = "sgd"', "optimizer = 'sgd': pufferl takes 'adam' or 'muon'"),
    ("bptt_horizon = 0", "bptt_horizon = 0: pufferl takes a positive integer"),
    ('device = "cuda"', "trainer 'pufferl' has no hyperparameter 'device'"),  # gpuenv sets the device
])
def test_bad_pufferl_settings_are_refused_in_one_line_before_anything_runs(cli, tmp_path, line, says):
    suite = TINY_TTR + """
[[case]]
task = "ocean_cartpole"
backends = ["ocean:native"]
trainer = "pufferl"
num_envs = 1024
threshold = 195.0
max_env_steps = 65_536
max_time_s = 60
eval_every_steps = 65_536
eval_episodes = 2
[case.hyperparams]
""" + line + "\n"
    r = cli("bench", "--suite", str(write_suite(tmp_path / "bad.toml", suite)), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert says in r.stderr and not (tmp_path / "out").exists()

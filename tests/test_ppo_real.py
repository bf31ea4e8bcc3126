"""The EnvPool -> SB3 adapter's semantics, the JAX (Brax) adapter's, and one real tiny training per
CPU backend through `gpuenv bench`. Marked `backend`: slower, CI still runs them."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import TINY_TTR, write_suite

from gpuenv.backends.spec import resolve
from gpuenv.registry import default_registry
from gpuenv.results.schema import validate

pytestmark = pytest.mark.backend


def need(backend: str) -> None:
    reason = default_registry().get(backend).unavailable_reason()
    if reason:
        pytest.skip(reason)


def envpool_cartpole(num_envs: int, **kw):
    need("envpool")
    default_registry().get("envpool").load()
    import envpool

    return envpool.make("CartPole-v1", env_type="gymnasium", num_envs=num_envs, batch_size=num_envs, seed=3, **kw)


def roll(venv, steps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    venv.reset()
    for _ in range(steps):
        actions = rng.integers(0, 2, venv.num_envs)
        yield actions, venv.step(actions)


def test_raw_envpool_has_the_trap_the_adapter_fixes():
    """If EnvPool ever changes this, the adapter's reset-at-once logic must be revisited."""
    pool = envpool_cartpole(4)
    pool.reset()
    rng = np.random.default_rng(0)
    after_done = None
    for _ in range(300):
        obs, reward, term, trunc, info = pool.step(rng.integers(0, 2, 4))
        if after_done is not None:
            assert np.all(reward[after_done] == 0.0)  # the step after the end: reward 0, action ignored
            assert np.all(info["elapsed_step"][after_done] == 0)
            assert "terminal_observation" not in info
            return
        done = np.flatnonzero(term | trunc)
        if done.size:
            after_done = done
    pytest.fail("no episode ended in 300 random steps")


def test_envpool_vecenv_keeps_sb3_semantics():
    from stable_baselines3.common.vec_env import VecMonitor

    from gpuenv.backends.envpool.ppo import EnvPoolVecEnv

    venv = VecMonitor(EnvPoolVecEnv(envpool_cartpole(8)))
    ended = 0
    previous_obs = None
    for _, (obs, rewards, dones, infos) in roll(venv, 400):
        assert isinstance(infos, list) and len(infos) == 8 and all(isinstance(i, dict) for i in infos)
        # Every transition is a real CartPole step: reward 1, never a spurious reward-0 reset step.
        assert np.all(rewards == 1.0), rewards
        if previous_obs is not None:
            assert not np.shares_memory(previous_obs[0], obs)  # handed-out arrays are copies
            assert np.array_equal(previous_obs[0], previous_obs[1])  # ... that later steps do not touch
        previous_obs = (obs, obs.copy())
        for i in np.flatnonzero(dones):
            ended += 1
            final = infos[i]["terminal_observation"]
            # The true final observation is past CartPole's limits; the returned obs is a fresh reset.
            assert abs(final[0]) > 2.4 or abs(final[2]) > 0.2095, final
            assert np.all(np.abs(obs[i]) <= 0.05), obs[i]
            assert infos[i]["TimeLimit.truncated"] is False
            # VecMonitor's statistics: return == length (reward 1 per step), no extra step counted.
            assert infos[i]["episode"]["r"] == infos[i]["episode"]["l"]
    assert ended > 10


def test_envpool_vecenv_marks_truncation():
    from stable_baselines3.common.vec_env import VecMonitor

    from gpuenv.backends.envpool.ppo import EnvPoolVecEnv

    venv = VecMonitor(EnvPoolVecEnv(envpool_cartpole(4, max_episode_steps=5)))
    truncated = 0
    for _, (obs, _rewards, dones, infos) in roll(venv, 40):
        for i in np.flatnonzero(dones):
            truncated += infos[i]["TimeLimit.truncated"]
            if infos[i]["TimeLimit.truncated"]:
                assert infos[i]["episode"]["l"] == 5  # the time limit, not 6 (no spurious reset step)
                assert not np.array_equal(infos[i]["terminal_observation"], obs[i])
    assert truncated >= 4


@pytest.mark.parametrize(("backend", "variant", "task"), [
    ("gymnasium", "sync", "cartpole"), ("gymnasium", "async", "cartpole"), ("gymnasium", "async-noshm", "cartpole"),
    ("pufferlib", "serial", "cartpole"), ("pufferlib", "mp", "cartpole"), ("pufferlib", "mp-allcores", "cartpole"),
    ("pufferlib", "mp-allcores", "inverted_pendulum")])
def test_vectorisers_give_sb3_what_its_dummyvecenv_gives(backend, variant, task, monkeypatch):
    """Gymnasium's own vector envs (gpuenv.backends.vecenv.GymVectorVecEnv, same-step autoreset) and
    PufferLib's vectorisers (gpuenv.backends.pufferlib.ppo, its envs reset at once, the final observation
    through PufferLib's info channel), made SB3 VecEnvs: under the same seeds and actions (discrete, and
    continuous on InvertedPendulum), step for step what SB3's DummyVecEnv over the same envs returns,
    episode ends, final observations and time-limit truncations included; and again after a second
    reset (the eval envs' reset at every evaluation). PufferLib's Multiprocessing runs as on 2 cores
    whatever this machine has: mp one worker of 4 envs, mp-allcores 2 workers of 2 (seeds that would
    repeat across workers)."""
    from gpuenv.backends.gymnasium.ppo import make_vecenv as dummy
    from gpuenv.backends.pufferlib import adapter

    need(backend)
    monkeypatch.setattr(adapter, "usable_cores", lambda: 2)
    make_vecenv = resolve(default_registry().get(backend).ppo_env.factory)
    native = default_registry().native(task, backend)
    theirs, _ = dummy("dummy", native, 4, 7, make=gym_limited)
    ours, details = make_vecenv(variant, native, 4, 7, make=gym_limited)
    try:
        assert details["autoreset_mode"] == "same-step"
        if variant.startswith("mp"):
            assert (details["num_workers"], details["envs_per_worker"]) == ((1, 4) if variant == "mp" else (2, 2))
        space, rng = theirs.action_space, np.random.default_rng(0)
        for _ in range(2):
            np.testing.assert_array_equal(ours.reset(), theirs.reset())
            ended = truncated = 0
            for _ in range(60):
                actions = rng.integers(0, 2, 4) if hasattr(space, "n") else rng.uniform(space.low, space.high, (4, *space.shape)).astype(np.float32)
                a, b = ours.step(actions), theirs.step(actions)
                assert a[0].dtype == b[0].dtype and a[1].dtype == np.float32 and a[2].dtype == bool
                for x, y in zip(a[:3], b[:3]):
                    np.testing.assert_array_equal(x, y)
                for i in np.flatnonzero(b[2]):
                    ended += 1
                    truncated += b[3][i]["TimeLimit.truncated"]
                    assert a[3][i]["TimeLimit.truncated"] == b[3][i]["TimeLimit.truncated"]
                    np.testing.assert_array_equal(a[3][i]["terminal_observation"], b[3][i]["terminal_observation"])
            assert ended >= 8 and 0 < truncated < ended  # both ways of ending came up
    finally:
        ours.close()
        theirs.close()


def test_a_pufferlib_worker_that_dies_is_an_error_not_a_hang(monkeypatch):
    """PufferLib's workers spin on shared-memory flags and are not daemons: a worker whose env fails
    would leave recv() spinning for ever. The VecEnv raises instead, and leaves no process behind."""
    from gpuenv.backends.pufferlib import adapter
    from gpuenv.backends.pufferlib.ppo import make_vecenv

    need("pufferlib")
    monkeypatch.setattr(adapter, "usable_cores", lambda: 2)
    venv, _ = make_vecenv("mp", default_registry().native("cartpole", "pufferlib"), 2, 0, make=gym_limited)
    venv.reset()
    for p in venv.vec.processes:
        p.kill()
    with pytest.raises(RuntimeError, match="a PufferLib worker process exited"):
        venv.step(np.zeros(2, np.int64))
    assert all(not p.is_alive() for p in venv.vec.processes)


def gym_limited(env_id, max_episode_steps=None):
    """The task with a 12-step limit, so time-limit truncations come up beside falls (fork: no pickling)."""
    import gymnasium as gym

    return gym.make(env_id, max_episode_steps=12)


def test_envpool_vecenv_flattens_dm_controls_dict_observations():
    """EnvPool's dm_control tasks observe a dict (position, velocity): the VecEnv hands SB3 one float32
    vector in the space's key order, resets included (was: SB3 refused the dict for MlpPolicy)."""
    from gpuenv.backends.envpool.ppo import EnvPoolVecEnv

    need("envpool")
    default_registry().get("envpool").load()
    import envpool

    kw = {"env_type": "gymnasium", "num_envs": 2, "batch_size": 2, "seed": 3, "max_episode_steps": 5}
    raw, venv = envpool.make("CartpoleBalance-v1", **kw), EnvPoolVecEnv(envpool.make("CartpoleBalance-v1", **kw))
    assert venv.observation_space.shape == (5,) and venv.observation_space.dtype == np.float32
    first, (want, info) = venv.reset(), raw.reset()
    assert list(want) == ["position", "velocity"] and first.dtype == np.float32
    np.testing.assert_allclose(first[info["env_id"]], np.concatenate([want["position"], want["velocity"]], axis=1), rtol=1e-6)
    for _ in range(5):
        obs, _r, dones, infos = venv.step(np.zeros((2, 1), np.float32))
    assert dones.all() and obs.shape == (2, 5) and all(i["terminal_observation"].shape == (5,) for i in infos)


@pytest.mark.parametrize(("backend", "variant", "task"), [("brax", "positional", "inverted_pendulum"), ("mjx", "jax", "halfcheetah"),
                                                          ("playground", "jax", "cartpole_balance")])
def test_jax_vecenv_keeps_sb3_semantics(backend, variant, task):
    need(backend)
    make_vecenv = resolve(default_registry().get(backend).ppo_env.factory)
    native = replace(default_registry().native(task, backend), episode_steps=5)
    venv, details = make_vecenv(variant, native, 4, seed=0)
    obs0 = venv.reset()
    truncations = 0
    act = np.zeros((4, native.action_size), np.float32)
    for _ in range(10):
        obs, rewards, dones, infos = venv.step(act)
        assert obs.shape == (4, native.obs_shape[0]) and rewards.dtype == np.float32 and len(infos) == 4
        for i in np.flatnonzero(dones):
            truncations += infos[i]["TimeLimit.truncated"]
            assert "terminal_observation" in infos[i]
            assert np.allclose(obs[i], obs0[i])  # reset to the env's first state, as Brax's training does
            assert not np.allclose(infos[i]["terminal_observation"], obs0[i])
    assert truncations == 8  # 4 envs x 2 episodes of 5 steps, all by the time limit
    assert "JaxVecEnv" in details["vectoriser"]


TINY = TINY_TTR + """
[[case]]
task = "cartpole"
backends = ["gymnasium:dummy", "gymnasium:subproc", "gymnasium:async", "pufferlib:mp", "envpool:sync", "gymnax:jit"]
trainer = "sb3"
num_envs = 4
threshold = 475.0
max_env_steps = 1024
max_time_s = 300
eval_every_steps = 512
eval_episodes = 2
[case.hyperparams]
n_steps = 64
batch_size = 64
n_epochs = 1

[[case]]
task = "inverted_pendulum"
backends = ["brax:positional"]
trainer = "brax_ppo"
num_envs = 8
threshold = 1000.0
max_env_steps = 2000
max_time_s = 300
eval_every_steps = 1000
eval_episodes = 2
[case.hyperparams]
unroll_length = 5
batch_size = 8
num_minibatches = 2
num_updates_per_batch = 1

[[case]]
task = "halfcheetah"
backends = ["mjx"]
trainer = "sb3"
num_envs = 4
threshold = 5000.0
max_env_steps = 256
max_time_s = 300
eval_every_steps = 128
eval_episodes = 1
[case.hyperparams]
n_steps = 32
batch_size = 64
n_epochs = 1

[[case]]
task = "inverted_pendulum"
backends = ["brax:positional"]
trainer = "sb3"
num_envs = 4
threshold = 1000.0
max_env_steps = 512
max_time_s = 300
eval_every_steps = 256
eval_episodes = 2
[case.hyperparams]
n_steps = 64
batch_size = 64
n_epochs = 1
"""


def test_tiny_training_on_every_cpu_backend(cli, tmp_path):
    for b in ("gymnasium", "pufferlib", "envpool", "brax", "mjx", "gymnax"):
        need(b)
    suite = write_suite(tmp_path / "tiny.toml", TINY)
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"), timeout=1500)
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: a tiny budget may miss the threshold
    assert "Traceback" not in r.stderr
    records = [validate(json.loads(p.read_text())) for p in (tmp_path / "out").glob("*/*.json")]
    keys = {rec["case_key"]: rec for rec in records}
    assert set(keys) == {
        "ppo-sb3-gymnasium-dummy-cartpole-n4",
        "ppo-sb3-gymnasium-subproc-cartpole-n4",
        "ppo-sb3-gymnasium-async-cartpole-n4",
        "ppo-sb3-pufferlib-mp-cartpole-n4",
        "ppo-sb3-envpool-sync-cartpole-n4",
        "ppo-sb3-gymnax-jit-cartpole-n4",
        "ppo-brax_ppo-brax-positional-inverted_pendulum-n8",
        "ppo-sb3-brax-positional-inverted_pendulum-n4",
        "ppo-sb3-mjx-jax-halfcheetah-n4",
    }, r.stdout + r.stderr
    for key, rec in keys.items():
        assert rec["status"] == "ok", (key, rec["failure"])
        (run,) = rec["runs"]
        assert run["status"] in ("reached", "censored"), run
        assert run["curve"] and all(np.isfinite(p["eval_return"]) for p in run["curve"])
        assert run["startup_s"] > 0 and run["time_to_threshold_s"] >= run["train_time_to_threshold_s"]
    brax = keys["ppo-brax_ppo-brax-positional-inverted_pendulum-n8"]["runs"][0]
    assert brax["compile_s"] > 0  # JAX compile time is measured, and kept out of train time
    assert brax["details"]["eval_policy"] == "deterministic"
    assert all(p["train_s"] >= 0 for p in brax["curve"])
    assert brax["details"]["brax"] and "shims" in brax["details"]
    assert "cartpole: time to eval return >= 475" in r.stdout
    # TensorBoard as SB3 writes it (time/fps, rollout/ep_rew_mean at every iteration) beside gpuenv's own scalars
    dummy = keys["ppo-sb3-gymnasium-dummy-cartpole-n4"]["runs"][0]
    (events,) = (tmp_path / "out").glob("*/tensorboard/ppo-sb3-gymnasium-dummy-cartpole-n4/seed0/events.out.tfevents.*")
    tags = event_tags(events)
    assert {"time/fps", "rollout/ep_rew_mean", "train/loss", "gpuenv/eval_return", "gpuenv/train_fps"} <= set(tags), tags
    assert dummy["sb3_time_fps"] == tags["time/fps"][-1] > 0


def event_tags(path) -> dict[str, list[float]]:
    """TensorBoard's event file, read with tensorboardX's protobufs: tag -> its values in order."""
    import struct

    from tensorboardX.proto import event_pb2

    data, i, out = path.read_bytes(), 0, {}
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i:i + 8])
        ev = event_pb2.Event()
        ev.ParseFromString(data[i + 12:i + 12 + n])  # length, its crc, the event, its crc
        i += 12 + n + 4
        for v in ev.summary.value:
            out.setdefault(v.tag, []).append(v.simple_value)
    return out


def test_sb3_training_leaves_no_logger_folder_behind(tmp_path, monkeypatch):
    """SB3's default logger makes an empty tempdir/SB3-<time> folder at every learn(): gpuenv's
    models log nowhere (a make test run had left 618 of them in /tmp)."""
    import tempfile

    from gpuenv.modes.ttr.train import build_sb3

    need("gymnasium")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    reg = default_registry()
    model, venv, _ = build_sb3(reg.get("gymnasium"), "dummy", reg.native("cartpole", "gymnasium"), 2, 0, {"n_steps": 16, "batch_size": 32})
    try:
        model.learn(total_timesteps=64)
    finally:
        venv.close()
    assert not list(tmp_path.glob("SB3-*"))

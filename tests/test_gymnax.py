"""gymnax for real on CPU JAX: its CartPole is Gymnasium's CartPole (a contract test steps both from
the same state under the same actions), and both its tasks run through `gpuenv bench`.

`make install` installs gymnax (--no-deps: it pins gymnasium < 1.4) and the gymnax extra; without it
these tests skip and say so."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from gpuenv.registry import default_registry

pytestmark = pytest.mark.backend

if default_registry().get("gymnax").unavailable_reason():
    pytest.skip(default_registry().get("gymnax").unavailable_reason() or "", allow_module_level=True)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from gpuenv.backends.gymnax.adapter import vmapped  # noqa: E402


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gymnax_cartpole_follows_gymnasiums_equations_under_the_same_actions(seed):
    """Same start state, same actions: the same states, rewards and terminations to float32 precision,
    until the pole falls (Gymnasium computes in float64, gymnax in float32)."""
    env, params, _reset, _step = vmapped(default_registry().native("cartpole", "gymnax"))
    ref = gym.make("CartPole-v1")
    obs, _ = ref.reset(seed=seed)
    _, state = env.reset(jax.random.PRNGKey(seed), params)
    state = state.replace(x=jnp.float32(obs[0]), x_dot=jnp.float32(obs[1]), theta=jnp.float32(obs[2]), theta_dot=jnp.float32(obs[3]))
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(0)
    steps = 0
    for t in range(500):
        a = int(rng.integers(0, 2))
        obs, r, term, trunc, _ = ref.step(a)
        key, sub = jax.random.split(key)
        _o, new, rj, tj, _trunc, info = env.step(sub, state, a, params)
        got = np.asarray(info["final_observation"])  # before gymnax's auto-reset
        np.testing.assert_allclose(got, obs, rtol=1e-4, atol=1e-5, err_msg=f"step {t}")
        assert float(rj) == r and bool(tj) == term, (t, float(rj), r, bool(tj), term)
        state, steps = new, t + 1
        if term or trunc:
            break
    assert 5 < steps < 500  # random actions drop the pole: the termination was compared too


def test_the_logical_tasks_map_cartpole_to_the_same_task_and_minatar_to_its_own():
    from gpuenv.tasks import TASKS

    b = default_registry().get("gymnax")
    assert set(b.tasks) == {"cartpole", "breakout_minatar"}
    assert TASKS["breakout_minatar"].family == "minatar"
    assert set(default_registry().offers("breakout_minatar")) == {"gymnax"}  # no look-alike elsewhere
    assert {"gymnasium", "envpool", "gymnax"} <= set(default_registry().offers("cartpole"))


def test_bench_runs_both_tasks_and_records_the_envs_parameters(cli, tmp_path):
    r = cli("bench", "--backend", "gymnax", "--task", "cartpole", "--task", "breakout_minatar", "--num-envs", "16",
            "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    recs = {x["case"]["task"]: x for x in (json.loads(p.read_text()) for p in tmp_path.rglob("*.json"))}
    assert set(recs) == {"cartpole", "breakout_minatar"}
    for rec in recs.values():
        assert rec["status"] == "ok" and rec["summary"]["env_steps_per_s"]["median"] > 0
        d = rec["what"]["details"]
        assert d["gymnax"] == "1.0.1" and d["jax_backend"] == "cpu" and "auto-reset inside gymnax" in rec["what"]["reset_mode"]
    assert recs["cartpole"]["what"]["details"]["params"]["max_steps_in_episode"] == 500
    assert recs["cartpole"]["what"]["details"]["params"]["tau"] == pytest.approx(0.02)
    assert recs["breakout_minatar"]["what"]["obs_shape"] == [10, 10, 4]


def test_its_vecenv_keeps_sb3_semantics_with_the_catalogues_time_limit():
    """The shared PPO trainer's view of gymnax: discrete actions as integers, the time limit from the
    catalogue (5 steps here), a truncation marked as such with its final observation, a fall as a
    termination (not truncated), and gymnax's fresh random reset state after either."""
    from dataclasses import replace

    from gpuenv.backends.gymnax.ppo import make_vecenv

    native = replace(default_registry().native("cartpole", "gymnax"), episode_steps=5)
    venv, details = make_vecenv("jit", native, 4, seed=0)
    assert details["params"]["max_steps_in_episode"] == 5 and "JaxVecEnv" in details["vectoriser"]
    assert not np.allclose(venv.reset(), venv.reset())  # each reset draws new start states (eval rounds differ)
    obs = venv.reset()
    assert obs.shape == (4, 4) and venv.action_space.n == 2
    truncated = 0
    for t in range(10):
        prev = obs
        obs, rewards, dones, infos = venv.step(np.ones(4, np.int64))  # push right: no fall in 5 steps
        assert rewards.dtype == np.float32 and (rewards == 1.0).all()
        assert dones.all() if t % 5 == 4 else not dones.any()
        for i in np.flatnonzero(dones):
            truncated += infos[i]["TimeLimit.truncated"]
            final = infos[i]["terminal_observation"]
            assert final[1] > prev[i][1] and np.abs(obs[i]).max() <= 0.05  # the pushed state, then a fresh reset
    assert truncated == 8  # 4 envs x 2 episodes, all by the time limit

    native = replace(native, episode_steps=500)
    venv, _ = make_vecenv("jit", native, 2, seed=0)
    venv.reset()
    ended: dict[int, dict] = {}
    for _ in range(60):  # always pushing one way: each pole falls well before 60 steps
        _obs, _r, dones, infos = venv.step(np.zeros(2, np.int64))
        ended.update({int(i): infos[i] for i in np.flatnonzero(dones) if i not in ended})
    assert set(ended) == {0, 1} and not any(i["TimeLimit.truncated"] for i in ended.values())
    assert all(abs(i["terminal_observation"][2]) > 0.2 or abs(i["terminal_observation"][0]) > 2.4 for i in ended.values())


def test_minatar_breakout_trains_through_the_shared_trainer_with_integer_actions_and_an_mlp():
    """MinAtar's 10x10x4 float planes are not an Atari image: the shared trainer gives them an MLP
    (SB3's Nature CNN wants uint8 frames and is too big for 10x10), and gymnax indexes its action set
    with the integer actions the VecEnv passes (a float action would fail inside the jit)."""
    from gpuenv.modes.ttr.train import build_sb3

    b = default_registry().get("gymnax")
    native = default_registry().native("breakout_minatar", "gymnax")
    model, venv, details = build_sb3(b, "jit", native, 2, 0, {"n_steps": 16, "batch_size": 16, "n_epochs": 1})
    assert details["policy"] == "MlpPolicy"
    obs = venv.reset()
    assert obs.shape == (2, 10, 10, 4) and obs.dtype == np.float32
    model.learn(32)  # two rollouts of 16 steps x 2 envs: stepping and one update run
    actions, _ = model.predict(obs)
    obs, rewards, dones, _infos = venv.step(actions)
    assert obs.shape == (2, 10, 10, 4) and rewards.shape == (2,)

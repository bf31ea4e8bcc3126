"""PufferLib's vectorisers for real (pufferlib-core from PyPI, `make install`): each variant steps the
catalogue's Gymnasium envs through `gpuenv bench` and records how it was vectorised, and PufferLib's
emulation layer hands out the very observations Gymnasium's env produces under the same actions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuenv.registry import default_registry

pytestmark = pytest.mark.backend

INFO = default_registry().get("pufferlib")
if INFO.unavailable_reason():
    pytest.skip(INFO.unavailable_reason() or "", allow_module_level=True)

import psutil  # noqa: E402

from gpuenv.backends._gym_make import make_env  # noqa: E402
from gpuenv.backends.pufferlib import adapter  # noqa: E402


def test_serial_steps_gymnasiums_envs_unchanged_and_resets_on_the_next_step():
    """4 CartPoles under the same random actions: PufferLib's Serial vectoriser returns what 4
    Gymnasium CartPoles seeded alike return, and an ended env's next step is its reset."""
    import functools

    import pufferlib.vector

    n, seed = 4, 7
    venv = pufferlib.vector.make(functools.partial(adapter._make_one, "CartPole-v1", None), backend=pufferlib.vector.Serial,
                                 num_envs=n, seed=seed)
    venv.async_reset(seed)
    obs = venv.recv()[0].copy()
    refs = [make_env("CartPole-v1") for _ in range(n)]
    want = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(refs)])
    np.testing.assert_array_equal(obs, want)
    rng = np.random.default_rng(0)
    done = [False] * n
    resets = 0
    for _ in range(120):
        actions = rng.integers(0, 2, n).astype(np.int32)
        venv.send(actions)
        obs = venv.recv()[0].copy()
        for i, e in enumerate(refs):
            if done[i]:
                e_obs, _ = e.reset()  # PufferLib resets without a new seed: Gymnasium's own RNG continues
                resets += 1
                done[i] = False
            else:
                e_obs, _r, term, trunc, _ = e.step(int(actions[i]))
                done[i] = term or trunc
            np.testing.assert_allclose(obs[i], e_obs, rtol=1e-6)
    venv.close()
    assert resets >= 4  # random actions end CartPole episodes in ~20 steps: resets were compared


def test_workers_stay_within_pufferlibs_one_per_physical_core_rule_and_leave_one_to_the_main_process():
    cores = psutil.cpu_count(logical=False) or 1
    for n in (1, 2, 3, 8, 64):
        w = adapter.workers_for(n, "mp")
        assert 1 <= w <= max(1, min(n, cores - 1)) and n % w == 0
        every = adapter.workers_for(n, "mp-allcores")
        assert w <= every <= min(n, cores) and n % every == 0
    for n in (2, 4, 8, 64):
        a = adapter.workers_for(n, "mp-async")
        assert a >= 2 and a % 2 == 0 and n % a == 0 and (n // 2) % (n // a) == 0  # a half-batch is whole workers


def test_bench_runs_each_variant_and_records_its_vectorisation(cli, tmp_path):
    r = cli("bench", "--suite", "smoke", "--backend", "pufferlib", "--backend", "pufferlib:serial", "--backend", "pufferlib:mp-async",
            "--task", "cartpole", "--num-envs", "4", "--processes", "1", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    recs = {x["case"]["variant"]: x for x in (json.loads(p.read_text()) for p in tmp_path.rglob("*.json"))}
    assert set(recs) == {"mp", "serial", "mp-async"}
    for rec in recs.values():
        assert rec["status"] == "ok" and rec["summary"]["env_steps_per_s"]["median"] > 0
        assert rec["what"]["details"]["pufferlib"] == "3.0.23" and "next-step reset" in rec["what"]["reset_mode"]
    workers = adapter.workers_for(4, "mp")
    d = recs["mp"]["what"]["details"]
    assert (d["num_workers"], d["batch_size"], d["envs_per_worker"]) == (workers, 4, 4 // workers)
    assert recs["mp-async"]["what"]["details"]["batch_size"] == 2
    assert recs["serial"]["what"]["details"]["vectoriser"] == "pufferlib.vector.Serial"


def test_async_needs_two_envs_and_says_so(cli, tmp_path):
    r = cli("bench", "--suite", "smoke", "--backend", "pufferlib:mp-async", "--task", "cartpole", "--num-envs", "1",
            "--out", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "mp-async" in r.stderr and "2" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


class _Counter:
    """A Gymnasium env whose observation is how many steps it has taken (never ends)."""

    def __new__(cls):
        import gymnasium as gym

        class Counter(gym.Env):
            observation_space = gym.spaces.Box(0, 1e9, (1,), np.float32)
            action_space = gym.spaces.Discrete(2)

            def reset(self, seed=None, options=None):
                super().reset(seed=seed)
                self.n = 0
                return np.zeros(1, np.float32), {}

            def step(self, action):
                self.n += 1
                return np.array([self.n], np.float32), 0.0, False, False, {}

        return Counter()


@pytest.mark.parametrize("variant", ["serial", "mp", "mp-async", "mp-allcores"])
def test_each_variant_steps_exactly_the_env_steps_the_harness_counts(variant):
    """chunk_steps x num_envs env steps a chunk: the envs' own step counters say so (mp-async: one
    half-batch in flight, so within one batch of it)."""
    import gymnasium as gym

    from gpuenv.backends.base import ActionSpace, Case, action_pool
    from gpuenv.backends.spec import NativeTask

    if "GpuenvCounter-v0" not in gym.registry:
        gym.register("GpuenvCounter-v0", entry_point=_Counter)  # workers fork: they inherit it
    n, chunk = 4, 10
    native = NativeTask("GpuenvCounter-v0", None, 1, None, 10**9, (1,), "discrete", 2)
    st = adapter.PufferStepper(Case("pufferlib", variant, "counter", n, chunk_steps=chunk), native)
    try:
        st.load_actions(action_pool(ActionSpace("discrete", n=2), n, 16, 0))
        st.run(3)
        st.env.send(np.zeros(st.batch, np.int32))  # step the batch handed out last too
        st.env.recv()
        if hasattr(st.env, "buf"):  # Multiprocessing: wait until no worker is stepping, read every env
            import time

            from pufferlib.vector import MAIN

            deadline = time.monotonic() + 30
            while (st.env.buf["semaphores"] < MAIN).any() and time.monotonic() < deadline:
                time.sleep(0.001)
            counts = st.env.buf["observations"].ravel().tolist()
        else:
            counts = st.env.observations.ravel().tolist()
    finally:
        st.close()
    calls = 3 * st.calls_per_chunk + 1
    assert sum(counts) == calls * st.batch and calls * st.batch == 3 * chunk * n + st.batch

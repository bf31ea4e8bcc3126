"""Brax's own benchmark beside gpuenv's Brax rows: `brax.test_utils.benchmark` (what Brax's pipeline
tests time) over the env's own System and pipeline, batch = num_envs, zero actions. It counts
pipeline steps, each one physics step; gpuenv's env step is n_frames of them plus the env layer
(observation, reward, Brax's episode and auto-reset wrappers). Imports JAX and Brax: for
`make bench-overhead`, not declarations."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from importlib.metadata import version

import jax.numpy as jnp
from brax import envs, test_utils


def name() -> str:
    return f"brax.test_utils.benchmark over the env's pipeline, brax {version('brax')}"


def peer(variant: str, env_id: str, num_envs: int) -> Callable[[int], float]:
    """run(length) -> physics steps/s: Brax's benchmark of `length` pipeline steps per env (its mean
    over 4 timed batches after one compiled; its timer)."""
    env = envs.get_environment(env_id, backend=variant)
    sys, pipeline = env.sys, env._pipeline
    act = jnp.zeros(sys.act_size())

    def init_fn(_rng):
        return pipeline.init(sys, sys.init_q, jnp.zeros(sys.qd_size()))

    def step_fn(state):
        return pipeline.step(sys, state, act)

    def run(length: int) -> float:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints a line per call
            return float(test_utils.benchmark(f"brax {variant}", init_fn, step_fn, num_envs, length))

    return run

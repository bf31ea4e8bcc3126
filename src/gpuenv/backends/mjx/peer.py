"""MuJoCo's own benchmark beside gpuenv's MJX rows: `mujoco.mjx.benchmark`, the function MuJoCo's
`mjx-testspeed` command runs (in the mujoco-mjx wheel), on the same model file with the variant's
solver settings, batch = num_envs, unroll 1. It counts physics steps (one mjx.step of every env);
gpuenv's env step is frame_skip of them plus the env layer (actions, observation, reward,
auto-reset). Imports JAX and MuJoCo: for `make bench-overhead`, not declarations."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version

import mujoco
from mujoco import mjx

from gpuenv.backends.mjx.adapter import ASSETS, SETTINGS


def name() -> str:
    return f"mujoco.mjx.benchmark (what mjx-testspeed runs), mujoco-mjx {version('mujoco-mjx')}"


def peer(variant: str, env_id: str, num_envs: int) -> Callable[[int], float]:
    """run(nstep) -> physics steps/s of one mjx.benchmark call (its own timer; compile excluded)."""
    m = mujoco.MjModel.from_xml_path(str(ASSETS / env_id))
    settings = SETTINGS[variant]
    if settings is not None:
        settings.apply(m)  # Euler damping is the model's flag: mjx.benchmark keeps it as set here
    solver = mujoco.mjtSolver(m.opt.solver).name.removeprefix("mjSOL_").lower()
    iterations, ls_iterations = int(m.opt.iterations), int(m.opt.ls_iterations)

    def run(nstep: int) -> float:
        _jit_s, run_s, steps = mjx.benchmark(m, nstep, num_envs, 1, solver, iterations, ls_iterations)
        return steps / run_s

    return run

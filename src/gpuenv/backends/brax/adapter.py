"""Brax envs: vmapped, auto-reset, stepped in a jit-compiled lax.scan chunk.

Variants are Brax's physics pipelines (`generalized` is the default of its envs); the pipeline, its
timestep and n_frames are recorded.
"""

from __future__ import annotations

import jax
from brax import envs
from brax.envs.wrappers import training

from gpuenv.backends import _mujoco
from gpuenv.backends._jax import ScanStepper, brax_style_stepper, device_facts
from gpuenv.backends.base import Case
from gpuenv.backends.spec import NativeTask

RESET_MODE = "auto-reset to each env's cached first state (Brax AutoResetWrapper), inside the scan"
NO_RESETS = "none: Brax's VmapWrapper only (no EpisodeWrapper time limit, no AutoResetWrapper) on a task without termination"


# Brax releases this adapter was checked against: 0.10 (envs.get_environment(backend=...) and the
# training wrappers as used here) up to 0.14. The pipeline is always passed explicitly, so a change
# of Brax's default pipeline between releases cannot change the workload.
MIN_VERSION = (0, 10)


def _version() -> tuple[int, ...]:
    import brax

    return tuple(int(x) for x in brax.__version__.split(".")[:2] if x.isdigit())


def open(case: Case, native: NativeTask) -> ScanStepper:  # noqa: A001 - the adapter contract
    return _open(case, native, resets=True)


def open_without_resets(case: Case, native: NativeTask) -> ScanStepper:
    """Vmapped steps without Brax's episode and auto-reset wrappers: no time limit, no per-step
    select against the cached first state (on a task without termination; the harness checks)."""
    return _open(case, native, resets=False)


def _open(case: Case, native: NativeTask, *, resets: bool) -> ScanStepper:
    import brax

    if _version() < MIN_VERSION:
        from gpuenv.errors import Unsupported

        raise Unsupported(f"brax {brax.__version__} is older than the adapter supports (>= 0.10): not run")
    device, details = device_facts()
    base = envs.get_environment(native.env_id, backend=case.variant)
    if resets:
        env = training.wrap(base, episode_length=native.episode_steps, action_repeat=1)
    else:
        env = training.VmapWrapper(base)
    keys = jax.random.split(jax.random.PRNGKey(case.seed), case.num_envs)
    state = jax.block_until_ready(jax.jit(env.reset)(keys))
    facts = pipeline_facts(base, case.variant)
    details.update(
        brax=brax.__version__,
        pipeline_choice="passed explicitly (backend=...), never Brax's default",
        **facts,
        episode_length=native.episode_steps if resets else None,
    )
    # Brax actions are in [-1, 1] for every env it ships.
    return brax_style_stepper(env, state, env.action_size, native.env_id, case.chunk_steps, RESET_MODE if resets else NO_RESETS, device, details,
                              physics_steps=facts["n_frames"])


def pipeline_facts(env, pipeline: str) -> dict:
    """The pipeline, its solver settings, and n_frames: pipeline steps per env step, each one physics step."""
    return {"pipeline": pipeline, **solver_facts(env.sys, pipeline), "n_frames": int(getattr(env, "_n_frames", 1)),
            "control_dt_s": float(env.dt)}


def solver_facts(sys, pipeline: str) -> dict:
    """MuJoCo's solver options where the pipeline runs them (mjx: MJX's step, with the settings Brax's
    env file sets); the other pipelines solve constraints their own way, which the record says."""
    precision = _mujoco.jax_precision()
    if pipeline == "mjx":
        return _mujoco.options(sys.opt, precision)
    own = {"generalized": ("projected-gradient (jaxopt), brax generalized's own", int(sys.solver_iterations))}
    solver, iterations = own.get(pipeline, (f"brax {pipeline}'s own position/impulse updates", None))
    return {"physics_timestep_s": float(sys.opt.timestep), "solver": solver, "iterations": iterations,
            "solver_note": "MuJoCo's solver options do not apply to this pipeline", "precision": precision}

"""Brax envs: vmapped, auto-reset, stepped in a jit-compiled lax.scan chunk.

Variants are Brax's physics pipelines (`generalized` is the default of its envs); the pipeline, its
timestep and n_frames are recorded.
"""

from __future__ import annotations

import jax
from brax import envs
from brax.envs.wrappers import training

from gpuenv.backends._jax import ScanStepper, device_facts, make_chunk
from gpuenv.backends.base import ActionSpace, Case, StepperFacts
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
    # Brax actions are in [-1, 1] for every env it ships.
    space = ActionSpace("box", low=(-1.0,) * env.action_size, high=(1.0,) * env.action_size)
    details.update(
        brax=brax.__version__,
        pipeline=case.variant,
        pipeline_choice="passed explicitly (backend=...), never Brax's default",
        physics_timestep_s=float(base.sys.opt.timestep),
        n_frames=int(getattr(base, "_n_frames", 1)),
        control_dt_s=float(base.dt),
        episode_length=native.episode_steps if resets else None,
    )
    facts = StepperFacts(
        native_env_id=native.env_id,
        # not env.observation_size: Brax computes it by running reset eagerly (13 s on CPU)
        obs_shape=tuple(int(x) for x in state.obs.shape[1:]),
        action_space=space,
        reset_mode=RESET_MODE if resets else NO_RESETS,
        device=device,
        details=details,
    )
    return ScanStepper(make_chunk(env.step, case.chunk_steps), state, facts)


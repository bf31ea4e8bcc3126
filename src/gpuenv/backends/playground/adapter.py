"""MuJoCo Playground envs: vmapped, auto-reset (Brax's wrappers, as Playground's training wraps
them), stepped in a jit-compiled lax.scan chunk. The variant picks the MJX implementation and the
solver settings; both, and the model's options as they ran, are in the records."""

from __future__ import annotations

import jax

from gpuenv.backends._jax import ScanStepper, brax_style_stepper, device_facts
from gpuenv.backends.base import Case
from gpuenv.backends.playground import physics
from gpuenv.backends.spec import NativeTask

RESET_MODE = "auto-reset to each env's cached first state (Playground's wrap_for_brax_training: Brax's wrappers), inside the scan"
NO_RESETS = "none: vmapped only (no episode limit, no auto-reset) on a task without termination"


def open(case: Case, native: NativeTask) -> ScanStepper:  # noqa: A001 - the adapter contract
    return _open(case, native, resets=True)


def open_without_resets(case: Case, native: NativeTask) -> ScanStepper:
    """Vmapped steps without the episode and auto-reset wrappers (a task without termination)."""
    return _open(case, native, resets=False)


def _open(case: Case, native: NativeTask, *, resets: bool) -> ScanStepper:
    from brax.envs.wrappers import training
    from mujoco_playground import wrapper

    device, details = device_facts()
    base = physics.load(native.env_id, case.variant)
    if resets:
        env = wrapper.wrap_for_brax_training(base, episode_length=native.episode_steps, action_repeat=1)
    else:
        env = training.VmapWrapper(base)
    keys = jax.random.split(jax.random.PRNGKey(case.seed), case.num_envs)
    state = jax.block_until_ready(jax.jit(env.reset)(keys))
    details.update(physics.facts(base, case.variant), episode_length=native.episode_steps if resets else None)
    return brax_style_stepper(env, state, base.action_size, native.env_id, case.chunk_steps, RESET_MODE if resets else NO_RESETS, device, details,
                              physics_steps=int(base.n_substeps))

"""MuJoCo Playground's PPO support: its env as an SB3 VecEnv for the shared trainer, and Brax PPO with
Playground's wrappers as its native trainer. Imported only in training workers."""

from __future__ import annotations

from gpuenv.backends import _brax_ppo
from gpuenv.backends.playground import physics
from gpuenv.backends.spec import NativeTask


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record)."""
    base = physics.load(native.env_id, variant)
    vecenv = _brax_ppo.episode_vecenv(base, native.episode_steps, num_envs, seed, int(native.obs_shape[0]), "data")
    details = {
        "vectoriser": _brax_ppo.VECTORISER,
        **physics.facts(base, variant),
    }
    return vecenv, details


def train(case, prog) -> dict:  # prog: gpuenv.modes.ttr.train.Progress
    from mujoco_playground import wrapper

    def make_env():
        env = physics.load(prog.native.env_id, case.variant)
        return env, physics.facts(env, case.variant)

    return _brax_ppo.train(case, prog, make_env, wrap_env_fn=wrapper.wrap_for_brax_training)

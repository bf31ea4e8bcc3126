"""Brax's PPO support: its batched env for the shared SB3 trainer, and its native trainer (Brax PPO).
Imported only in training workers."""

from __future__ import annotations

from gpuenv.backends import _brax_ppo
from gpuenv.backends.spec import NativeTask


def _pipeline_facts(env, pipeline: str) -> dict:
    from gpuenv.backends.brax.adapter import pipeline_facts

    return pipeline_facts(env, pipeline)


def make_vecenv(pipeline: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record)."""
    from brax import envs

    base = envs.get_environment(native.env_id, backend=pipeline)
    vecenv = _brax_ppo.episode_vecenv(base, native.episode_steps, num_envs, seed, int(native.obs_shape[0]), "pipeline_state")
    details = {
        "vectoriser": _brax_ppo.VECTORISER,
        **_pipeline_facts(base, pipeline),
    }
    return vecenv, details


def train(case, prog) -> dict:  # prog: gpuenv.modes.ttr.train.Progress
    def make_env():
        from brax import envs

        env = envs.get_environment(prog.native.env_id, backend=case.variant)
        facts = _pipeline_facts(env, case.variant)
        del facts["n_frames"]
        return env, facts

    return _brax_ppo.train(case, prog, make_env)

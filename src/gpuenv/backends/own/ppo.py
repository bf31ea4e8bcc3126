"""Your own env's batched env for the shared SB3 PPO trainer (the policy phases of `gpuenv profile`)."""

from __future__ import annotations

from gpuenv.backends.spec import NativeTask


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int):
    from gpuenv.backends.gymnasium.ppo import make_vecenv as gymnasium_vecenv
    from gpuenv.backends.own.adapter import _make

    return gymnasium_vecenv(variant, native, num_envs, seed, _make())

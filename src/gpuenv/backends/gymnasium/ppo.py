"""The gymnasium backend's batched env for the shared SB3 PPO trainer. Imported only in training workers."""

from __future__ import annotations

from typing import Any

from gpuenv.backends.spec import NativeTask


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int, make: Any = None):
    """(SB3 VecEnv, details for the record). `make`: how one env is built (default: the catalogue's)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from gpuenv.backends._gym_make import make_env
    from gpuenv.backends.gymnasium.adapter import START_METHOD, _EnvFn

    venv: Any
    fns: list[Any] = [_EnvFn(native.env_id, seed + i, None, make or make_env) for i in range(num_envs)]
    if variant == "subproc":
        venv = SubprocVecEnv(fns, start_method=START_METHOD)
        details = {"vectoriser": "stable_baselines3.SubprocVecEnv", "start_method": START_METHOD}
    else:
        venv = DummyVecEnv(fns)
        details = {"vectoriser": "stable_baselines3.DummyVecEnv"}
    venv.seed(seed)
    return venv, details

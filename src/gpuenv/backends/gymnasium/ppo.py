"""The gymnasium backend's batched env for the shared SB3 PPO trainer. Imported only in training workers."""

from __future__ import annotations

from typing import Any

from gpuenv.backends.spec import NativeTask


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int, make: Any = None):
    """(SB3 VecEnv, details for the record). `make`: how one env is built (default: the catalogue's)."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from gpuenv.backends._gym_make import make_env
    from gpuenv.backends.gymnasium.adapter import GYM_VECTOR, START_METHOD, _EnvFn, gym_vector
    from gpuenv.backends.vecenv import GymVectorVecEnv

    venv: Any
    fns: list[Any] = [_EnvFn(native.env_id, seed + i, None, make or make_env) for i in range(num_envs)]
    if variant in GYM_VECTOR:  # same-step autoreset here: the final observation comes with the step that ends
        env, details = gym_vector(variant, fns, gym.vector.AutoresetMode.SAME_STEP)
        venv = GymVectorVecEnv(env)
    elif variant == "subproc":
        venv = SubprocVecEnv(fns, start_method=START_METHOD)
        details = {"vectoriser": "stable_baselines3.SubprocVecEnv", "start_method": START_METHOD}
    else:
        venv = DummyVecEnv(fns)
        details = {"vectoriser": "stable_baselines3.DummyVecEnv"}
    venv.seed(seed)
    return venv, details

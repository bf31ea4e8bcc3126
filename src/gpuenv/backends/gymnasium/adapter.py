"""CPU baseline: Gymnasium envs vectorised the ways users actually compare.

Variants: `subproc` (SB3 SubprocVecEnv, one process per env: the baseline speedups are quoted
against), `dummy` (SB3 DummyVecEnv, all envs stepped in turn in one process), `sync` (Gymnasium's
SyncVectorEnv, next-step autoreset), `async` and `async-noshm` (Gymnasium's AsyncVectorEnv, one
process per env, observations through shared memory or pickled through its pipes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from gpuenv.backends._common import HostLoop, action_space_of, flat_obs_shape
from gpuenv.backends._gym_make import make_env, probe_physics
from gpuenv.backends.base import NO_RESETS, NO_TIME_LIMIT, Case, StepperFacts
from gpuenv.backends.spec import NativeTask

# SB3 defaults to forkserver; fork starts 64 env processes in a fraction of the time and steps the
# same. Startup is recorded apart from steady state either way, and the method is recorded.
START_METHOD = "fork"
NEXT_STEP_RESET = "next-step autoreset (Gymnasium 1.x: one extra step per episode returns the reset obs)"


class _EnvFn:
    """Picklable env factory (SubprocVecEnv sends it to the child). `make(env_id, max_episode_steps)`
    builds one env: gpuenv's catalogue (make_env), or a user's own (gpuenv.backends.own)."""

    def __init__(self, env_id: str, seed: int, max_episode_steps: int | None = None, make: Callable[..., gym.Env] = make_env) -> None:
        self.env_id, self.seed, self.max_episode_steps, self.make = env_id, seed, max_episode_steps, make

    def __call__(self) -> gym.Env:
        env = self.make(self.env_id, self.max_episode_steps)
        env.reset(seed=self.seed)
        return env


GYM_VECTOR = ("sync", "async", "async-noshm")  # the variants that are Gymnasium's own vector envs


def gym_vector(variant: str, fns: list[Any], autoreset: Any) -> tuple[Any, dict[str, Any]]:
    """Gymnasium's SyncVectorEnv (`sync`) or AsyncVectorEnv (`async`: observations through shared memory,
    `async-noshm`: pickled through its pipes) over `fns`, in autoreset mode `autoreset`; and its record details."""
    mode = {gym.vector.AutoresetMode.NEXT_STEP: "next-step", gym.vector.AutoresetMode.SAME_STEP: "same-step"}[autoreset]
    if variant == "sync":
        return gym.vector.SyncVectorEnv(fns, autoreset_mode=autoreset), {"vectoriser": "gymnasium.vector.SyncVectorEnv", "autoreset_mode": mode}
    shm = variant == "async"
    env = gym.vector.AsyncVectorEnv(fns, shared_memory=shm, context=START_METHOD, autoreset_mode=autoreset)
    return env, {"vectoriser": "gymnasium.vector.AsyncVectorEnv", "shared_memory": shm, "start_method": START_METHOD, "autoreset_mode": mode}


class GymnasiumStepper(HostLoop):
    def __init__(self, case: Case, native: NativeTask, *, no_time_limit: bool = False, make: Callable[..., gym.Env] = make_env) -> None:
        limit = NO_TIME_LIMIT if no_time_limit else None
        fns: list[Any] = [_EnvFn(native.env_id, case.seed + i, limit, make) for i in range(case.num_envs)]
        details: dict = {"vectoriser": case.variant}
        self.env: Any
        if case.variant == "subproc":
            from stable_baselines3.common.vec_env import SubprocVecEnv

            self.env = SubprocVecEnv(fns, start_method=START_METHOD)
            details.update(vectoriser="stable_baselines3.SubprocVecEnv", start_method=START_METHOD)
            reset_mode = "same-step autoreset in each env process (SB3 VecEnv; final obs in info)"
        elif case.variant == "dummy":
            from stable_baselines3.common.vec_env import DummyVecEnv

            self.env = DummyVecEnv(fns)
            details.update(vectoriser="stable_baselines3.DummyVecEnv")
            reset_mode = "same-step autoreset (SB3 VecEnv; final obs in info)"
        elif case.variant in GYM_VECTOR:
            self.env, more = gym_vector(case.variant, fns, gym.vector.AutoresetMode.NEXT_STEP)
            details.update(more)
            reset_mode = NEXT_STEP_RESET
        else:
            raise ValueError(f"unknown gymnasium variant {case.variant!r}")
        if no_time_limit:
            reset_mode = NO_RESETS
        self._sb3 = case.variant in ("subproc", "dummy")
        self.env.reset() if self._sb3 else self.env.reset(seed=case.seed)
        self.steps_per_chunk = case.chunk_steps
        physics_steps, solver = probe_physics(native, make)
        details.update(solver)
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=flat_obs_shape(self.env.observation_space if self._sb3 else self.env.single_observation_space),
            action_space=action_space_of(self.env.action_space if self._sb3 else self.env.single_action_space),
            reset_mode=reset_mode,
            device="cpu",
            details=details,
            physics_steps=physics_steps,
        )

    def close(self) -> None:
        self.env.close()


def open(case: Case, native: NativeTask) -> GymnasiumStepper:  # noqa: A001 - the adapter contract
    return GymnasiumStepper(case, native)


def open_without_resets(case: Case, native: NativeTask) -> GymnasiumStepper:
    """The same vectoriser with each env's time limit removed (a task that ends only at the limit)."""
    return GymnasiumStepper(case, native, no_time_limit=True)

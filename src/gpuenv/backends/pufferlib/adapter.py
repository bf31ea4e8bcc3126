"""PufferLib's vectorisers stepping Gymnasium envs (made exactly as the gymnasium backend makes
them) through PufferLib's emulation layer (GymnasiumPufferEnv). PufferLib resets an env on the step
after its episode ends (that step returns the reset observation), as Gymnasium's next-step autoreset.

Multiprocessing workers spin on shared-memory flags (PufferLib's design: at most one worker per
physical core, which it enforces), and the main process spins in recv too: see workers_for. The
records say how many workers and envs per worker ran, and the batch."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import psutil
import pufferlib
import pufferlib.emulation
import pufferlib.vector

from gpuenv.backends._common import action_space_of, flat_obs_shape
from gpuenv.backends._gym_make import make_env, probe_physics
from gpuenv.backends.base import NO_RESETS, NO_TIME_LIMIT, Case, StepperFacts
from gpuenv.backends.spec import NativeTask

DISTRIBUTION = "pufferlib-core from PyPI: Metta AI's vendored copy of PufferLib's core, not a PufferAI release"
RESET_MODE = "next-step reset by PufferLib's vectoriser (the step after an episode ends resets that env and returns its first obs)"


def _make_one(env_id: str, max_episode_steps: int | None, buf=None, seed: int = 0):
    return pufferlib.emulation.GymnasiumPufferEnv(env_creator=make_env, env_args=[env_id, max_episode_steps], buf=buf, seed=seed)


def usable_cores() -> int:
    """PufferLib counts physical cores; a cpuset (Docker, Slurm) may allow fewer."""
    import os

    physical = psutil.cpu_count(logical=False) or 1
    return min(physical, len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else physical


def workers_for(num_envs: int, variant: str) -> int:
    """Worker processes for a variant. PufferLib allows one per physical core (more only with
    overwork=True), and its workers and its main process all busy-wait on shared-memory flags: with
    a worker on every core the main process has none, and each batch waits for the scheduler (on 2
    cores: 6.6 ms a batch with 2 workers against 0.06 ms with 1, CartPole, 8 envs). So `multiprocessing`
    leaves a core to the main process, `mp-allcores` takes them all, and
    `mp-async` needs an even number (its batch is half the envs, whole workers), at
    least 2. Envs split evenly among the workers."""
    cores = usable_cores()
    if variant == "mp-allcores":
        w = min(num_envs, cores)
    elif variant == "mp-async":
        w = max(2, min(num_envs, cores - 1))
        while w > 2 and (w % 2 or num_envs % w):
            w -= 1
        return w
    else:
        w = max(1, min(num_envs, cores - 1))
    while num_envs % w:
        w -= 1
    return w


def vectorise(variant: str, num_envs: int, seed: int, creators: Any) -> tuple[Any, int, dict[str, Any]]:
    """(PufferLib vector env, its batch, details for the record) for a variant: one creator for every
    env, or a list of one creator per env. Shared by the stepper and the PPO env (pufferlib.ppo)."""
    n = num_envs
    details: dict[str, Any] = {"pufferlib": _version(), "distribution": DISTRIBUTION}
    if not isinstance(creators, list):
        creators = [creators] * n
    args: dict[str, Any] = {"env_args": [[]] * n, "env_kwargs": [{}] * n, "num_envs": n, "seed": seed}
    if variant == "serial":
        details.update(vectoriser="pufferlib.vector.Serial")
        return pufferlib.vector.make(creators, backend=pufferlib.vector.Serial, **args), n, details  # one send steps every env
    if variant == "mp-async" and n % 2:
        raise ValueError(f"pufferlib mp-async: num_envs {n} is odd; its batch is half the envs: use an even num_envs")
    workers = workers_for(n, variant)
    batch = n // 2 if variant == "mp-async" else n
    env = pufferlib.vector.make(creators, backend=pufferlib.vector.Multiprocessing, num_workers=workers, batch_size=batch, **args)
    details.update(vectoriser="pufferlib.vector.Multiprocessing", num_workers=workers, envs_per_worker=n // workers,
                   batch_size=batch, zero_copy=True, physical_cores=psutil.cpu_count(logical=False), usable_cores=usable_cores())
    return env, batch, details


def close_vector(env: Any) -> None:
    env.close()
    for p in getattr(env, "processes", ()):  # PufferLib terminates its workers; reap them
        p.join(timeout=5)


class PufferStepper:
    def __init__(self, case: Case, native: NativeTask, *, no_time_limit: bool = False) -> None:
        n = case.num_envs
        creator = functools.partial(_make_one, native.env_id, NO_TIME_LIMIT if no_time_limit else None)
        self.env, self.batch, details = vectorise(case.variant, n, case.seed, creator)
        # each send() steps exactly the batch recv() handed out: chunk_steps x n env steps per chunk
        self.calls_per_chunk = case.chunk_steps * n // self.batch
        try:
            self.env.async_reset(case.seed)
            self.env.recv()
        except BaseException:
            self.close()
            raise
        self._actions: Any = None
        self._i = 0
        physics_steps, solver = probe_physics(native)
        details.update(solver)
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=flat_obs_shape(self.env.single_observation_space),
            action_space=action_space_of(self.env.single_action_space),
            reset_mode=NO_RESETS if no_time_limit else RESET_MODE,
            device="cpu",
            details=details,
            physics_steps=physics_steps,
        )

    def load_actions(self, pool: np.ndarray) -> None:
        space = self.env.single_action_space
        dtype = np.int32 if hasattr(space, "n") else space.dtype  # PufferLib's transport dtype for discrete actions
        self._actions = np.ascontiguousarray(pool[:, : self.batch].astype(dtype))

    def run(self, loops: int) -> None:
        pool, n, i = self._actions, len(self._actions), self._i
        send, recv = self.env.send, self.env.recv
        for _ in range(loops * self.calls_per_chunk):
            send(pool[i % n])
            recv()
            i += 1
        self._i = i

    def sync(self) -> None:
        """recv() returns once a batch has stepped. In mp-async the other half stays in flight across
        timed values (at most one call of a value's calls: the same in every value)."""

    def close(self) -> None:
        close_vector(self.env)


def _version() -> str:
    from importlib.metadata import version

    return version("pufferlib-core")


def open(case: Case, native: NativeTask) -> PufferStepper:  # noqa: A001 - the adapter contract
    return PufferStepper(case, native)


def open_without_resets(case: Case, native: NativeTask) -> PufferStepper:
    """The same vectoriser with each env's time limit removed (a task that ends only at the limit)."""
    return PufferStepper(case, native, no_time_limit=True)

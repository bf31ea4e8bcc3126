"""EnvPool: a C++ thread pool stepping a batch of envs.

Variants: `sync` (batch_size = num_envs, one step() per batch), `async` (send/recv with
batch_size = num_envs / 2: the pool keeps stepping the other half while Python handles one), and
`sync-pinned` / `async-pinned`: the same with the settings of EnvPool's own benchmark script, so a
published EnvPool figure can be compared under its protocol as well as gpuenv's (threads pinned,
Atari's plain resize).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import numpy as np

# EnvPool imports jax (2+ s) only for its optional XLA interface, which gpuenv does not use, and it
# handles the ImportError. Blocking it in this worker process shortens startup, not steady state.
XLA_INTERFACE = "off (jax import blocked in the worker: unused)"
if "jax" not in sys.modules:
    sys.modules["jax"] = None  # type: ignore[assignment]
    try:
        import envpool
    finally:
        del sys.modules["jax"]
else:
    import envpool

from gpuenv.backends._common import action_space_of, flat_obs_shape  # noqa: E402 - after the guarded envpool import
from gpuenv.backends.base import NO_RESETS, NO_TIME_LIMIT, Case, StepperFacts  # noqa: E402
from gpuenv.backends.spec import NativeTask  # noqa: E402

RESET_MODE = "next-step reset in C++: the step after an episode ends ignores its action and returns the reset obs"


def require_env(env_id: str) -> None:
    """EnvPool releases differ in which envs they register (0.8.x has MuJoCo v4, 1.x adds v5): a
    missing id is reported for this release, never replaced by another version of the task."""
    if env_id not in set(envpool.list_all_envs()):
        from gpuenv.errors import Unsupported

        raise Unsupported(
            f"envpool {getattr(envpool, '__version__', '?')} has no {env_id}; gpuenv does not substitute "
            "another version of the task (this envpool release is unsupported for it)"
        )


def own_protocol(variant: str, env_id: str) -> dict[str, Any]:
    """The settings of EnvPool's own benchmark script (benchmark/test_envpool.py) that differ from
    envpool.make's defaults, for the `sync-pinned` and `async-pinned` variants: worker threads pinned
    to cores from 0, and for Atari the plain (not INTER_AREA) resize. Other variants use EnvPool's
    defaults."""
    if not variant.endswith("-pinned"):
        return {}
    fields = envpool.make_spec(env_id).config._fields
    out: dict[str, Any] = {"thread_affinity_offset": 0}
    if "use_inter_area_resize" in fields:
        out["use_inter_area_resize"] = False
    return out


def physics_of(config: Any, env_id: str) -> tuple[int | None, dict]:
    """(physics steps per env step, solver options) from the env's own config: its MuJoCo frame_skip
    (Gymnasium's tasks and dm_control's) and the model file it loads, read here with MuJoCo; 1 for
    CartPole (one integrator step per step); None for Atari (emulator frames, no physics step)."""
    fields = config._fields
    if "xml_file" in fields:  # Gymnasium's MuJoCo tasks
        path = os.path.join(config.base_path, "mujoco", "assets_gym", config.xml_file)
    elif "task_name" in fields:  # dm_control's: the domain's model file (CheetahRun -> cheetah.xml)
        domain = re.match(r"[A-Z][a-z]+", env_id)
        path = os.path.join(config.base_path, "mujoco", "assets_dmc", f"{domain.group(0).lower() if domain else ''}.xml")
    elif env_id.startswith("CartPole"):
        return 1, {}
    else:
        return None, {}
    from gpuenv.backends import _mujoco

    return int(config.frame_skip), _mujoco.file_options(path) if os.path.exists(path) else {"solver": f"not read: {path} absent"}


class EnvPoolStepper:
    def __init__(self, case: Case, native: NativeTask, *, no_time_limit: bool = False) -> None:
        require_env(native.env_id)
        n = case.num_envs
        self.async_mode = case.variant.startswith("async")
        self.batch = max(1, n // 2) if self.async_mode else n
        # EnvPool's own default (num_threads=0) resolves to min(batch_size, cores); pass it explicitly
        # so the record states the value used.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self.num_threads = min(self.batch, cores)
        self.env = envpool.make(
            native.env_id,
            env_type="gymnasium",
            num_envs=n,
            batch_size=self.batch,
            num_threads=self.num_threads,
            seed=case.seed,
            **({"max_episode_steps": NO_TIME_LIMIT} if no_time_limit else {}),
            **own_protocol(case.variant, native.env_id),
        )
        if self.async_mode:
            self.env.async_reset()
            self._env_id = self.env.recv()[-1]["env_id"]
        else:
            self.env.reset()
        # A chunk is chunk_steps steps of every env, i.e. chunk_steps * n / batch calls: it must divide
        # exactly, or the harness would count steps that never ran.
        if (case.chunk_steps * n) % self.batch:
            raise ValueError(
                f"envpool {case.variant}: chunk_steps x num_envs ({case.chunk_steps} x {n}) is not a multiple "
                f"of batch_size {self.batch}; use an even num_envs"
            )
        self.calls_per_chunk = case.chunk_steps * n // self.batch
        self._actions: Any = None  # set by load_actions before run
        self._i = 0
        physics_steps, solver = physics_of(self.env.spec.config, native.env_id)
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=flat_obs_shape(self.env.observation_space),
            action_space=action_space_of(self.env.action_space),
            reset_mode=NO_RESETS if no_time_limit else RESET_MODE,
            device="cpu",
            details={
                "mode": case.variant,
                **own_protocol(case.variant, native.env_id),
                "batch_size": self.batch,
                "num_threads": self.num_threads,
                "env_type": "gymnasium",
                "xla_interface": XLA_INTERFACE,
                **solver,
            },
            physics_steps=physics_steps,
        )

    def load_actions(self, pool: np.ndarray) -> None:
        if self.facts.action_space.kind == "box":
            pool = pool.astype(np.float64)  # EnvPool's MuJoCo/dm_control actions are float64
        self._actions = pool

    def run(self, loops: int) -> None:
        pool, n, i = self._actions, len(self._actions), self._i
        calls = loops * self.calls_per_chunk
        if self.async_mode:
            send, recv, batch = self.env.send, self.env.recv, self.batch
            env_id = self._env_id
            for _ in range(calls):
                send(pool[i % n][:batch], env_id)
                env_id = recv()[-1]["env_id"]
                i += 1
            self._env_id = env_id
        else:
            step = self.env.step
            for _ in range(calls):
                step(pool[i % n])
                i += 1
        self._i = i

    def sync(self) -> None:
        """step()/recv() return only after the pool has produced the batch: nothing is left queued
        beyond the next batch in async mode, which is the same in every timed value."""

    def close(self) -> None:
        close = getattr(self.env, "close", None)  # older EnvPool releases have none
        if close:
            close()


def open(case: Case, native: NativeTask) -> EnvPoolStepper:  # noqa: A001 - the adapter contract
    return EnvPoolStepper(case, native)


def open_without_resets(case: Case, native: NativeTask) -> EnvPoolStepper:
    """The same env with its time limit removed: on a task whose episodes end only at the limit
    (the harness checks), nothing resets inside the timed region."""
    return EnvPoolStepper(case, native, no_time_limit=True)

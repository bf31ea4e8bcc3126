"""Small helpers shared by the host-side adapters (no timing here: the harness owns the clock)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from gpuenv.backends.base import ActionSpace


class HostLoop:
    """The stepping half of a host-side stepper whose `env.step(actions)` steps every env at once and
    synchronously (a Gymnasium vectoriser, an Ocean PufferEnv): run() rotates through the harness's
    action pool, one batch per step. The stepper sets `env` and `steps_per_chunk`."""

    env: Any
    steps_per_chunk: int
    _actions: Any = None  # set by load_actions before run
    _i: int = 0

    def load_actions(self, pool) -> None:
        self._actions = pool

    def run(self, loops: int) -> None:
        pool, step = self._actions, self.env.step
        n = len(pool)
        i = self._i
        for _ in range(loops * self.steps_per_chunk):
            step(pool[i % n])
            i += 1
        self._i = i

    def sync(self) -> None:
        """Host-side stepping is synchronous: nothing is queued."""


def action_space_of(space) -> ActionSpace:
    """gymnasium / gym Space -> ActionSpace (duck-typed so EnvPool's gym spaces work too)."""
    if hasattr(space, "n"):
        return ActionSpace("discrete", n=int(space.n))
    return ActionSpace("box", low=tuple(float(x) for x in space.low.ravel()), high=tuple(float(x) for x in space.high.ravel()))


def flat_obs_shape(space) -> tuple[int, ...]:
    """Observation shape; dict observations (dm_control) count as their flattened size."""
    if getattr(space, "shape", None):
        return tuple(int(x) for x in space.shape)
    if hasattr(space, "spaces"):
        total = 0
        for sub in space.spaces.values():
            size = 1
            for d in sub.shape or (1,):
                size *= int(d)
            total += size
        return (total,)
    raise ValueError(f"cannot tell the shape of observation space {space!r}")


def sb3_infos(num_envs: int, dones: Any, truncated: Any, finals: Iterable[tuple[Any, Any]] = ()) -> list[dict[str, Any]]:
    """SB3's per-env infos of one step (the contract in gpuenv.backends.vecenv), without SB3: every
    finished env's `TimeLimit.truncated` (ended by the time limit only), and `terminal_observation`
    for each (env, its final observation) in finals, the envs whose simulator kept it."""
    infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for i in np.flatnonzero(dones):
        infos[i]["TimeLimit.truncated"] = bool(truncated[i])
    for env, final in finals:
        infos[int(env)]["terminal_observation"] = final
    return infos

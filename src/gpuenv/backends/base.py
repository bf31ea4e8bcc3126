"""The contract between the harness and a backend adapter.

An adapter knows how to build and step its simulator, nothing more: it never reads a clock, computes
a rate or writes a file. The harness (gpuenv.measure) owns all of that.

    stepper = adapter.open(case, native)   # build + reset (the harness times this as startup)
    stepper.load_actions(pool)             # pre-generated actions, shape (pool_steps, num_envs, ...)
    stepper.run(loops)                     # loops x case.chunk_steps steps of every env; may be async
    stepper.sync()                         # block until the work queued by run() has finished
    stepper.close()
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class Case:
    """One measured configuration: backend x variant x task x num_envs."""

    backend: str
    variant: str
    task: str
    num_envs: int
    chunk_steps: int = 100
    seed: int = 0
    action_pool_steps: int = 64

    @property
    def key(self) -> str:
        return f"{self.backend}-{self.variant}-{self.task}-n{self.num_envs}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ActionSpace:
    kind: str  # "discrete" | "box"
    n: int = 0  # discrete: number of actions
    low: tuple[float, ...] = ()  # box bounds, one per dimension
    high: tuple[float, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return () if self.kind == "discrete" else (len(self.low),)


def action_pool(space: ActionSpace, num_envs: int, steps: int, seed: int) -> np.ndarray:
    """Uniform random actions from a fixed seed, the same distribution for every backend.

    Rotated by the stepper, so every step gets a fresh-looking action without drawing random numbers
    inside the timed region (and never one action replayed for all steps).
    """
    rng = np.random.default_rng(seed)
    if space.kind == "discrete":
        return rng.integers(0, space.n, size=(steps, num_envs), dtype=np.int32)
    low = np.asarray(space.low, dtype=np.float32)
    high = np.asarray(space.high, dtype=np.float32)
    return rng.uniform(low, high, size=(steps, num_envs, len(low))).astype(np.float32)


ACTION_DISTRIBUTION = "uniform over the action space, pre-generated from the case seed, rotated per step"

# An adapter's `open_without_resets` (the throughput suite's `step` phase) on a task whose episodes
# end only at the time limit: the limit set this high, so no env resets inside a measurement.
NO_TIME_LIMIT = 2**30
NO_RESETS = f"none: time limit removed (max_episode_steps={NO_TIME_LIMIT}) on a task without termination"


@dataclass
class StepperFacts:
    """What an adapter reports about the env it built (recorded in the result)."""

    native_env_id: str
    obs_shape: tuple[int, ...]
    action_space: ActionSpace
    reset_mode: str  # how episodes end and restart inside the timed region
    device: str = "cpu"  # where the simulation ran ("cpu", "gpu:NVIDIA H200" ...)
    details: dict[str, Any] = field(default_factory=dict)  # pipeline, num_threads, start method ...
    # Physics (sub)steps the simulator ran per env step, read from the env as built (Brax's n_frames,
    # Playground's n_substeps, MuJoCo's frame_skip x 1, Isaac Lab's decimation x substeps): physics
    # steps/s is env steps/s times this, never the catalogue's frame_skip. None: the backend cannot say.
    physics_steps: int | None = None


class Stepper(Protocol):
    facts: StepperFacts

    def load_actions(self, pool: np.ndarray) -> None: ...

    def run(self, loops: int) -> None: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...

    # Optional: `keep_caches()`, what must happen before the worker leaves without teardown (os._exit) for
    # the next process to start faster: a compile cache its simulator writes only at shutdown. Called once,
    # after the timed values, outside every timed region; the stepper is not stepped again.

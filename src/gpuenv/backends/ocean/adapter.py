"""PufferLib Ocean envs stepped by gpuenv's harness: one PufferEnv holds all the case's envs; each step
copies the harness's actions for every env into its action buffer and runs its C vec_step, which
resets a finished game inside the step. Observations, rewards and terminals stay in the PufferEnv's
shared numpy buffers (PufferLib's protocol: nothing is copied out)."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from gpuenv.backends._common import HostLoop, action_space_of
from gpuenv.backends.base import Case, StepperFacts
from gpuenv.backends.spec import NativeTask, resolve

RESET_MODE = "auto-reset inside the C step: a finished game (balls lost, or every brick hit) restarts in vec_step"


class OceanStepper(HostLoop):
    def __init__(self, case: Case, native: NativeTask) -> None:
        self.env, details = make_env(native, case.num_envs, case.seed)
        self.env.reset(seed=case.seed)
        self.steps_per_chunk = case.chunk_steps
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=tuple(int(x) for x in self.env.single_observation_space.shape),
            action_space=action_space_of(self.env.single_action_space),
            reset_mode=RESET_MODE,
            device="cpu",
            details=details,
        )

    def close(self) -> None:
        self.env.close()


def make_env(native: NativeTask, num_envs: int, seed: int) -> tuple[Any, dict[str, Any]]:
    """The PufferEnv holding num_envs envs of the task, and what a record says of it: pufferlib's version,
    the vectorization and the settings it was built with."""
    cls = resolve(native.env_id)
    kwargs = settings(cls)
    if "frameskip" in kwargs:  # the catalogue's frames per step, passed (PufferLib's default for Breakout too)
        kwargs["frameskip"] = native.frame_skip
    details = {"pufferlib": version("pufferlib"), "vectorization": "native: one PufferEnv, every env stepped by its C vec_step in this process",
               "env_kwargs": kwargs}
    return cls(num_envs=num_envs, seed=seed, **kwargs), details


def settings(cls: Callable[..., Any]) -> dict[str, Any]:
    """The env's settings: its constructor's defaults (frameskip, sizes, log interval ...), which gpuenv
    passes as PufferLib sets them (the frameskip from the catalogue) and records as they ran."""
    import inspect

    skip = {"num_envs", "seed", "buf", "render_mode"}
    return {k: p.default for k, p in inspect.signature(cls).parameters.items()
            if k not in skip and p.default is not inspect.Parameter.empty and isinstance(p.default, (int, float, bool, str))}


def open(case: Case, native: NativeTask) -> OceanStepper:  # noqa: A001 - the adapter contract
    return OceanStepper(case, native)

"""Your own env in the gymnasium backend's vectorisers: the same stepper, another way to build one env."""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym

from gpuenv.backends.base import Case
from gpuenv.backends.gymnasium.adapter import GymnasiumStepper
from gpuenv.backends.spec import NativeTask
from gpuenv.tasks import own_env


class OwnMake:
    """Builds one of the user's envs (picklable: SubprocVecEnv and AsyncVectorEnv send it to their
    children): the modules to import first, then `module:factory` called, or gymnasium.make(id)."""

    def __init__(self, spec: str, imports: tuple[str, ...] = ()) -> None:
        self.spec, self.imports = spec, imports

    def factory(self) -> Any:
        for name in self.imports:
            importlib.import_module(name)
        if ":" in self.spec:
            module, _, attr = self.spec.partition(":")
            fn = importlib.import_module(module)
            for part in attr.split("."):
                fn = getattr(fn, part)
            return fn
        return lambda: gym.make(self.spec)

    def __call__(self, _env_id: str | None = None, _max_episode_steps: int | None = None) -> gym.Env:
        return self.factory()()


def _make() -> OwnMake:
    own = own_env()
    if own is None:
        raise RuntimeError("the own backend runs only under `gpuenv profile` (GPUENV_OWN_ENV is not set)")
    return OwnMake(own["spec"], tuple(own.get("imports") or ()))


def open(case: Case, native: NativeTask) -> GymnasiumStepper:  # noqa: A001 - the adapter contract
    stepper = GymnasiumStepper(case, native, make=_make())
    stepper.facts.details["env"] = (own_env() or {}).get("identity", {})
    return stepper

"""PufferLib Ocean envs stepped by gpuenv's harness: one PufferEnv holds all the case's envs; each step
copies the harness's actions for every env into its action buffer and runs its C vec_step, which
resets a finished game inside the step. Observations, rewards and terminals stay in the PufferEnv's
shared numpy buffers (PufferLib's protocol: nothing is copied out)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

from gpuenv.backends._common import HostLoop, action_space_of
from gpuenv.backends.base import Case, StepperFacts
from gpuenv.backends.spec import NativeTask, resolve

RESET_MODE = "auto-reset inside the C step: a finished game restarts in vec_step"
# Ocean envs whose C step leaves an episode's end unflagged: CartPole's time limit (200 steps) sets neither
# its terminal nor its truncation flag; its reward is 0 exactly on the step that ends an episode, whether
# terminated or at the limit, and 1 on every other (cartpole.h's c_step)
ENDS_ON_ZERO_REWARD = frozenset({"pufferlib.ocean.cartpole.cartpole:Cartpole"})


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
            physics_steps=int(details["env_kwargs"].get("frameskip", 1)),  # game ticks (C steps) per env step, as built
        )

    def close(self) -> None:
        self.env.close()


@contextmanager
def own_random_state(seed: int) -> Iterator[None]:
    """Ocean's C envs draw from the C library's one random state (srand/rand), which creating or resetting
    an env reseeds: inside this block, such calls use a state of their own (glibc's initstate), and the
    state before the block comes back after it. So a second PufferEnv in the process (the harness's eval
    envs) changes nothing the first draws (the training envs' resets)."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.initstate.restype = libc.setstate.restype = ctypes.c_void_p
    libc.initstate.argtypes = [ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t]
    libc.setstate.argtypes = [ctypes.c_void_p]
    state = _STATES.setdefault(seed, ctypes.create_string_buffer(256))  # kept alive while libc may point at it
    before = libc.initstate(seed, state, len(state))
    try:
        yield
    finally:
        libc.setstate(before)


_STATES: dict[int, Any] = {}


def episode_ends(native: NativeTask, rewards: Any, terminals: Any, truncations: Any) -> tuple[Any, Any]:
    """(ended, truncated) per env for the step just taken: Ocean's flags, and for an env that leaves its
    time limit unflagged (ENDS_ON_ZERO_REWARD) an unterminated step rewarded 0 as a truncation."""
    import numpy as np

    terminated = np.asarray(terminals, dtype=bool)
    truncated = np.asarray(truncations, dtype=bool)
    if native.env_id in ENDS_ON_ZERO_REWARD:
        truncated = truncated | (~terminated & (np.asarray(rewards) == 0))
    return terminated | truncated, truncated


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

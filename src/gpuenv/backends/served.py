"""A backend's PPO env served from its own Python environment to the shared trainer in the main install.

A backend in its own environment (Backend.environment: Ocean's numpy<2 and gym 0.23, Genesis's pins)
has neither torch nor Stable-Baselines3 there. Its PPO env (Backend.ppo_env) is built and stepped by
a process of that environment (gpuenv.backends.serve_env) and reaches the trainer here as an SB3 VecEnv
over two pipes: one request and one reply of raw arrays per step of every env, as SB3's
SubprocVecEnv does with its workers. The env process is the worker's child, in its process group: it
goes with the worker, and ends by itself when the worker closes its pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from gpuenv.backends._common import sb3_infos
from gpuenv.backends.serve_env import receive, send
from gpuenv.backends.spec import Backend, NativeTask, resolve
from gpuenv.backends.vecenv import ContractVecEnv, NoSubEnvs
from gpuenv.errors import Unsupported, UserError

# the env process's failures that keep their kind in the record (gpuenv.run.worker.failure_kind); any other is a crash
ERRORS: dict[str, type[Exception]] = {"Unsupported": Unsupported, "UserError": UserError, "MemoryError": MemoryError}

HOW = "served: the env steps in a process of the backend's own Python environment; observations, rewards and dones reach the trainer over pipes"


def is_served(backend: Backend) -> bool:
    """Its PPO env cannot be built in this interpreter: it lives in the backend's own environment."""
    return backend.environment is not None and not backend.in_own_image()


def vecenv_factory(backend: Backend) -> Callable[..., tuple[VecEnv, dict]]:
    """(variant, native, num_envs, seed) -> (SB3 VecEnv, details): the backend's own factory where its
    simulator is importable here, else the same factory served from its environment."""
    assert backend.ppo_env is not None
    factory = backend.ppo_env.factory
    if not is_served(backend):
        own = resolve(factory)

        def unserved(variant: str, native: NativeTask, num_envs: int, seed: int) -> tuple[VecEnv, dict]:
            venv, details = own(variant, native, num_envs, seed)
            return (venv if isinstance(venv, VecEnv) else ContractVecEnv(venv)), details

        return unserved

    def make(variant: str, native: NativeTask, num_envs: int, seed: int) -> tuple[VecEnv, dict]:
        venv = ServedVecEnv(interpreter(backend), factory, variant, native, num_envs, seed)
        return venv, {**venv.details, "env_process": HOW}

    return make


def interpreter(backend: Backend) -> str:
    """The Python of the backend's environment (built by the runner before this worker started: reused)."""
    from gpuenv import envs

    e = backend.environment
    assert e is not None
    lock = e.lock_path(envs.ROOT)
    if not lock.is_file():
        raise UserError(f"backend {backend.name}: its environment lock {lock} does not exist")
    return str(envs.build(lock.read_text(), e.python, f"for backend {backend.name}", e.build_step).interpreter)


def space_of(desc: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str) -> spaces.Space:
    if desc["kind"] == "discrete":
        return spaces.Discrete(int(desc["n"]))
    low, high = arrays[f"{prefix}_low"], arrays[f"{prefix}_high"]
    return spaces.Box(low=low, high=high, shape=low.shape, dtype=np.dtype(desc["dtype"]))


class ServedVecEnv(NoSubEnvs, VecEnv):
    """SB3's VecEnv over an env process of another interpreter (gpuenv.backends.serve_env)."""

    def __init__(self, python: str, factory: str, variant: str, native: NativeTask, num_envs: int, seed: int) -> None:
        to_env_r, to_env_w = os.pipe()
        from_env_r, from_env_w = os.pipe()
        self._python = python
        try:
            self._proc = subprocess.Popen([python, "-m", "gpuenv.backends.serve_env", str(to_env_r), str(from_env_w)],
                                          pass_fds=(to_env_r, from_env_w), stdin=subprocess.DEVNULL)
        except OSError:
            for fd in (to_env_r, to_env_w, from_env_r, from_env_w):
                os.close(fd)
            raise
        os.close(to_env_r)
        os.close(from_env_w)
        self._out = os.fdopen(to_env_w, "wb", buffering=1 << 16)
        self._in = os.fdopen(from_env_r, "rb", buffering=1 << 16)
        self._actions: np.ndarray | None = None
        self._closed = False
        try:
            hello, bounds = self._ask({"open": factory, "native": native.to_dict(), "variant": variant, "num_envs": num_envs, "seed": seed})
        except BaseException:
            self.close()
            raise
        self.details: dict[str, Any] = hello["details"]
        super().__init__(int(hello["num_envs"]), space_of(hello["observation_space"], bounds, "obs"),
                         space_of(hello["action_space"], bounds, "act"))

    def _ask(self, header: dict[str, Any], **arrays: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        try:
            send(self._out, header, **arrays)
            reply, out = receive(self._in)
        except (EOFError, BrokenPipeError):
            code = self._end()
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
            raise RuntimeError(f"the served env process ({self._python}) {how}; its stderr is above") from None
        if "error" in reply:
            self._end()
            raise ERRORS.get(reply.get("kind", ""), RuntimeError)(f"the served env process failed: {reply['error']}")
        return reply, out

    def _end(self, timeout: float = 30.0) -> int:
        """The env process's exit code, killing it when it does not leave within timeout (a simulator stuck
        in its shutdown)."""
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            return self._proc.wait()

    def reset(self) -> np.ndarray:
        _, arrays = self._ask({"reset": True})
        self._reset_seeds()
        self._reset_options()
        return arrays["obs"].copy()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self):
        assert self._actions is not None
        _, a = self._ask({"step": True}, actions=self._actions)
        dones = a["dones"].astype(bool)
        infos = sb3_infos(self.num_envs, dones, a["truncated"], ((i, a["final_obs"][row].copy()) for row, i in enumerate(a["final_idx"])))
        return a["obs"].copy(), a["rewards"].copy(), dones, infos

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            send(self._out, {"close": True})
        except OSError:
            pass
        try:
            self._out.close()
        except OSError:
            pass
        self._end()  # its simulator's own shutdown runs (Genesis writes its kernel cache there)
        self._in.close()

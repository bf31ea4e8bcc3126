"""Test-only backend: behaves, or fails on purpose, so the isolation machinery can be tested for real.

Variants: see the declaration in __init__.py.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from gpuenv.backends.base import ActionSpace, Case, StepperFacts
from gpuenv.backends.spec import NativeTask


def _typer() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("typer")
    except PackageNotFoundError:
        return None


class FakeStepper:
    def __init__(self, case: Case, native: NativeTask) -> None:
        self.case = case
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=native.obs_shape,
            action_space=ActionSpace("discrete", n=native.action_size),
            reset_mode="none (fake)",
            details={"variant": case.variant, "typer": _typer()},  # which environment ran it (sweep tests)
        )
        self.steps = 0
        if case.variant == "alloc":  # memory that grows with num_envs, as a simulator's state does
            self.state = np.ones(case.num_envs * 8 * 2**20)  # 64 MiB per env, every page touched

    def load_actions(self, pool: np.ndarray) -> None:
        self.pool = pool

    def run(self, loops: int) -> None:
        v = self.case.variant
        if v == "raise":
            raise RuntimeError("fake backend failed on purpose")
        if v == "segfault":
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        if v == "hang":
            import subprocess
            import threading

            # Like SubprocVecEnv, leave a child process: the orchestrator must kill it too.
            child = subprocess.Popen(["sleep", "3600"])
            pidfile = os.environ.get("GPUENV_FAKE_CHILD_PIDFILE")
            if pidfile:
                # (this module's `open` is the adapter contract, so no builtin open here)
                Path(pidfile + ".tmp").write_text(f"{os.getpid()} {child.pid}")
                os.replace(pidfile + ".tmp", pidfile)
            threading.Event().wait(3600)  # the orchestrator's timeout must kill this
        if v == "exit":
            os._exit(7)
        if v == "sigkill":  # what the OOM killer or `kill -9` does: no handler runs
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        if v == "unsupported":
            from gpuenv.errors import Unsupported

            raise Unsupported("fake release has no such env; gpuenv does not substitute another")
        if v == "oom":
            raise MemoryError("fake allocation failed")
        # Some real work so values are non-zero on a real clock.
        acc = 0
        for _ in range(loops * self.case.chunk_steps * 50):
            acc += 1
        self.steps += loops * self.case.chunk_steps

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass


def open(case: Case, native: NativeTask) -> FakeStepper:  # noqa: A001 - the adapter contract
    return FakeStepper(case, native)


def open_without_resets(case: Case, native: NativeTask) -> FakeStepper:
    if case.variant == "phasehang":
        import threading

        threading.Event().wait(3600)  # the runner's timeout must end this worker, and keep its result
    s = FakeStepper(case, native)
    s.facts.reset_mode = "none: fake, no time limit"
    return s

"""Godot adapter: gpuenv starts the Godot processes itself, godot-rl's client talks to them.

godot-rl's GodotEnv would launch Godot in a new session (`start_new_session=True`), out of reach of
the worker's process group; so gpuenv launches it (same flags as godot-rl, plus `--path` to the
project and `--n_agents`), as a child in the worker's group, and hands GodotEnv only the port:
GodotEnv listens, Godot connects. A timeout, Ctrl-C or a killed gpuenv kills the group, Godot with
it (gpuenv.run.worker.guard), and close() kills them at once.
"""

from __future__ import annotations

import atexit
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuenv.backends.base import ActionSpace, Case, StepperFacts
from gpuenv.backends.godot import AGENTS_PER_PROCESS, DEFAULT_ACTION_REPEAT, DEFAULT_SPEEDUP
from gpuenv.backends.spec import NativeTask
from gpuenv.errors import Unsupported, UserError

PROJECT = Path(__file__).resolve().parent / "project"
PROGRAM = "godot3-server"
INSTALL = "apt-get install godot3-server"
RESET_MODE = ("Godot resets a finished agent itself inside the step; the observation sent with done is the next "
              "episode's first, the final one comes in info (gpuenv's sync node; godot-rl's own plugin sends none)")


@dataclass(frozen=True)
class Flags:
    """What a variant means on Godot's command line."""

    pacing: str  # "realtime" (the engine paces physics) or "uncapped" (--fixed-fps: frames back to back)
    speedup: int
    action_repeat: int

    @property
    def fixed_fps(self) -> int | None:
        return 60 if self.pacing == "uncapped" else None

    def argv(self) -> list[str]:
        out = [f"--action_repeat={self.action_repeat}", f"--speedup={self.speedup}"]
        return out + (["--fixed-fps", str(self.fixed_fps)] if self.fixed_fps else [])


def flags(variant: str) -> Flags:
    m = re.fullmatch(r"(realtime|uncapped)(?:-x(\d+))?(?:-ar(\d+))?", variant)
    if not m:
        raise UserError(f"godot variant {variant!r}: write realtime or uncapped, optionally -xSPEEDUP and -arACTION_REPEAT")
    pacing = m.group(1)
    speedup = int(m.group(2) or (DEFAULT_SPEEDUP if pacing == "realtime" else 1))
    return Flags(pacing, speedup, int(m.group(3) or DEFAULT_ACTION_REPEAT))


def layout(num_envs: int) -> tuple[int, int]:
    """(agents per Godot process, processes) for num_envs agents."""
    if num_envs <= AGENTS_PER_PROCESS:
        return num_envs, 1
    if num_envs % AGENTS_PER_PROCESS:
        raise Unsupported(f"godot runs up to {AGENTS_PER_PROCESS} agents per process: num_envs must be <= {AGENTS_PER_PROCESS} "
                          f"or a multiple of it (got {num_envs})")
    return AGENTS_PER_PROCESS, num_envs // AGENTS_PER_PROCESS


@dataclass(frozen=True)
class Launch:
    """Which Godot runs which project: Godot 3.2's server and the 3.2 project here; the godot4
    backend passes its own (a Godot 4 program, a private copy of its project, its physics engine)."""

    program: str = PROGRAM
    project: Path = PROJECT
    args: tuple[str, ...] = ()  # more flags for every process (the game's own, e.g. --dims=2)
    install: str = INSTALL  # how to get the program when it is not on PATH


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GodotPool:
    """num_envs agents in one or more Godot processes, stepped together: every process gets its actions
    before any reply is read, so the processes run in parallel."""

    def __init__(self, variant: str, num_envs: int, seed: int, launch: Launch | None = None) -> None:
        from godot_rl.core.godot_env import GodotEnv

        self.launch = launch or Launch()
        self.flags = flags(variant)
        self.per, self.n_procs = layout(num_envs)
        self.num_envs = num_envs
        program = shutil.which(self.launch.program)
        if program is None:
            raise UserError(f"{self.launch.program} is not on PATH: {self.launch.install}")
        self.procs: list[subprocess.Popen] = []
        self.envs: list[Any] = []
        try:
            for i in range(self.n_procs):
                port = _free_port()
                cmd = [program, "--path", str(self.launch.project), f"--port={port}", f"--env_seed={seed + i * self.per}",
                       "--disable-render-loop", "--headless", f"--n_agents={self.per}", *self.flags.argv(), *self.launch.args]
                # stdout to stderr: the worker's stdout is not for Godot's banner
                self.procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr))
                env = GodotEnv(env_path=None, port=port)  # listens on the port; the Godot process connects
                atexit.unregister(env._close)  # close() below; godot-rl's would sleep a second
                self.envs.append(env)
        except BaseException:
            self.close()
            raise
        stats = self.envs[0].call("stats")
        self.version = str(stats[2])
        # the Godot 4 project says which physics engine runs and its solver settings; the 3.2 one has one engine
        self.physics_engine = str(stats[3]) if len(stats) > 3 else None
        self.solver = dict(stats[4]) if len(stats) > 4 else {}

    def reset(self) -> np.ndarray:
        obs = []
        for env in self.envs:
            o, _ = env.reset()
            obs += [a["obs"] for a in o]
        return np.asarray(obs, dtype=np.float32)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        """actions (num_envs, 2) -> obs (num_envs, 6), rewards (num_envs,), dones (num_envs,), infos."""
        for k, env in enumerate(self.envs):
            env.step_send([actions[k * self.per:(k + 1) * self.per]])
        obs, rew, done, info = [], [], [], []
        for env in self.envs:
            o, r, d, _, i = env.step_recv()
            obs += [a["obs"] for a in o]
            rew += r
            done += d
            info += i
        return np.asarray(obs, dtype=np.float32), np.asarray(rew, dtype=np.float32), np.asarray(done, dtype=bool), info

    def engine_stats(self) -> list[tuple[int, int]]:
        """(physics ticks, microseconds since connecting) per process: the engine's own accounting."""
        return [(int(s[0]), int(s[1])) for s in (env.call("stats") for env in self.envs)]

    def details(self) -> dict[str, Any]:
        f = self.flags
        return {
            "engine": f"Godot {self.version} ({self.launch.program}, headless)",
            "protocol": "godot-rl 0.8 wire protocol (client: godot_rl.core.godot_env.GodotEnv)",
            "pacing": f.pacing,
            "speedup": f.speedup,
            "action_repeat": f.action_repeat,
            "fixed_fps": f.fixed_fps,
            "agents_per_process": self.per,
            "processes": self.n_procs,
            "physics_engine": self.physics_engine or "Godot 3 2D physics (its only one)",
            **({"solver": self.solver} if self.solver else {}),
        }

    def close(self) -> None:
        for env in self.envs:
            try:
                env.connection.close()
            except OSError:
                pass
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.envs, self.procs = [], []


class GodotStepper:
    def __init__(self, case: Case, native: NativeTask, pool: GodotPool | None = None) -> None:
        self.case = case
        self.pool = pool or GodotPool(case.variant, case.num_envs, case.seed)
        self.pool.reset()
        self._facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=native.obs_shape,
            action_space=ActionSpace("box", low=(-1.0, -1.0), high=(1.0, 1.0)),
            reset_mode=RESET_MODE,
            details=self.pool.details(),
        )
        self._since: list[tuple[int, int]] | None = None
        self.i = 0

    @property
    def facts(self) -> StepperFacts:
        """The facts; read after the measurement they also carry the physics ticks/s each Godot
        process reports for the time since the actions were loaded (warm-ups, calibration, values)."""
        if self._since is not None and self.pool.envs:
            now = self.pool.engine_stats()
            rates = [(t1 - t0) / ((u1 - u0) / 1e6) for (t0, u0), (t1, u1) in zip(self._since, now) if u1 > u0]
            if rates:
                self._facts.details["physics_ticks_per_s_per_process"] = round(float(np.mean(rates)), 1)
        return self._facts

    def load_actions(self, pool: np.ndarray) -> None:
        self.actions = pool
        self._since = self.pool.engine_stats()

    def run(self, loops: int) -> None:
        n = len(self.actions)
        for _ in range(loops * self.case.chunk_steps):
            self.pool.step(self.actions[self.i % n])
            self.i += 1

    def sync(self) -> None:
        pass  # every step waits for Godot's reply

    def close(self) -> None:
        self.pool.close()


def open(case: Case, native: NativeTask) -> GodotStepper:  # noqa: A001 - the adapter contract
    return GodotStepper(case, native)

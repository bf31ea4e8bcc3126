"""Godot adapter: gpuenv starts the Godot processes itself, godot-rl's client talks to them.

godot-rl's GodotEnv would launch Godot in a new session (`start_new_session=True`), out of reach of
the worker's process group; so gpuenv launches it (same flags as godot-rl, plus `--path` to the
project and `--n_agents`), as a child in the worker's group. gpuenv listens first (a port of its
own, no race), watches the process while it waits for its connection (a game that exits or never
connects is one line, not godot-rl's 60 s timeout and a traceback) and hands GodotEnv the accepted
socket. A timeout, Ctrl-C or a killed gpuenv kills the group, Godot with it
(gpuenv.run.worker.guard), and close() kills them at once. The pool serves gpuenv's projects (Godot
3.2 here, Godot 4 in gpuenv.backends.godot4) and a user's godot-rl game (`gpuenv profile`).
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
from gpuenv.backends.spec import NativeTask, worker_scratch
from gpuenv.errors import Unsupported, UserError

PROJECT = Path(__file__).resolve().parent / "project"
PROGRAM = "godot3-server"
INSTALL = "apt-get install godot3-server"
CACHES = (".godot", ".import", ".git")  # a project's caches and history: never copied, never what the game is
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


def layout(num_envs: int, fixed: int | None = None) -> tuple[int, int]:
    """(agents per Godot process, processes) for num_envs agents: gpuenv's projects take up to
    AGENTS_PER_PROCESS agents a process (--n_agents); a game has as many as its scene (`fixed`)."""
    if fixed is not None:
        if num_envs % fixed:
            raise Unsupported(f"this game has {fixed} agents per Godot process: num_envs must be a multiple of {fixed} (got {num_envs})")
        return fixed, num_envs // fixed
    if num_envs <= AGENTS_PER_PROCESS:
        return num_envs, 1
    if num_envs % AGENTS_PER_PROCESS:
        raise Unsupported(f"godot runs up to {AGENTS_PER_PROCESS} agents per process: num_envs must be <= {AGENTS_PER_PROCESS} "
                          f"or a multiple of it (got {num_envs})")
    return AGENTS_PER_PROCESS, num_envs // AGENTS_PER_PROCESS


@dataclass(frozen=True)
class Launch:
    """Which Godot runs which game: Godot 3.2's server and the 3.2 project here; the godot4 backend
    passes its own (a Godot 4 program, a private copy of its project, its physics engine), and
    `gpuenv profile` a user's game (a project folder and the Godot that runs it, or an exported binary)."""

    program: str = PROGRAM  # on PATH, or a path (an exported game is its own program)
    project: Path | None = PROJECT  # run with --path; None: the program is an exported game
    args: tuple[str, ...] = ()  # more flags for every process (the game's own, e.g. --dims=2)
    install: str = INSTALL  # how to get the program when it is not there
    agents: int | None = None  # agents per process the game has; None: gpuenv's project, --n_agents sets it
    stats: bool = True  # the game answers gpuenv's `stats` call (gpuenv's sync nodes; a godot-rl plugin game does not)
    connect_timeout_s: float = 60.0  # godot-rl's own accept timeout
    what: str = "Godot"  # how messages name the game
    # Run a private copy of the project (Godot 4 writes its .godot/ cache into the project folder, which
    # may be read-only or shared by several processes), with these override.cfg lines. None: run the
    # project where it is.
    copy: str | None = None

    def program_path(self) -> str:
        program = shutil.which(self.program)
        if program is None:
            raise UserError(f"{self.program} is not on PATH: {self.install}")
        return program


def private_copy(launch: Launch) -> tuple[Launch, Path | None]:
    """(the launch on a private copy of its project, the folder to remove after), or (launch, None)
    where it runs the project in place. The copy goes to the runner's scratch folder for the case, else the
    system's temporary folder."""
    import dataclasses
    import tempfile

    if launch.copy is None or launch.project is None:
        return launch, None
    # in the case's scratch folder under a runner (a killed worker's copy goes with the case), else the system's
    folder = Path(tempfile.mkdtemp(prefix="gpuenv-godot-", dir=worker_scratch()))
    try:
        project = folder / "project"
        shutil.copytree(launch.project, project, ignore=shutil.ignore_patterns(*CACHES))
        if launch.copy:
            (project / "override.cfg").write_text(launch.copy)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return dataclasses.replace(launch, project=project), folder


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill a Godot process and whatever it started (a game's launcher script that does not exec
    leaves the game as its child), then reap it."""
    import psutil

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        children = []
    for c in children:
        try:
            c.kill()
        except psutil.Error:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def start(launch: Launch, args: list[str]) -> tuple[subprocess.Popen, Any]:
    """One Godot process of the launch with these flags, connected: (the process, godot-rl's client
    on its connection). gpuenv listens first (the port is its own before Godot is told it); on any
    failure the process and what it started are killed and the socket closed."""
    cmd = [launch.program_path(), *(["--path", str(launch.project)] if launch.project is not None else [])]
    proc = None
    try:
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            port = server.getsockname()[1]
            # stdout to stderr: the worker's stdout is not for Godot's banner
            proc = subprocess.Popen([*cmd, f"--port={port}", *args], stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr)
            return proc, client(connect(server, proc, launch), launch)
    except BaseException:
        if proc is not None:
            kill_tree(proc)
        raise


def connect(server: socket.socket, proc: subprocess.Popen, launch: Launch) -> socket.socket:
    """The game's connection to gpuenv's listening socket, watching the process meanwhile: one line
    (UserError) if it exits first or does not connect in time (the caller kills it)."""
    wait = 0.1
    server.settimeout(wait)  # the wait is counted in these accept timeouts: the harness owns the clock
    port = server.getsockname()[1]
    for _ in range(max(1, round(launch.connect_timeout_s / wait))):
        try:
            conn, _ = server.accept()
            conn.settimeout(None)
            return conn
        except TimeoutError:
            pass
        if proc.poll() is not None:
            raise UserError(f"{launch.what} exited (code {proc.returncode}) without connecting to gpuenv on 127.0.0.1:{port}: "
                            "is it a godot-rl game (a Sync node in training mode), and does it run headless here?")
    raise UserError(f"{launch.what} did not connect to gpuenv on 127.0.0.1:{port} within {launch.connect_timeout_s:g} s: "
                    "a godot-rl game connects when its Sync node runs in training mode (it reads --port)")


def client(conn: socket.socket, launch: Launch) -> Any:
    """godot-rl's GodotEnv on a connection gpuenv accepted (godot-rl's own would listen and wait itself).
    Its prints (spaces, banners) go to stderr: a worker's stdout is not for them. A connection the game
    closes is a ConnectionError (godot-rl's own reader would spin on it forever); the connection is
    closed if the client cannot be made."""
    import contextlib

    from godot_rl.core.godot_env import GodotEnv

    class Accepted(GodotEnv):
        def _start_server(self) -> socket.socket:
            return conn

        def _get_data(self) -> str:
            return read_message(self.connection, launch.what)

    try:
        with contextlib.redirect_stdout(sys.stderr):
            env = Accepted(env_path=None, port=conn.getsockname()[1])
    except BaseException:
        conn.close()
        raise
    atexit.unregister(env._close)  # close() below; godot-rl's would sleep a second
    return env


def read_message(conn: socket.socket, what: str) -> str:
    """One message of godot-rl's protocol: a 4-byte little-endian length, then that many bytes of text."""

    def exactly(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"{what} closed its connection to gpuenv mid-message")
            buf.extend(chunk)
        return bytes(buf)

    return exactly(int.from_bytes(exactly(4), "little")).decode()


def action_space_of(keys: list[tuple[str, Any]], what: str) -> ActionSpace:
    """What the harness's random actions are for an agent with these godot-rl action keys: one
    Discrete action, or every Box action concatenated; one line (UserError) for anything else."""
    from gymnasium import spaces

    if len(keys) == 1 and isinstance(keys[0][1], spaces.Discrete):
        return ActionSpace("discrete", n=int(keys[0][1].n))
    if keys and all(isinstance(sp, spaces.Box) for _, sp in keys):
        size = sum(int(np.prod(sp.shape)) for _, sp in keys)
        return ActionSpace("box", low=(-1.0,) * size, high=(1.0,) * size)
    raise UserError(f"{what}'s agents act through {', '.join(f'{k} ({sp})' for k, sp in keys) or 'nothing'}: gpuenv drives "
                    "games with one discrete action or continuous ones only")


def per_key(keys: list[tuple[str, Any]], actions: np.ndarray) -> list[Any]:
    """An (agents, size) block of actions as godot-rl's per-key list (its step_send, order_ij False)."""
    if len(keys) == 1:
        return [actions]
    out, at = [], 0
    for _, sp in keys:
        n = int(np.prod(sp.shape))
        out.append(actions[:, at:at + n])
        at += n
    return out


class GodotPool:
    """num_envs agents in one or more Godot processes, stepped together: every process gets its actions
    before any reply is read, so the processes run in parallel."""

    def __init__(self, variant: str, num_envs: int, seed: int, launch: Launch | None = None) -> None:
        self.flags = flags(variant)
        self.per, self.n_procs = layout(num_envs, (launch or Launch()).agents)
        self.num_envs = num_envs
        self.procs: list[subprocess.Popen] = []
        self.envs: list[Any] = []
        self.launch, self.copy = private_copy(launch or Launch())
        try:
            agents = [] if self.launch.agents is not None else [f"--n_agents={self.per}"]
            for i in range(self.n_procs):
                proc, env = start(self.launch, [f"--env_seed={seed + i * self.per}", "--disable-render-loop", "--headless",
                                                *agents, *self.flags.argv(), *self.launch.args])
                self.procs.append(proc)
                self.envs.append(env)
                if env.num_envs != self.per:
                    raise UserError(f"{self.launch.what} has {env.num_envs} agents in a process, not {self.per}")
        except BaseException:
            self.close()
            raise
        self.keys = list(self.envs[0].action_spaces[0].spaces.items())  # (name, space) of each agent's action
        self.version, self.physics_engine, self.solver = None, None, {}
        if self.launch.stats:
            stats = self.envs[0].call("stats")
            self.version = str(stats[2])
            # the Godot 4 project says which physics engine runs and its solver settings; the 3.2 one has one engine
            self.physics_engine = str(stats[3]) if len(stats) > 3 else None
            self.solver = dict(stats[4]) if len(stats) > 4 else {}

    def action_space(self) -> ActionSpace:
        return action_space_of(self.keys, self.launch.what)

    @staticmethod
    def _obs(o: list[dict]) -> np.ndarray:
        """Each agent's vector observation (godot-rl's `obs` key), (agents, 0) where the game has none."""
        if o and "obs" in o[0]:
            return np.asarray([np.ravel(a["obs"]) for a in o], dtype=np.float32)
        return np.zeros((len(o), 0), dtype=np.float32)

    def reset(self) -> np.ndarray:
        return np.concatenate([self._obs(env.reset()[0]) for env in self.envs])

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        """actions (num_envs, size) or (num_envs,) -> obs (num_envs, obs size), rewards, dones (num_envs,), infos."""
        for k, env in enumerate(self.envs):
            env.step_send(per_key(self.keys, actions[k * self.per:(k + 1) * self.per]))
        obs, rew, done, info = [], [], [], []
        for env in self.envs:
            o, r, d, _, i = env.step_recv()
            obs.append(self._obs(o))
            rew += r
            done += d
            info += i
        return np.concatenate(obs), np.asarray(rew, dtype=np.float32), np.asarray(done, dtype=bool), info

    def engine_stats(self) -> list[tuple[int, int]]:
        """(physics ticks, microseconds since connecting) per process: the engine's own accounting."""
        return [(int(s[0]), int(s[1])) for s in (env.call("stats") for env in self.envs)]

    def details(self) -> dict[str, Any]:
        f = self.flags
        return {
            "engine": f"Godot {self.version} ({self.launch.program}, headless)" if self.version else f"{self.launch.program} (headless)",
            "protocol": "godot-rl 0.8 wire protocol (client: godot_rl.core.godot_env.GodotEnv)",
            "pacing": f.pacing,
            "speedup": f.speedup,
            "action_repeat": f.action_repeat,
            "fixed_fps": f.fixed_fps,
            "agents_per_process": self.per,
            "processes": self.n_procs,
            "physics_engine": self.physics_engine or ("Godot 3 2D physics (its only one)" if self.launch.stats else "the game's (not reported)"),
            **({"solver": self.solver} if self.solver else {}),
        }

    def close(self) -> None:
        for env in self.envs:
            try:
                env.connection.close()
            except OSError:
                pass
        for p in self.procs:
            kill_tree(p)
        self.envs, self.procs = [], []
        if self.copy is not None:
            shutil.rmtree(self.copy, ignore_errors=True)
            self.copy = None


class GodotStepper:
    def __init__(self, case: Case, native: NativeTask, pool: GodotPool | None = None) -> None:
        self.case = case
        self.pool = pool or GodotPool(case.variant, case.num_envs, case.seed)
        try:
            self.pool.reset()
            self._facts = StepperFacts(
                native_env_id=native.env_id,
                obs_shape=native.obs_shape,
                action_space=self.pool.action_space(),
                reset_mode=RESET_MODE,
                details=self.pool.details(),
                physics_steps=self.pool.flags.action_repeat,  # godot-rl repeats each action for this many physics ticks
            )
        except BaseException:
            self.pool.close()
            raise
        self._since: list[tuple[int, int]] | None = None
        self.i = 0

    @property
    def facts(self) -> StepperFacts:
        """The facts; read after the measurement they also carry the physics ticks/s each Godot
        process reports for the time since the actions were loaded (warm-ups, calibration, values)."""
        if self._since is not None and self.pool.envs and self.pool.launch.stats:
            now = self.pool.engine_stats()
            rates = [(t1 - t0) / ((u1 - u0) / 1e6) for (t0, u0), (t1, u1) in zip(self._since, now) if u1 > u0]
            if rates:
                self._facts.details["physics_ticks_per_s_per_process"] = round(float(np.mean(rates)), 1)
        return self._facts

    def load_actions(self, pool: np.ndarray) -> None:
        self.actions = pool
        self._since = self.pool.engine_stats() if self.pool.launch.stats else None

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

"""Your own godot-rl game, as `gpuenv profile PATH` measures it: a Godot project folder (run by the
Godot its project.godot is written for: `godot4` for Godot 4, `godot3-server` for Godot 3) or an
exported game binary, through the godot backend's pool (gpuenv launches it, godot-rl's client talks
to it over its socket protocol). Agents per process are the game's (its AIControllers in training
mode); num_envs = agents per process x processes; the pacing variants are the godot backend's
(uncapped: frames back to back; realtime-xS: godot-rl's --speedup S).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from gpuenv.backends.base import Case
from gpuenv.backends.godot.adapter import GodotPool, GodotStepper, Launch, client, connect
from gpuenv.backends.spec import NativeTask
from gpuenv.tasks import own_env

KIND = "godot"  # the own env's kind for a game (GPUENV_OWN_ENV's "kind"; a Gymnasium env has none)
PROGRAMS = {5: ("godot4", "Godot 4"), 4: ("godot3-server", "Godot 3")}  # project.godot's config_version -> program
INSTALLS = {"godot4": "make install as root (Debian sid's Godot 4.6), or put a Godot 4 binary on PATH as godot4",
            "godot3-server": "apt-get install godot3-server"}
SKIP = {".godot", ".import", ".git"}  # caches and history: not what the game is


def is_game(spec: str) -> bool:
    """ENV names a game rather than a Gymnasium env: a path that exists, or one written as a path."""
    return Path(spec).exists() or spec.startswith(("/", "./", "../", "~"))


def describe(path: Path) -> dict:
    """Where the game is and what runs it (no process started): {"kind", "path", "program", "project",
    "engine", "name", "sha256"}, or ValueError saying what is wrong with PATH."""
    path = path.expanduser().resolve()
    if path.is_dir():
        cfg = path / "project.godot"
        if not cfg.is_file():
            raise ValueError(f"{path} is a folder without project.godot: give a Godot project folder or an exported game binary")
        text = cfg.read_text(errors="replace")
        m = re.search(r"^config_version\s*=\s*(\d+)", text, re.M)
        version = int(m.group(1)) if m else 0
        if version not in PROGRAMS:
            raise ValueError(f"{cfg}: config_version {version or '?'} is neither Godot 4's (5) nor Godot 3's (4)")
        program, engine = PROGRAMS[version]
        name = re.search(r'^config/name\s*=\s*"([^"]*)"', text, re.M)
        files = sorted(p for p in path.rglob("*") if p.is_file() and not SKIP & set(p.relative_to(path).parts))
        digest = hashlib.sha256()
        for f in files:
            digest.update(str(f.relative_to(path)).encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
        return {"kind": "project", "path": str(path), "program": program, "project": str(path), "engine": engine,
                "name": name.group(1) if name else path.name, "sha256": digest.hexdigest(), "files": len(files)}
    if path.is_file():
        if not path.stat().st_mode & 0o111:
            raise ValueError(f"{path} is not executable: give an exported game binary (chmod +x) or a Godot project folder")
        return {"kind": "binary", "path": str(path), "program": str(path), "project": None, "engine": "the binary's own",
                "name": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    raise ValueError(f"{path} does not exist: give a Godot project folder or an exported game binary")


def launch_of(own: dict, connect_timeout_s: float = 60.0) -> Launch:
    game = own["game"]
    return Launch(program=game["program"], project=Path(game["project"]) if game["project"] else None,
                  install=INSTALLS.get(game["program"], "give the path of an exported game binary"),
                  agents=own.get("agents_per_process"), stats=False, connect_timeout_s=connect_timeout_s,
                  what=f"the game {game['path']}")


def engine_version(game: dict) -> str | None:
    """`PROGRAM --version` (an exported game answers it too, without loading the game)."""
    program = shutil.which(game["program"])
    if program is None:
        return None
    try:
        r = subprocess.run([program, "--headless", "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln for ln in r.stdout.splitlines() if re.match(r"\d+\.\d+", ln)]
    return lines[-1].strip() if r.returncode == 0 and lines else None


LONGEST = 2000  # agent steps the check runs at most to find an episode's length


def check(spec: str, connect_timeout_s: float) -> dict:
    """Start the game once, headless: it connects, says its spaces, resets and steps under random
    actions until an episode ends (or LONGEST steps). The answer `gpuenv profile` records, or
    {"ok": False, "error": one line}. The game process never outlives this."""
    from gymnasium import spaces

    from gpuenv.errors import UserError

    try:
        game = describe(Path(spec))
    except ValueError as e:
        return {"ok": False, "error": str(e)}
    launch = launch_of({"game": game}, connect_timeout_s)
    proc = None
    env = None
    try:
        base = launch.command()
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            port = server.getsockname()[1]
            proc = subprocess.Popen([*base, f"--port={port}", "--env_seed=0", "--disable-render-loop", "--headless",
                                     "--action_repeat=8", "--speedup=1", "--fixed-fps", "60"],
                                    stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr)
            env = client(connect(server, proc, launch))
        agents = int(env.num_envs)
        keys = list(env.action_spaces[0].spaces.items())
        obs_space = env.observation_spaces[0].spaces
        if "obs" not in obs_space or not isinstance(obs_space["obs"], spaces.Box):
            return {"ok": False, "error": f"the game {game['path']} has no vector observation `obs` ({', '.join(obs_space) or 'none'}): "
                                          "gpuenv profiles games whose agents observe a vector (godot-rl's `obs` key)"}
        if len(keys) == 1 and isinstance(keys[0][1], spaces.Discrete):
            kind, size = "discrete", int(keys[0][1].n)
        elif all(isinstance(sp, spaces.Box) for _, sp in keys):
            kind, size = "box", sum(int(np.prod(sp.shape)) for _, sp in keys)
        else:
            return {"ok": False, "error": f"the game {game['path']} acts through {', '.join(f'{k} {sp}' for k, sp in keys)}: gpuenv "
                                          "drives games with one discrete action or continuous ones only"}
        rng = np.random.default_rng(0)
        obs, _ = env.reset()
        longest = steps = 0
        ended = False
        t0 = time.perf_counter()
        while steps < LONGEST and not ended:
            if kind == "discrete":
                act: list[Any] = [rng.integers(0, size, agents)]
            else:
                flat = rng.uniform(-1, 1, (agents, size)).astype(np.float32)
                act, at = [], 0
                for _, sp in keys:
                    n = int(np.prod(sp.shape))
                    act.append(flat[:, at:at + n])
                    at += n
            env.step_send(act)
            _o, _r, done, _t, _i = env.step_recv()
            steps += 1
            if any(done):
                ended, longest = True, steps
        seconds = time.perf_counter() - t0
    except UserError as e:
        return {"ok": False, "error": str(e)}
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
        return {"ok": False, "error": f"the game {game['path']} broke godot-rl's protocol ({type(e).__name__}: {str(e)[:200]})"}
    finally:
        if env is not None:
            try:
                env.connection.close()
            except OSError:
                pass
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait()
    game["engine_version"] = engine_version(game)
    note = (f"the first episode's end under random actions ({longest} agent steps)" if ended else
            f"no episode ended within {LONGEST} agent steps under random actions")
    return {"ok": True, "kind": KIND, "game": game, "agents_per_process": agents, "obs_shape": [int(np.prod(obs_space["obs"].shape))],
            "action_kind": kind, "action_size": size, "episode_steps": longest or LONGEST, "episode_note": note,
            "check_steps_per_s": round(steps * agents / seconds, 1) if seconds > 0 else None,
            "identity": {k: game[k] for k in ("kind", "path", "name", "engine", "engine_version", "sha256") if game.get(k)},
            "spaces": {"observation": f"obs Box({obs_space['obs'].shape}) per agent, {agents} agents a process",
                       "action": ", ".join(f"{k} {sp}" for k, sp in keys)}}


def _own() -> dict:
    own = own_env()
    if own is None or own.get("kind") != KIND:
        raise RuntimeError("the own backend runs a game only under `gpuenv profile PATH` (GPUENV_OWN_ENV names none)")
    return own


def open(case: Case, native: NativeTask) -> GodotStepper:  # noqa: A001 - the adapter contract
    own = _own()
    stepper = GodotStepper(case, native, GodotPool(case.variant, case.num_envs, case.seed, launch_of(own)))
    stepper.facts.details["env"] = own.get("identity", {})
    return stepper


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details): the godot backend's GodotVecEnv on the game's pool."""
    from gpuenv.backends.godot.ppo import vecenv_of

    return vecenv_of(GodotPool(variant, num_envs, seed, launch_of(_own())), native)

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
import subprocess
from pathlib import Path

import numpy as np

from gpuenv.backends.base import Case
from gpuenv.backends.godot.adapter import CACHES, GodotPool, GodotStepper, Launch, action_space_of, flags, kill_tree, per_key, start
from gpuenv.backends.own import GAME_KIND, installs
from gpuenv.backends.spec import NativeTask
from gpuenv.tasks import own_env

PROGRAMS = {5: ("godot4", "Godot 4"), 4: ("godot3-server", "Godot 3")}  # project.godot's config_version -> program
PREPARED = ".gpuenv-prepared"  # in the work folder: the project's copy is made and imported


def names_a_game(spec: str) -> bool:
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
        files = sorted(p for p in path.rglob("*") if p.is_file() and not set(CACHES) & set(p.relative_to(path).parts))
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
    """How the pool starts the game: an exported binary as it is; a project folder by its Godot, from
    the copy `prepare` made (never the user's own folder)."""
    game = own["game"]
    project = game.get("run_project") or game["project"]
    return Launch(program=game["program"], project=Path(project) if project else None,
                  install=installs().get(game["program"], "give the path of an exported game binary"),
                  agents=own.get("agents_per_process"), stats=False, connect_timeout_s=connect_timeout_s,
                  what=f"the game {game['path']}")


def prepare(game: dict, work: Path, timeout_s: float) -> dict:
    """A project folder's copy in `work` (the profile's, removed when it ends), for every process of the
    profile to run: Godot 4 writes its `.godot/` cache into the project, and a Godot 4 project never
    opened in an editor has no class cache yet, so the copy is `--import`ed once here. The game with
    "run_project" set; an exported binary as it is."""
    from gpuenv.errors import UserError

    if not game["project"]:
        return game
    copy = work / "project"
    if (work / PREPARED).exists():  # made already (the command prepares it, the check reuses it)
        return {**game, "run_project": str(copy)}
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(game["project"], copy, ignore=shutil.ignore_patterns(*CACHES))
    if game["program"] == "godot4":
        launch = launch_of({"game": game})
        try:
            r = subprocess.run([launch.program_path(), "--headless", "--path", str(copy), "--import"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise UserError(f"the game {game['path']}: Godot's `--import` of the project did not finish within {timeout_s:g} s") from None
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
            raise UserError(f"the game {game['path']}: Godot's `--import` of the project failed ({last[:200]})")
    (work / PREPARED).touch()
    return {**game, "run_project": str(copy)}


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


def check(spec: str, connect_timeout_s: float, work: Path) -> dict:
    """Start the game once, headless: it connects, says its spaces, resets and steps under random
    actions until an episode ends (or LONGEST steps). The answer `gpuenv profile` records, or
    {"ok": False, "error": one line}. The game process (and what it started) never outlives this."""
    from gymnasium import spaces

    from gpuenv.backends.base import action_pool
    from gpuenv.errors import UserError

    try:
        game = describe(Path(spec))
    except ValueError as e:
        return {"ok": False, "error": str(e)}
    proc = env = None
    try:
        game = prepare(game, work, connect_timeout_s)
        launch = launch_of({"game": game}, connect_timeout_s)
        proc, env = start(launch, ["--env_seed=0", "--disable-render-loop", "--headless", *flags("uncapped").argv()])
        agents = int(env.num_envs)
        keys = list(env.action_spaces[0].spaces.items())
        obs_space = env.observation_spaces[0].spaces
        if "obs" not in obs_space or not isinstance(obs_space["obs"], spaces.Box):
            return {"ok": False, "error": f"the game {game['path']} has no vector observation `obs` ({', '.join(obs_space) or 'none'}): "
                                          "gpuenv profiles games whose agents observe a vector (godot-rl's `obs` key)"}
        space = action_space_of(keys, launch.what)
        actions = action_pool(space, agents, 64, 0)
        env.reset()
        steps, ended = 0, False
        while steps < LONGEST and not ended:
            env.step_send(per_key(keys, actions[steps % len(actions)]))
            _o, _r, done, _t, _i = env.step_recv()
            steps += 1
            ended = any(done)
    except UserError as e:
        return {"ok": False, "error": str(e)}
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:  # ConnectionError is an OSError
        return {"ok": False, "error": f"the game {game['path']} broke godot-rl's protocol ({type(e).__name__}: {str(e)[:200]})"}
    finally:
        if env is not None:
            try:
                env.connection.close()
            except OSError:
                pass
        if proc is not None:
            kill_tree(proc)
    game["engine_version"] = engine_version(game)
    note = (f"the first episode's end under random actions ({steps} agent steps)" if ended else
            f"no episode ended within {LONGEST} agent steps under random actions")
    kind, size = (space.kind, space.n) if space.kind == "discrete" else (space.kind, len(space.low))
    return {"ok": True, "kind": GAME_KIND, "game": game, "agents_per_process": agents, "obs_shape": [int(np.prod(obs_space["obs"].shape))],
            "action_kind": kind, "action_size": size, "episode_steps": steps if ended else LONGEST, "episode_note": note,
            "identity": {k: game[k] for k in ("kind", "path", "name", "engine", "engine_version", "sha256") if game.get(k)},
            "spaces": {"observation": f"obs Box({obs_space['obs'].shape}) per agent, {agents} agents a process",
                       "action": ", ".join(f"{k} {sp}" for k, sp in keys)}}


def _own() -> dict:
    own = own_env()
    if own is None or own.get("kind") != GAME_KIND:
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

"""Is the user's env one gpuenv can profile? Run in a process of its own by `gpuenv profile` (the
user's code never runs in the command's process, and a hang there is cut by a timeout):

    python -m gpuenv.backends.own.check [--connect-timeout=S] [--work=DIR] SPEC [IMPORT ...]

prints one line, MARK + JSON: {"ok": true, spaces, identity} or {"ok": false, "error": "..."}, the
error one line naming what is wrong (it cannot be made, its reset/step break the Gymnasium API as
gymnasium.utils.env_checker checks it, or its spaces are ones gpuenv's random actions cannot drive).
A SPEC that is a path is a godot-rl game, checked by gpuenv.backends.own.godot.check (it must
connect within S seconds; a project folder is copied into DIR and run from there).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import sys
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

MARK = "gpuenv-own-check: "


def _line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {text[:300]}"


def identity(spec: str, env: Any) -> dict:
    """Which env this is, as records name it: its spec, where its code is (module, file hash) and the
    distribution and version that installed it, where one did."""
    entry = spec if ":" in spec else str(getattr(getattr(env, "spec", None), "entry_point", "") or "")
    module = entry.partition(":")[0] if ":" in entry else type(env.unwrapped).__module__
    out: dict[str, Any] = {"spec": spec, "entry_point": entry or None, "module": module}
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None)
    if path and Path(path).is_file():
        out["module_sha256"] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    top = module.split(".")[0]
    dists = metadata.packages_distributions().get(top, [])
    if dists:
        out["package"] = dists[0]
        out["version"] = metadata.version(dists[0])
    return out


def check(spec: str, imports: list[str]) -> dict:
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    from gpuenv.backends.own.adapter import OwnMake

    try:
        env = OwnMake(spec, tuple(imports))()
    except Exception as e:  # noqa: BLE001 - whatever the user's code raises is the answer
        return {"ok": False, "error": f"{spec} could not be made ({_line(e)})"}
    if not isinstance(env, gym.Env):
        return {"ok": False, "error": f"{spec} made a {type(env).__name__}, not a gymnasium.Env"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_env(env.unwrapped, skip_render_check=True)
    except Exception as e:  # noqa: BLE001
        return {"ok": False, "error": f"{spec} breaks the Gymnasium API ({_line(e)}; gymnasium.utils.env_checker.check_env)"}
    obs, act = env.observation_space, env.action_space
    if not isinstance(obs, gym.spaces.Box):
        return {"ok": False, "error": f"{spec}: its observation space is {type(obs).__name__}; gpuenv profiles envs with a Box observation space"}
    if isinstance(act, gym.spaces.Discrete):
        kind, size = "discrete", int(act.n)
    elif isinstance(act, gym.spaces.Box) and len(act.shape) == 1 and all(math.isfinite(float(x)) for x in [*act.low, *act.high]):
        kind, size = "box", int(act.shape[0])
    else:
        return {"ok": False, "error": f"{spec}: its action space is {act}; gpuenv drives envs with Discrete or a bounded 1-D Box action space"}
    limit = getattr(getattr(env, "spec", None), "max_episode_steps", None)
    episode = {"episode_steps": int(limit)} if limit else episode_length(env)
    return {"ok": True, "obs_shape": [int(math.prod(obs.shape))], "action_kind": kind, "action_size": size,
            **episode, "identity": identity(spec, env),
            "spaces": {"observation": _space(obs), "action": _space(act)}}


def _space(space: Any) -> str:
    """Box(4,) float32, Discrete(2): what the space is, without its bounds."""
    shape = getattr(space, "shape", None)
    if type(space).__name__ == "Box" and shape is not None:
        return f"Box{tuple(shape)} {space.dtype}"
    return str(space)


EPISODES, LONGEST = 3, 5000


def episode_length(env: Any) -> dict:
    """An env with no registered time limit: the longest of a few random-action episodes (records
    need an episode length; the note says where it came from)."""
    longest, ended = 0, True
    for i in range(EPISODES):
        env.reset(seed=i)
        steps, done = 0, False
        while not done and steps < LONGEST:
            _obs, _r, terminated, truncated, _info = env.step(env.action_space.sample())
            steps, done = steps + 1, bool(terminated or truncated)
        ended = ended and done
        longest = max(longest, steps)
    how = (f"no time limit registered: the longest of {EPISODES} random-action episodes" if ended else
           f"no time limit registered, and a random-action episode did not end within {LONGEST} steps")
    return {"episode_steps": longest, "episode_note": how}


def main(argv: list[str]) -> int:
    timeout, work = 60.0, None
    while argv and argv[0].startswith(("--connect-timeout=", "--work=")):
        flag, _, value = argv.pop(0).partition("=")
        if flag == "--work":
            work = Path(value)
        else:
            timeout = float(value)
    if not argv:
        print("usage: python -m gpuenv.backends.own.check [--connect-timeout=S] [--work=DIR] SPEC [IMPORT ...]", file=sys.stderr)
        return 2
    from gpuenv.backends.own.godot import names_a_game

    if names_a_game(argv[0]):  # a godot-rl game: started once, headless (gpuenv.backends.own.godot)
        from gpuenv.backends.own.godot import check as check_game

        if work is None:
            print(MARK + json.dumps({"ok": False, "error": "a game's check needs --work=DIR (its project's copy goes there)"}))
            return 0
        print(MARK + json.dumps(check_game(argv[0], timeout, work)), flush=True)
        return 0
    try:
        for name in argv[1:]:
            importlib.import_module(name)
        out = check(argv[0], argv[1:])
    except BaseException as e:  # noqa: BLE001 - an import that fails, or exits, is an answer too
        out = {"ok": False, "error": f"{argv[0]}: {_line(e)}"}
    print(MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

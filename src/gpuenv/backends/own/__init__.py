"""Your own environment, as `gpuenv profile ENV` measures it: a Gymnasium id (registered by the
modules named with --import) or a `module:factory` entry point, vectorised the ways the gymnasium
backend vectorises the catalogue's envs; or a godot-rl game (a Godot project folder or an exported
binary, gpuenv.backends.own.godot), in Godot processes of its agents, paced the godot backend's ways. Its one task is the env `gpuenv profile` describes in
GPUENV_OWN_ENV (gpuenv.tasks.own_env), which its worker processes inherit; without it, it has none.
Hidden: runnable by name, never listed or picked for a suite."""

from __future__ import annotations

from typing import Any

from gpuenv.backends.spec import Backend, NativeTask, PpoEnv
from gpuenv.tasks import own_env

VARIANTS = ("dummy", "subproc", "sync", "async")


def native_task(own: dict) -> NativeTask:
    return NativeTask(env_id=own["spec"], control_dt_s=None, frame_skip=1, physics_dt_s=None,
                      episode_steps=int(own.get("episode_steps") or 0), obs_shape=tuple(own["obs_shape"]),
                      action_kind=own["action_kind"], action_size=int(own["action_size"]),
                      notes="; ".join(filter(None, ["your environment" + (f" (imports {', '.join(own['imports'])})" if own.get("imports") else ""),
                                                    own.get("episode_note")])))


GAME_KIND = "godot"  # GPUENV_OWN_ENV's "kind" for a godot-rl game (gpuenv.backends.own.godot); a Gymnasium env has none
GAME_VARIANTS = ("uncapped", "realtime")  # the godot backend's pacings (realtime-xS with --speedup S)


def declare() -> Backend:
    own = own_env()
    if own is not None and own.get("kind") == GAME_KIND:
        return declare_game(own)
    return Backend(
        name="own",
        adapter="gpuenv.backends.own.adapter",
        requires=("gymnasium", "stable_baselines3"),
        extra="gymnasium",
        variants=VARIANTS,
        description="your own Gymnasium env (gpuenv profile ENV), in SB3's and Gymnasium's vectorisers",
        variant_notes={
            "dummy": "SB3 DummyVecEnv, all envs in one process, stepped in turn",
            "subproc": "SB3 SubprocVecEnv, one process per env",
            "sync": "Gymnasium SyncVectorEnv (next-step autoreset)",
            "async": "Gymnasium AsyncVectorEnv, one process per env, shared memory (next-step autoreset)",
        },
        baseline="subproc",
        packages=("gymnasium", "stable-baselines3", "torch"),
        library="gymnasium",
        tasks={own["task"]: native_task(own)} if own else {},
        ppo_env=PpoEnv("gpuenv.backends.own.ppo:make_vecenv", variants=("dummy", "subproc"), eval_variant="dummy"),
        hidden=True,
    )


def installs() -> dict[str, str]:
    """How to get each Godot program a game can name (the declaration's hint; the adapter's error)."""
    from gpuenv.backends.godot.adapter import INSTALL as GODOT3_INSTALL
    from gpuenv.backends.godot4.runtime import INSTALL as GODOT4_INSTALL

    return {"godot4": GODOT4_INSTALL, "godot3-server": GODOT3_INSTALL}


def declare_game(own: dict) -> Backend:
    from gpuenv.backends.godot.adapter import flags

    game = own["game"]
    variants = tuple(own.get("variants") or GAME_VARIANTS)
    program = (game["program"],) if game.get("project") else ()  # an exported game is its own program (a path)
    return Backend(
        name="own",
        adapter="gpuenv.backends.own.godot",
        requires=("godot_rl",),
        programs=program,
        extra="godot",
        install_hint=installs().get(game["program"], ""),
        variants=variants,
        description="your own godot-rl game (gpuenv profile PATH), in Godot processes of its agents",
        variant_notes={v: (f"frames back to back (--fixed-fps 60), action_repeat {flags(v).action_repeat}" if v.startswith("uncapped") else
                           f"godot-rl's pacing, speedup {flags(v).speedup}, action_repeat {flags(v).action_repeat}") for v in variants},
        packages=("godot-rl",),
        library="godot-rl",
        tasks={own["task"]: native_task(own)},
        ppo_env=PpoEnv("gpuenv.backends.own.godot:make_vecenv", variants=tuple(v for v in variants if v.startswith("uncapped"))),
        hidden=True,
    )


def __getattr__(name: str) -> Any:
    """BACKEND is declared anew on each read: the env it offers is the one GPUENV_OWN_ENV names now."""
    if name == "BACKEND":
        return declare()
    raise AttributeError(name)

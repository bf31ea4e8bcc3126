"""Godot: a game engine as the simulator, over godot-rl's socket protocol (the course's baseline).

The GDScript side (project/) is gpuenv's own: a BallChase task and a sync node speaking godot-rl's
wire protocol, for the Godot 3.2 headless server Debian ships (`godot3-server`; godot-rl's own
plugin is Godot 4 only). The Python side is godot-rl's client (`godot_rl.core.godot_env.GodotEnv`),
installed without its pins (`pip install --no-deps godot-rl`): the client needs only numpy and
gymnasium, while its pins (SB3 <= 2.4, gymnasium <= 1.0, numpy < 2) would hold the shared PPO
trainer to an older stack than every other backend's; with --no-deps one SB3 trains them all.

num_envs = agents per process x processes: up to AGENTS_PER_PROCESS agents in one Godot process (as
godot-rl batches them), more as several processes stepped together. Variants: `realtime` is what a
course user gets (godot-rl's launch flags, --speedup 20: the engine paces physics to 60 x speedup
ticks/s); `uncapped` runs frames back to back (--fixed-fps 60); `-xS` / `-arA` suffixes set speedup
and action_repeat for the sweep in the throughput suite.
"""

from __future__ import annotations

from gpuenv.backends.spec import Backend, NativeTask, PpoEnv, SystemPackage

AGENTS_PER_PROCESS = 16
DEFAULT_SPEEDUP = 20
DEFAULT_ACTION_REPEAT = 8
VARIANTS = (
    "realtime",
    "uncapped",
    "realtime-x1",
    "realtime-x5",
    "realtime-x10",
    "realtime-x40",
    "realtime-ar1",
    "uncapped-ar1",
    "uncapped-ar4",
)

BACKEND = Backend(
    name="godot",
    adapter="gpuenv.backends.godot.adapter",
    requires=("godot_rl",),
    system=(SystemPackage("godot3-server", "command:godot3-server", "Godot 3.2's headless server, the simulator",
                          image_version="3.2.3-stable-1+b3"),),
    extra="godot",
    install_hint="pip install --no-deps godot-rl==0.8.2 (`make install` does it)",
    variants=VARIANTS,
    description="Godot 3.2 headless + godot-rl protocol: a game engine over a socket",
    variant_notes={
        "realtime": f"godot-rl's flags: --speedup={DEFAULT_SPEEDUP} --action_repeat={DEFAULT_ACTION_REPEAT}, paced by the engine",
        "uncapped": f"--fixed-fps 60 --action_repeat={DEFAULT_ACTION_REPEAT}: frames back to back, same game time per step",
    },
    packages=("godot-rl",),
    library="godot-rl",
    tasks={
        "ballchase": NativeTask(
            "BallChase (gpuenv, Godot 3.2)", DEFAULT_ACTION_REPEAT / 60, DEFAULT_ACTION_REPEAT, 1 / 60, 200, (6,), "box", 2,
            "gpuenv's GDScript task; 16 agents per Godot process, each in its own arena",
        ),
    },
    ppo_env=PpoEnv("gpuenv.backends.godot.ppo:make_vecenv", variants=("uncapped", "realtime")),
    # its image is the godot4 backend's gpuenv/godot, which carries both engines
    decision_row="course",  # the course's decision table names it (gpuenv decide)
)

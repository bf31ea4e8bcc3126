"""Godot 4: the course's engine generation (Debian sid's godot 4.6), BallChase over godot-rl's protocol.

The same game as the godot backend (Godot 3.2), ported to Godot 4 and GDScript 2 (project/): a
sync node of gpuenv's own speaking godot-rl's wire protocol, godot-rl's Python client, the same
agents-per-process x processes layout, pacing and speedup/action_repeat flags (gpuenv.backends.godot
serves both; only the program, the project and the physics engine differ). Godot 4 is 3D-first and
its Jolt engine is 3D only, so BallChase here is a sphere sliding on the XZ plane between box walls,
stepped by GodotPhysics3D or Jolt Physics (built into Godot 4.4+); `godotphysics2d` runs the 3.2
project's 2D scene on Godot 4's 2D engine, the like-for-like row beside Godot 3.2.

Variants: ENGINE-PACING[-xS][-arA], ENGINE one of godotphysics, jolt, godotphysics2d; PACING realtime
(godot-rl's flags, --speedup 20) or uncapped (--fixed-fps 60).
"""

from __future__ import annotations

from gpuenv.backends.godot import AGENTS_PER_PROCESS, DEFAULT_ACTION_REPEAT, DEFAULT_SPEEDUP
from gpuenv.backends.godot4.runtime import INSTALL, PROGRAM
from gpuenv.backends.spec import Backend, Image, NativeTask, PpoEnv, SystemPackage

ENGINES = {
    "godotphysics": ("GodotPhysics3D", 3),
    "jolt": ("Jolt Physics", 3),
    "godotphysics2d": ("GodotPhysics2D", 2),
}
VARIANTS = (
    "godotphysics-uncapped",
    "jolt-uncapped",
    "godotphysics-realtime",
    "jolt-realtime",
    "godotphysics2d-uncapped",
    "godotphysics2d-realtime",
)

BACKEND = Backend(
    name="godot4",
    adapter="gpuenv.backends.godot4.adapter",
    requires=("godot_rl",),
    programs=(PROGRAM,),
    # make install debootstraps Debian sid's godot into RUNTIME (gpuenv.backends.godot4.runtime); the image copies that tree
    system=(SystemPackage("debootstrap", "command:debootstrap", "makes the Debian sid tree that Godot 4.6 runs from", role="install"),),
    extra="godot",
    install_hint=f"{INSTALL}; pip install --no-deps godot-rl==0.8.2",
    variants=VARIANTS,
    description="Godot 4.6 headless (GodotPhysics or Jolt) + godot-rl protocol: the course's engine",
    variant_notes={
        "godotphysics-uncapped": "Godot 4's own 3D physics, frames back to back (--fixed-fps 60)",
        "jolt-uncapped": "Jolt Physics (built into Godot 4.4+), frames back to back",
        "godotphysics-realtime": f"godot-rl's flags: --speedup={DEFAULT_SPEEDUP} --action_repeat={DEFAULT_ACTION_REPEAT}",
        "godotphysics2d-uncapped": "the Godot 3.2 project's 2D scene on Godot 4's 2D physics: like for like with godot:uncapped",
    },
    packages=("godot-rl",),
    library="godot-rl",
    tasks={
        "ballchase": NativeTask(
            "BallChase (gpuenv, Godot 4)", DEFAULT_ACTION_REPEAT / 60, DEFAULT_ACTION_REPEAT, 1 / 60, 200, (6,), "box", 2,
            f"gpuenv's GDScript 2 port of the godot backend's task; {AGENTS_PER_PROCESS} agents per Godot process",
        ),
    },
    ppo_env=PpoEnv("gpuenv.backends.godot4.adapter:make_vecenv", variants=("godotphysics-uncapped", "jolt-uncapped")),
    image=Image("Godot 4.6 (Debian sid, GodotPhysics and Jolt) and Godot 3.2 headless + godot-rl's client, SB3", ("ppo",), None,
                "docker/godot.Dockerfile", no_deps=("godot-rl==0.8.2",), name="godot", suite="godot",
                stages=(("GODOT4_BASE", "gpuenv.images.base:sid_godot"),), carries=("godot",)),
    decision_row="course",
)

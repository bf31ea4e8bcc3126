"""Genesis (genesis-world) on its CPU backend: the scenes of its own speed benchmark (a Franka arm, a
Go2 quadruped, each on a plane, batched with scene.build(n_envs)), stepped by gpuenv's harness, and
Gymnasium's InvertedPendulum on Genesis's solver, the task it trains on (the scenes have no reward).

Genesis's headline ("43M FPS", a Franka on an RTX 4090) came from a protocol a public re-benchmark
took apart (genesis-world issue 181): one joint target set once and reused for every step, and robot
self-collision off. The variants are those protocol choices, so the ratios between them can be
measured on any machine:
  random            a fresh random joint target every step (gpuenv's protocol), self-collision on
                    (Genesis's default since April 2025)
  random-noself     fresh random targets, self-collision off
  reused            one target set once, then only scene.step() (the speed benchmark's loop)
  reused-noself     the headline's protocol: one target, self-collision off

genesis-world pins plotly < 6 and opencv-python beside the main install's, so it runs in its own
Python environment (docker/locks/genesis.txt, built on first use, ~3.7 GB with torch's CPU wheel).
Genesis needs OpenGL's libraries even headless (it always builds an offscreen renderer): Debian's
libgl1 and libegl1, and X's libxrender1 (its viewer's pyglet binds it at import)."""

from __future__ import annotations

from gpuenv.backends.spec import Backend, Environment, Image, NativeTask, PpoEnv, SystemPackage

# Gymnasium's InvertedPendulum model file, in the gymnasium package of Genesis's environment
# (gpuenv.backends.genesis.pendulum); named here so that listing backends imports no numpy
PENDULUM = "gymnasium:envs/mujoco/assets/inverted_pendulum.xml"
_SCENE = "Genesis's speed-benchmark scene: {} on a plane, PD joint-position targets, dt 0.01, no reward"

BACKEND = Backend(
    name="genesis",
    adapter="gpuenv.backends.genesis.adapter",
    requires=("genesis", "torch"),
    extra="genesis",
    variants=("random", "random-noself", "reused", "reused-noself"),
    description="Genesis (genesis-world) rigid-body scenes on its CPU backend, batched by scene.build(n_envs)",
    variant_notes={
        "random": "a fresh random joint target every step, self-collision on (gpuenv's protocol; Genesis's default collisions)",
        "random-noself": "a fresh random joint target every step, self-collision off",
        "reused": "one joint target set once and reused for every step (Genesis's speed-benchmark loop), self-collision on",
        "reused-noself": "one target set once, self-collision off: the protocol behind Genesis's headline",
    },
    benchmark_only={v: "one joint target set once and reused for every step (Genesis's speed-benchmark protocol): no trainer's loop"
                    for v in ("reused", "reused-noself")},
    packages=("genesis-world", "quadrants", "torch", "mujoco", "numpy"),
    library="genesis-world",
    install_hint="its own Python environment, built on first use from docker/locks/genesis.txt",
    # Genesis builds an offscreen renderer even headless, and its viewer's pyglet binds XRender at import (without it:
    # "'NoneType' object has no attribute 'XRenderFindVisualFormat'")
    system=(SystemPackage("libgl1", "library:libGL.so.1", "OpenGL, for the offscreen renderer Genesis always builds"),
            SystemPackage("libegl1", "library:libEGL.so.1", "EGL, the headless OpenGL context"),
            SystemPackage("libxrender1", "library:libXrender.so.1", "X's XRender, bound by its viewer's pyglet at import")),
    tasks={
        "franka_scene": NativeTask("xml/franka_emika_panda/panda.xml", 0.01, 1, 0.01, 10**9, (9,), "box", 9, _SCENE.format("Franka Panda")),
        "go2_scene": NativeTask("urdf/go2/urdf/go2.urdf", 0.01, 1, 0.01, 10**9, (12,), "box", 12, _SCENE.format("Unitree Go2")),
        # Gymnasium's InvertedPendulum-v5 (its MJCF, control, reward, termination and reset) on Genesis's solver,
        # the joints' armature set back to the file's 0 (Genesis's importer puts 0.1): gpuenv.backends.genesis.pendulum
        "inverted_pendulum": NativeTask(PENDULUM, 0.04, 2, 0.02, 1000, (4,), "box", 1,
                                        "Gymnasium's InvertedPendulum-v5 model and rules on Genesis's rigid solver (its own integrator, "
                                        "not the file's RK4; armature 0 as the file says)", max_return=1000.0),
    },
    # the shared SB3 trainer's env (the pendulum; the scenes have no reward), served from Genesis's environment
    ppo_env=PpoEnv("gpuenv.backends.genesis.ppo:make_vecenv", variants=("random", "random-noself")),
    environment=Environment(python="3.11", lock="docker/locks/genesis.txt"),
    # its environment's lock is the image's (in the image, the image's interpreter is its environment)
    image=Image("Genesis on its CPU backend (genesis-world, quadrants), torch's CPU wheel, OpenGL's libraries", ("genesis",), None,
                "docker/genesis.Dockerfile"),
)

"""MuJoCo Playground (where Brax's environments moved): its DeepMind Control Suite ports on MJX,
vmapped and stepped in the jit-compiled lax.scan chunk the Brax and MJX adapters use; Brax PPO with
Playground's own hyperparameters as its native trainer.

Playground ships the suite's models with solver settings cut for accelerators (its xmls/README.md:
fewer solver iterations, Euler instead of RK4 for cartpole, contact culling), so the variants say
which physics ran:
  jax      Playground's models as shipped, MJX's JAX implementation (Playground's own protocol)
  jax-dmc  the same models with dm_control's solver settings restored (integrator, iterations,
           line-search iterations, Euler damping): the like-for-like row beside EnvPool's
           dm_control tasks; tests/test_playground.py steps it beside MuJoCo on dm_control's model
  warp     MJX's Warp implementation (MuJoCo Warp): written for CUDA GPUs; Warp's CPU device runs it
           here too (slowly), and the records say which device ran it
"""

from __future__ import annotations

from gpuenv.backends.brax import BRAX_PPO_KEYS
from gpuenv.backends.spec import Backend, NativeTask, PpoEnv, Trainer

_PORT = "Playground's port of dm_control's {}: the same model, reward and observation; solver settings per variant"

BACKEND = Backend(
    name="playground",
    adapter="gpuenv.backends.playground.adapter",
    requires=("mujoco_playground", "mujoco", "jax", "brax"),
    extra="playground",
    variants=("jax", "jax-dmc", "warp"),
    description="MuJoCo Playground's DM Control Suite ports on MJX, vmapped in a jit-compiled lax.scan chunk",
    device="gpu",
    variant_notes={
        "jax": "Playground's models as shipped (solver settings cut for accelerators), MJX implementation 'jax'",
        "jax-dmc": "the same models with dm_control's solver settings restored (the physics EnvPool's dm_control tasks step), MJX 'jax'",
        "warp": "MJX implementation 'warp' (MuJoCo Warp), Playground's default: written for CUDA GPUs; on a CPU it runs on Warp's CPU device",
    },
    packages=("playground", "mujoco-mjx", "mujoco", "warp-lang", "brax", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin"),
    library="playground",
    tasks={
        "cartpole_balance": NativeTask("CartpoleBalance", 0.01, 1, 0.01, 1000, (5,), "box", 1, _PORT.format("cartpole-balance")),
        "cheetah_run": NativeTask("CheetahRun", 0.01, 1, 0.01, 1000, (17,), "box", 6, _PORT.format("cheetah-run")),
    },
    ppo_env=PpoEnv("gpuenv.backends.playground.ppo:make_vecenv", jit_compiled=True),
    trainers=(
        Trainer(
            "playground_ppo",
            "brax.training.agents.ppo with Playground's env wrappers (wrap_for_brax_training): Playground's native trainer",
            BRAX_PPO_KEYS,
            "gpuenv.backends.playground.ppo:train",
            needs=("mujoco_playground", "brax", "jax"),
            extra="playground",
        ),
    ),
    worker_env="gpuenv.backends.jax_cache:worker_env",
)

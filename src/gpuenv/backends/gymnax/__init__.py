"""gymnax: classic control and MinAtar written in JAX, vmapped and stepped in the jit-compiled
lax.scan chunk the Brax and MJX adapters use (gpuenv.backends._jax).

Its CartPole is the logical task `cartpole` beside Gymnasium's and EnvPool's: the same equations
(Gymnasium's euler integration, force, thresholds, 500-step limit, +1 a step; tests/test_gymnax.py
steps both under the same actions from the same state and compares). MinAtar Breakout has no
counterpart in the other backends: its own task, `breakout_minatar`.

gymnax 1.0.1 pins gymnasium < 1.4 (for a conversion helper gpuenv does not use) while the rest of
gpuenv runs gymnasium 1.4: it is installed without its pins (`pip install --no-deps gymnax`, as
godot-rl is), with the three modules its import needs (flax, six, seaborn) from the extra.
gpuenv/brax carries it (both JAX; its lock holds gymnax the same way).

Time to reward: the shared SB3 PPO through gpuenv's JaxVecEnv (gpuenv.backends.gymnax.ppo); gymnax
publishes no trainer of its own (its authors' gymnax-blines is a separate, unreleased repository).
"""

from __future__ import annotations

from gpuenv.backends.spec import Backend, NativeTask, PpoEnv

VERSION = "1.0.1"  # installed --no-deps (make install; gpuenv/brax's lock)

BACKEND = Backend(
    name="gymnax",
    adapter="gpuenv.backends.gymnax.adapter",
    requires=("gymnax", "jax", "flax", "six", "seaborn"),
    extra="gymnax",
    install_hint=f"pip install 'gpuenv[gymnax]'; pip install --no-deps gymnax=={VERSION} (`make install` does both)",
    variants=("jit",),
    description="gymnax: classic control and MinAtar in JAX, vmapped and stepped in a jit-compiled lax.scan chunk",
    device="gpu",
    variant_notes={"jit": "gymnax's Environment.step (auto-reset inside), vmapped over the envs"},
    packages=("gymnax", "flax", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin"),
    library="gymnax",
    tasks={
        "cartpole": NativeTask("CartPole-v1", 0.02, 1, 0.02, 500, (4,), "discrete", 2,
                               "gymnax's JAX port of Gymnasium's CartPole-v1 (same equations, float32)"),
        "breakout_minatar": NativeTask("Breakout-MinAtar", None, 1, None, 1000, (10, 10, 4), "discrete", 3,
                                       "gymnax's MinAtar Breakout (10x10x4 binary frames, 3 actions; no sticky actions)"),
    },
    # gymnax has no trainer of its own: the shared SB3 definition, through gpuenv's JaxVecEnv
    ppo_env=PpoEnv("gpuenv.backends.gymnax.ppo:make_vecenv", jit_compiled=True),
    worker_env="gpuenv.backends.jax_cache:worker_env",
)

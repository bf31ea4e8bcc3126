"""mujoco.mjx on Gymnasium's MJCF models, vmapped in a jit-compiled lax.scan chunk."""

from __future__ import annotations

from gpuenv.backends.spec import Backend, Image, NativeTask, Peer, PpoEnv

BACKEND = Backend(
    name="mjx",
    adapter="gpuenv.backends.mjx.adapter",
    requires=("mujoco", "jax", "gymnasium"),
    extra="mjx",
    variants=("jax", "jax-brax"),
    description="mujoco.mjx on Gymnasium's MJCF models, vmapped in a jit-compiled lax.scan chunk",
    device="gpu",
    variant_notes={
        "jax": "Gymnasium's model file as shipped (MuJoCo's default solver: Newton, 100 iterations, 50 line-search, "
               "Euler damping on): the physics Gymnasium's and EnvPool's rows step; MJX implementation 'jax'",
        "jax-brax": "the same model with Brax's MJX solver settings (brax/envs/ant.py, humanoid.py: Newton, 1 iteration, "
                    "4 line-search, Euler damping off), what MJX users run on accelerators; MJX 'jax'",
    },
    packages=("mujoco-mjx", "mujoco", "playground", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin"),
    library="mujoco-mjx",
    tasks={
        "halfcheetah": NativeTask("half_cheetah.xml", 0.05, 5, 0.01, 1000, (17,), "box", 6, "mujoco.mjx on Gymnasium's v5 MJCF"),
        "ant": NativeTask("ant.xml", 0.05, 5, 0.01, 1000, (27,), "box", 8, "mujoco.mjx on Gymnasium's v5 MJCF; obs qpos+qvel"),
        "humanoid": NativeTask(
            "humanoid.xml", 0.015, 5, 0.003, 1000, (45,), "box", 17,
            unsupported="Gymnasium's humanoid.xml uses the PGS solver, which MJX does not implement; "
            "changing the solver would change the task",
        ),
    },
    # MuJoCo Playground runs on MJX too: gpuenv/mjx carries it (its JAX and Warp implementations)
    image=Image("MuJoCo MJX on JAX with CUDA 13 wheels, SB3 (shared PPO) on CUDA torch (one nvidia-* set); MuJoCo Playground",
                ("mjx", "ppo", "cuda13", "playground"), "13", "docker/mjx.Dockerfile", torch_cpu=False, build_gb=10, carries=("playground",)),
    ppo_env=PpoEnv("gpuenv.backends.mjx.ppo:make_vecenv", jit_compiled=True),
    worker_env="gpuenv.backends.jax_cache:worker_env",
    # mujoco.mjx.benchmark (what mjx-testspeed runs) at each variant's solver settings
    peer=Peer("gpuenv.backends.mjx.peer", ("jax", "jax-brax"), ("jax-brax", "jax"), ("jax-brax",)),
)

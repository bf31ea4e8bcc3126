"""Brax envs, vmapped and stepped in a jit-compiled lax.scan chunk; Brax PPO as its native trainer."""

from __future__ import annotations

from gpuenv.backends.gymnax import VERSION as GYMNAX
from gpuenv.backends.spec import Backend, Image, NativeTask, Peer, PpoEnv, Trainer

# Brax PPO's hyperparameters (brax.training.agents.ppo.train): Playground's native trainer takes them too.
BRAX_PPO_KEYS = frozenset(
    "learning_rate entropy_cost discounting unroll_length batch_size num_minibatches num_updates_per_batch "
    "reward_scaling normalize_observations clipping_epsilon gae_lambda max_grad_norm action_repeat "
    "num_resets_per_eval".split()
)

BACKEND = Backend(
    name="brax",
    adapter="gpuenv.backends.brax.adapter",
    requires=("brax", "jax"),
    extra="brax",
    variants=("generalized", "positional", "spring", "mjx"),
    description="Brax envs, vmapped and stepped in a jit-compiled lax.scan chunk",
    device="gpu",
    variant_notes={v: f"Brax physics pipeline '{v}'" for v in ("generalized", "positional", "spring", "mjx")},
    packages=("brax", "flax", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin"),
    library="brax",
    tasks={
        "inverted_pendulum": NativeTask(
            "inverted_pendulum", 0.04, 2, 0.02, 1000, (4,), "box", 1,
            "Brax's own port; dt depends on the pipeline (positional: 0.005 s x 4 = 0.02 s)", max_return=1000.0,
        ),
        "hopper": NativeTask("hopper", 0.008, 4, 0.002, 1000, (11,), "box", 3, "Brax's own port"),
        "halfcheetah": NativeTask("halfcheetah", 0.05, 5, 0.01, 1000, (17,), "box", 6, "Brax's own port of the model"),
        "ant": NativeTask("ant", 0.05, 5, 0.01, 1000, (27,), "box", 8, "Brax's own port; no contact forces in obs"),
        "humanoid": NativeTask("humanoid", 0.015, 5, 0.003, 1000, (244,), "box", 17, "Brax's own port"),
    },
    # gymnax is JAX too: gpuenv/brax carries it (locked without its gymnasium pin, installed --no-deps)
    image=Image("Brax on JAX with CUDA 13 wheels, Brax PPO, and SB3 on CUDA torch (one nvidia-* set); gymnax", ("brax", "ppo", "cuda13", "gymnax"), "13",
                "docker/brax.Dockerfile", torch_cpu=False, build_gb=10, no_deps=(f"gymnax=={GYMNAX}",), carries=("gymnax",)),
    ppo_env=PpoEnv("gpuenv.backends.brax.ppo:make_vecenv", jit_compiled=True),
    trainers=(
        Trainer(
            "brax_ppo",
            "brax.training.agents.ppo (JAX): Brax's native trainer",
            BRAX_PPO_KEYS,
            "gpuenv.backends.brax.ppo:train",
            needs=("brax", "jax"),
            extra="brax",
        ),
    ),
    worker_env="gpuenv.backends.jax_cache:worker_env",
    # brax.test_utils.benchmark over the env's own System and pipeline (spring: no MuJoCo model to match)
    peer=Peer("gpuenv.backends.brax.peer", ("generalized", "positional", "mjx"), ("generalized", "positional"), ("positional",)),
)

"""PufferLib Ocean: PufferAI's C environments (`pufferlib` 3.0.0), each a PufferEnv that steps all its
envs in one C loop over shared numpy buffers, resetting a finished game inside the step.

Variant:
  native   one PufferEnv in the worker process holding every env (PufferLib's "native vectorization",
           pufferlib.vector's PufferEnv backend): the harness's actions are copied into its action
           buffer and vec_step runs the C step of each env

Ocean's games are PufferLib's own, not ALE's or Gymnasium's: each is a logical task of its own
(ocean_breakout is not Atari Breakout). Ocean needs numpy<2, gymnasium 0.29.1 and gym 0.23.0 (an
sdist), beside the main install's gymnasium 1.x, so it runs in its own Python environment
(docker/locks/ocean.txt), and PyPI has `pufferlib` 3.0.0 as an sdist whose setup.py downloads from
GitHub: its build step (gpuenv.backends.ocean.build) builds it without those downloads. The build
needs a C and a C++ compiler (gcc, g++) and Python's headers: its C envs, and the C++ advantage kernel
of PufferLib's own trainer (pufferl, the native trainer here) against the environment's CPU torch."""

from __future__ import annotations

from gpuenv.backends.ocean.build import VERSION  # PufferAI's pufferlib, the sdist the build step fetches and checks
from gpuenv.backends.spec import Backend, Environment, Image, NativeTask, PpoEnv, SystemPackage, Trainer

# PufferLib's [train] settings a suite may set for pufferl (its config/default.ini); the rest are fixed
# by gpuenv (device, seed, budget, env count) or are PufferLib's logging and sweep settings
PUFFERL_KEYS = frozenset(
    "learning_rate gamma gae_lambda update_epochs clip_coef vf_coef vf_clip_coef max_grad_norm ent_coef adam_beta1 "
    "adam_beta2 adam_eps optimizer anneal_lr bptt_horizon minibatch_size max_minibatch_size prio_alpha prio_beta0 "
    "vtrace_rho_clip vtrace_c_clip".split()
)

BACKEND = Backend(
    name="ocean",
    adapter="gpuenv.backends.ocean.adapter",
    # pufferlib.ocean is PufferAI's build only: the main install's `pufferlib` module is Metta's pufferlib-core
    requires=("pufferlib.ocean", "gym"),
    extra="ocean",
    variants=("native",),
    description="PufferLib Ocean: PufferAI's C environments (pufferlib 3.0.0), all envs stepped in one C loop",
    variant_notes={
        "native": "one PufferEnv holds every env in this process; its vec_step runs each env's C step (PufferLib's native vectorization)",
    },
    packages=("pufferlib", "numpy", "gymnasium"),
    library="pufferlib",  # its history's axis; `gpuenv sweep` refuses it (pufferlib is built by the build step, not installed)
    install_hint=f"its own Python environment, built on first use from docker/locks/ocean.txt, then pufferlib {VERSION} built "
                 "from its sdist (gpuenv.backends.ocean.build)",
    # its build step compiles Ocean's C envs and the C++ advantage kernel of pufferl against the environment's torch
    system=(SystemPackage("gcc", "command:gcc", "compiles Ocean's C environments", role="build"),
            SystemPackage("g++", "command:g++", "compiles pufferl's C++ advantage kernel", role="build"),
            SystemPackage("libc6-dev", "library:libc.so", "the C library's headers and link files", role="build"),
            SystemPackage("python3-dev", "python-headers", "Python.h, for the C extensions", role="build")),
    tasks={
        "ocean_breakout": NativeTask(
            "pufferlib.ocean.breakout.breakout:Breakout", 4 / 60, 4, 1 / 60, 10**9, (118,), "discrete", 3,
            "Ocean's Breakout in C: 118 float features (paddle, ball, 108 bricks), 3 actions, frameskip 4 at 60 fps (PufferLib's default); "
            "a game ends when the balls are lost or every brick is hit, and restarts inside the step",
            max_return=864.0),  # every brick of both walls: 2 x 18 x (7+7+4+4+1+1) points (breakout.h's max_score)
        "ocean_cartpole": NativeTask(
            "pufferlib.ocean.cartpole.cartpole:Cartpole", 0.02, 1, 0.02, 200, (4,), "discrete", 2,
            "Ocean's CartPole in C: Gymnasium's equations (Euler, tau 0.02, force 10) in float32, U(+-0.04) reset noise, "
            "reward 1 per step but 0 on the step that ends an episode, 200-step limit (CartPole-v0's), which Ocean does not "
            "flag as truncation; a game restarts inside the step",
            max_return=199.0),  # 200 steps: 199 rewarded, the 200th (the limit) gives 0
    },
    # the shared SB3 trainer's env: built in Ocean's environment and served to the trainer (gpuenv.backends.served)
    ppo_env=PpoEnv("gpuenv.backends.ocean.ppo:make_vecenv"),
    trainers=(
        Trainer(
            "pufferl",
            "pufferlib.pufferl (PufferLib 3.0's own PPO, torch on the CPU, its C++ advantage kernel and Muon optimizer) "
            "with PufferLib's shipped config for the env: Ocean's native trainer, in Ocean's environment",
            PUFFERL_KEYS,
            "gpuenv.backends.ocean.train:train",
            extra="ocean",  # what it needs is in Ocean's environment (its lock and build step), not the main install
            check="gpuenv.backends.ocean.train:check_values",
        ),
    ),
    environment=Environment(python="3.11", lock="docker/locks/ocean.txt", build_step="gpuenv.backends.ocean.build:install"),
    image=Image("PufferLib Ocean's C environments and PufferLib's trainer (pufferlib 3.0.0 built from its sdist with gcc and g++ "
                "against torch's CPU wheel), numpy<2", ("ocean",), None, "docker/ocean.Dockerfile"),
)

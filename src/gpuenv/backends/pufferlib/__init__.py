"""PufferLib's vectorisation (pufferlib.vector) over the same Gymnasium envs the SB3 and Gymnasium
vectorisers step: its Serial and Multiprocessing backends, the latter synchronous or with its own
batching (send/recv on half the envs while the other half steps).

From PyPI only `pufferlib-core` installs here: the vectoriser and emulation layer, without the Ocean
C environments. It is not a PufferAI release: its metadata calls it "Minimal PufferLib core
functionality vendored into the Metta monorepo" (Metta AI's copy, versioned 3.0.x, with teacher
actions added); its Serial and Multiprocessing keep PufferLib's design (zero-copy shared-memory
batches, busy-waiting workers, one worker per physical core), which PufferAI's 2024 vector.py has
too. pufferlib-core pins torch==2.9.0 for its CUDA advantage kernel, which the vectoriser never
imports, so it is installed without its pins (`make install`: pip install --no-deps pufferlib-core).
PufferAI's `pufferlib` 3.0.0, with the Ocean C environments, is the `ocean` backend (its own
environment: gpuenv.backends.ocean).
"""

from __future__ import annotations

from gpuenv.backends._gym_tasks import CLASSIC_AND_MUJOCO_V5, pong
from gpuenv.backends.spec import Backend, PpoEnv

VERSION = "3.0.23"

BACKEND = Backend(
    name="pufferlib",
    adapter="gpuenv.backends.pufferlib.adapter",
    requires=("pufferlib", "gymnasium", "psutil", "mujoco", "ale_py"),
    extra="pufferlib",
    install_hint=f"pip install 'gpuenv[pufferlib]'; pip install --no-deps pufferlib-core=={VERSION} (`make install` does both)",
    variants=("mp", "serial", "mp-async", "mp-allcores"),
    description="PufferLib's vectorisation (Serial, Multiprocessing sync and async; Metta's pufferlib-core) over Gymnasium envs",
    variant_notes={
        "mp": "pufferlib.vector.Multiprocessing, one worker process per physical core but one (its main process "
                           "busy-waits too), envs split among them, shared-memory buffers, batch = all envs",
        "serial": "pufferlib.vector.Serial: every env in this process, stepped in turn",
        "mp-async": "Multiprocessing with batch = half the envs: send/recv one half while the other steps "
                                 "(PufferLib's double buffering); an even number of workers, at least 2",
        "mp-allcores": "Multiprocessing with a worker on every physical core (the most PufferLib allows without "
                                    "overwork): the busy-waiting main process then shares a core",
    },
    min_envs={"mp-async": 2},
    packages=("pufferlib-core", "gymnasium", "mujoco", "ale-py"),
    library="pufferlib-core",
    tasks={
        **{k: v for k, v in CLASSIC_AND_MUJOCO_V5.items()},
        "pong": pong("ALE/Pong-v5", "Gymnasium's Pong with the gymnasium backend's preprocessing (EnvPool's, in Python)"),
    },
    # SB3 steps every env at once (not mp-async's half batches), in same-step autoreset (pufferlib.ppo)
    ppo_env=PpoEnv("gpuenv.backends.pufferlib.ppo:make_vecenv", variants=("serial", "mp", "mp-allcores"), eval_variant="serial"),
)

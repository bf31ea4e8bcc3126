"""CPU baseline: Gymnasium envs in SB3 SubprocVecEnv / DummyVecEnv or Gymnasium Sync/AsyncVectorEnv."""

from __future__ import annotations

from gpuenv.backends._gym_tasks import CLASSIC_AND_MUJOCO_V5, pong
from gpuenv.backends.pufferlib import VERSION as PUFFERLIB
from gpuenv.backends.spec import Backend, Image, PpoEnv

_PONG = (
    "ALE/Pong-v5 with frameskip=1, sticky actions 0, then AtariPreprocessing(frame_skip=4, 84x84 gray, "
    "noop_max=30) and FrameStackObservation(4): the same preprocessing EnvPool's Pong-v5 does in C++"
)

BACKEND = Backend(
    name="gymnasium",
    adapter="gpuenv.backends.gymnasium.adapter",
    requires=("gymnasium", "stable_baselines3", "mujoco", "ale_py"),
    extra="gymnasium",
    variants=("subproc", "dummy", "sync", "async", "async-noshm"),
    description="CPU baseline: Gymnasium envs in SB3 SubprocVecEnv / DummyVecEnv or Gymnasium Sync/AsyncVectorEnv",
    variant_notes={
        "subproc": "SB3 SubprocVecEnv, one process per env (the baseline speedups are quoted against)",
        "dummy": "SB3 DummyVecEnv, all envs in one process, stepped in turn",
        "sync": "Gymnasium SyncVectorEnv (next-step autoreset; PPO trains on it in same-step autoreset)",
        "async": "Gymnasium AsyncVectorEnv, one process per env, observations through shared memory (next-step autoreset; PPO: same-step)",
        "async-noshm": "Gymnasium AsyncVectorEnv, one process per env, observations pickled through pipes (shared_memory=False)",
    },
    baseline="subproc",
    packages=("gymnasium", "stable-baselines3", "torch", "ale-py", "mujoco"),
    library="gymnasium",
    tasks={
        **CLASSIC_AND_MUJOCO_V5,
        "pong": pong("ALE/Pong-v5", _PONG),
    },
    # PufferLib's vectoriser steps the same envs: gpuenv/gymnasium carries it (pufferlib-core locked without its torch pin)
    image=Image("CPU baseline: Gymnasium + MuJoCo + ALE, SB3; PufferLib's vectoriser", ("gymnasium", "ppo", "pufferlib"), None,
                "docker/gymnasium.Dockerfile", no_deps=(f"pufferlib-core=={PUFFERLIB}",), carries=("pufferlib",)),
    # Gymnasium's own vector envs train in same-step autoreset (their throughput is measured in next-step)
    ppo_env=PpoEnv("gpuenv.backends.gymnasium.ppo:make_vecenv", variants=("dummy", "subproc", "sync", "async", "async-noshm"),
                   eval_variant="dummy"),
)

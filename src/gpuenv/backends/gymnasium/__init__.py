"""CPU baseline: Gymnasium envs in SB3 SubprocVecEnv / DummyVecEnv or Gymnasium SyncVectorEnv."""

from __future__ import annotations

from gpuenv.backends.spec import Backend, Image, NativeTask, PpoEnv

_MUJOCO = "Gymnasium v5 MJCF"
_PONG = (
    "ALE/Pong-v5 with frameskip=1, sticky actions 0, then AtariPreprocessing(frame_skip=4, 84x84 gray, "
    "noop_max=30) and FrameStackObservation(4): the same preprocessing EnvPool's Pong-v5 does in C++"
)

BACKEND = Backend(
    name="gymnasium",
    adapter="gpuenv.backends.gymnasium.adapter",
    requires=("gymnasium", "stable_baselines3", "mujoco", "ale_py"),
    extra="gymnasium",
    variants=("subproc", "dummy", "sync"),
    description="CPU baseline: Gymnasium envs in SB3 SubprocVecEnv / DummyVecEnv or Gymnasium SyncVectorEnv",
    variant_notes={
        "subproc": "SB3 SubprocVecEnv, one process per env (the baseline speedups are quoted against)",
        "dummy": "SB3 DummyVecEnv, all envs in one process, stepped in turn",
        "sync": "Gymnasium SyncVectorEnv (next-step autoreset)",
    },
    baseline="subproc",
    packages=("gymnasium", "stable-baselines3", "torch", "ale-py", "mujoco"),
    library="gymnasium",
    tasks={
        "cartpole": NativeTask("CartPole-v1", 0.02, 1, 0.02, 500, (4,), "discrete", 2, max_return=500.0),
        "inverted_pendulum": NativeTask(
            "InvertedPendulum-v5", 0.04, 2, 0.02, 1000, (4,), "box", 1, _MUJOCO, max_return=1000.0
        ),
        "hopper": NativeTask("Hopper-v5", 0.008, 4, 0.002, 1000, (11,), "box", 3, _MUJOCO),
        "halfcheetah": NativeTask("HalfCheetah-v5", 0.05, 5, 0.01, 1000, (17,), "box", 6, _MUJOCO),
        "ant": NativeTask("Ant-v5", 0.05, 5, 0.01, 1000, (105,), "box", 8, _MUJOCO + ", contact forces in obs"),
        "humanoid": NativeTask("Humanoid-v5", 0.015, 5, 0.003, 1000, (348,), "box", 17, _MUJOCO),
        "pong": NativeTask("ALE/Pong-v5", None, 4, None, 27000, (4, 84, 84), "discrete", 6, _PONG),
    },
    image=Image("CPU baseline: Gymnasium + MuJoCo + ALE, SB3", ("gymnasium", "ppo"), None, "docker/gymnasium.Dockerfile"),
    ppo_env=PpoEnv("gpuenv.backends.gymnasium.ppo:make_vecenv", variants=("dummy", "subproc"), eval_variant="dummy"),
)

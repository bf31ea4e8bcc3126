"""EnvPool: a C++ thread pool of envs."""

from __future__ import annotations

from gpuenv.backends.spec import Backend, Image, NativeTask, PpoEnv

_MUJOCO = "Gymnasium v5 MJCF"

BACKEND = Backend(
    name="envpool",
    adapter="gpuenv.backends.envpool.adapter",
    requires=("envpool",),
    extra="envpool",
    variants=("sync", "async", "sync-pinned", "async-pinned"),
    description="EnvPool: C++ thread pool of envs",
    variant_notes={
        "sync": "batch_size = num_envs",
        "async": "send/recv with batch_size = num_envs / 2",
        "sync-pinned": "sync with EnvPool's own benchmark settings (benchmark/test_envpool.py): thread_affinity_offset=0, "
                       "Atari use_inter_area_resize=False; the protocol of EnvPool's published table",
        "async-pinned": "async with EnvPool's own benchmark settings (as sync-pinned): its table's 'EnvPool async' rows",
    },
    min_envs={"async": 2, "async-pinned": 2},
    packages=("envpool",),
    library="envpool",
    tasks={
        "cartpole": NativeTask("CartPole-v1", 0.02, 1, 0.02, 500, (4,), "discrete", 2, max_return=500.0),
        "inverted_pendulum": NativeTask(
            "InvertedPendulum-v5", 0.04, 2, 0.02, 1000, (4,), "box", 1, _MUJOCO, max_return=1000.0
        ),
        "hopper": NativeTask("Hopper-v5", 0.008, 4, 0.002, 1000, (11,), "box", 3, _MUJOCO),
        "halfcheetah": NativeTask("HalfCheetah-v5", 0.05, 5, 0.01, 1000, (17,), "box", 6, _MUJOCO),
        "ant": NativeTask("Ant-v5", 0.05, 5, 0.01, 1000, (105,), "box", 8, _MUJOCO + ", contact forces in obs"),
        "humanoid": NativeTask("Humanoid-v5", 0.015, 5, 0.003, 1000, (348,), "box", 17, _MUJOCO),
        "pong": NativeTask("Pong-v5", None, 4, None, 27000, (4, 84, 84), "discrete", 6),
        "cheetah_run": NativeTask("CheetahRun-v1", 0.01, 1, 0.01, 1000, (17,), "box", 6, "dm_control suite"),
        "cartpole_balance": NativeTask("CartpoleBalance-v1", 0.01, 1, 0.01, 1000, (5,), "box", 1, "dm_control suite"),
    },
    image=Image("EnvPool (C++ thread pool), SB3", ("envpool", "ppo"), None, "docker/envpool.Dockerfile"),
    ppo_env=PpoEnv("gpuenv.backends.envpool.ppo:make_vecenv", variants=("sync",)),
    decision_row="configs",  # the course's decision table names it (gpuenv decide)
)

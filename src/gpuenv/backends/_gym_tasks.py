"""The Gymnasium task facts that EnvPool and Gymnasium share: the same env ids, the same physics
(Gymnasium v5 MJCF), declared once. A backend adds what differs (Pong's id and preprocessing)."""

from __future__ import annotations

from gpuenv.backends.spec import NativeTask

MUJOCO = "Gymnasium v5 MJCF"

CLASSIC_AND_MUJOCO_V5: dict[str, NativeTask] = {
    "cartpole": NativeTask(env_id="CartPole-v1", control_dt_s=0.02, frame_skip=1, physics_dt_s=0.02, episode_steps=500,
                           obs_shape=(4,), action_kind="discrete", action_size=2, max_return=500.0),
    "inverted_pendulum": NativeTask(env_id="InvertedPendulum-v5", control_dt_s=0.04, frame_skip=2, physics_dt_s=0.02,
                                    episode_steps=1000, obs_shape=(4,), action_kind="box", action_size=1, notes=MUJOCO,
                                    max_return=1000.0),
    "hopper": NativeTask(env_id="Hopper-v5", control_dt_s=0.008, frame_skip=4, physics_dt_s=0.002, episode_steps=1000,
                         obs_shape=(11,), action_kind="box", action_size=3, notes=MUJOCO),
    "halfcheetah": NativeTask(env_id="HalfCheetah-v5", control_dt_s=0.05, frame_skip=5, physics_dt_s=0.01, episode_steps=1000,
                              obs_shape=(17,), action_kind="box", action_size=6, notes=MUJOCO),
    "ant": NativeTask(env_id="Ant-v5", control_dt_s=0.05, frame_skip=5, physics_dt_s=0.01, episode_steps=1000,
                      obs_shape=(105,), action_kind="box", action_size=8, notes=MUJOCO + ", contact forces in obs"),
    "humanoid": NativeTask(env_id="Humanoid-v5", control_dt_s=0.015, frame_skip=5, physics_dt_s=0.003, episode_steps=1000,
                           obs_shape=(348,), action_kind="box", action_size=17, notes=MUJOCO),
}


def pong(env_id: str, notes: str = "") -> NativeTask:
    """Pong v5 as both backends run it (frame skip 4, 84x84 gray, 4 frames stacked); the id and how differ."""
    return NativeTask(env_id=env_id, control_dt_s=None, frame_skip=4, physics_dt_s=None, episode_steps=27000,
                      obs_shape=(4, 84, 84), action_kind="discrete", action_size=6, notes=notes)

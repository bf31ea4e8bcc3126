"""One env of the Gymnasium catalogue (_gym_tasks), built the way every Gymnasium-based vectoriser
builds it: Gymnasium's own vectorisers, SB3's, and PufferLib's. Imports Gymnasium: for workers, not declarations."""

from __future__ import annotations

import gymnasium as gym


def make_env(env_id: str, max_episode_steps: int | None = None) -> gym.Env:
    if env_id.startswith("ALE/"):
        import ale_py

        gym.register_envs(ale_py)
        # Same preprocessing EnvPool's Pong-v5 does in C++ (see the catalogue in gymnasium/__init__.py).
        env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0, max_num_frames_per_episode=108_000)
        env = gym.wrappers.AtariPreprocessing(
            env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True, terminal_on_life_loss=False
        )
        return gym.wrappers.FrameStackObservation(env, 4)
    return gym.make(env_id, max_episode_steps=max_episode_steps)

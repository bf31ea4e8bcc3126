"""One env of the Gymnasium catalogue (_gym_tasks), built the way every Gymnasium-based vectoriser
builds it: Gymnasium's own vectorisers, SB3's, and PufferLib's. Imports Gymnasium: for workers, not declarations."""

from __future__ import annotations

from typing import Any

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


def physics_of(env: gym.Env) -> tuple[int | None, dict]:
    """(physics steps per env step, solver options) of one built env: a MuJoCo env's frame_skip and its
    model's options; 1 for classic control (one integrator step per step); None for anything else
    (Atari's emulator frames, a user's env)."""
    u: Any = env.unwrapped
    if hasattr(u, "frame_skip") and type(getattr(u, "model", None)).__name__ == "MjModel":
        from gpuenv.backends import _mujoco

        return int(u.frame_skip), _mujoco.options(u.model.opt, "float64")
    if type(u).__module__.startswith("gymnasium.envs.classic_control"):
        return 1, {}
    return None, {}


def probe_physics(native: Any, make=make_env) -> tuple[int | None, dict]:
    """physics_of() an env built the way the vectorisers' env processes build it (read here, in the
    worker, once: the env processes cannot be asked for an attribute their env may lack). None
    without building one where the task has no physics timestep (Atari, a user's own env)."""
    if native.physics_dt_s is None:
        return None, {}
    env = make(native.env_id, None)
    try:
        return physics_of(env)
    finally:
        env.close()

"""Ocean's PPO env for the shared SB3 trainer: one PufferEnv holding every env, kept to SB3's VecEnv
contract without SB3 (it runs in Ocean's own environment and reaches the trainer served,
gpuenv.backends.served). Ocean resets a finished game inside its C step, so the final observation of
an episode is gone by the time the step returns: no info carries `terminal_observation`, and SB3 does
not bootstrap a truncated episode without one. Breakout's games end only by losing the balls or clearing
the bricks (never truncated), so nothing PPO needs is lost there; CartPole's 200-step limit is reported
as a truncation (gpuenv.backends.ocean.adapter.episode_ends) that PPO treats as an end."""

from __future__ import annotations

import numpy as np

from gpuenv.backends._common import sb3_infos
from gpuenv.backends.ocean.adapter import RESET_MODE, episode_ends, make_env
from gpuenv.backends.spec import NativeTask


class OceanVecEnv:
    def __init__(self, native: NativeTask, num_envs: int, seed: int) -> None:
        self.env, self.details = make_env(native, num_envs, seed)  # the record's, as the stepper's facts say them
        self.native = native
        self.seed = seed
        self.num_envs = num_envs
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset(seed=self.seed)
        return obs.copy()

    def step(self, actions: np.ndarray):
        obs, rewards, terminals, truncations, _ = self.env.step(actions)
        dones, truncated = episode_ends(self.native, rewards, terminals, truncations)
        return obs.copy(), np.asarray(rewards, dtype=np.float32).copy(), dones, sb3_infos(self.num_envs, dones, truncated)

    def close(self) -> None:
        self.env.close()


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int) -> tuple[OceanVecEnv, dict]:
    env = OceanVecEnv(native, num_envs, seed)
    return env, {**env.details, "reset_mode": RESET_MODE,
                 "final_observation": "not kept: Ocean restarts a finished game inside its C step (a truncated episode is not bootstrapped)"}

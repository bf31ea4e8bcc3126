"""Test-only envs for `gpuenv profile`: a deliberately slow one (its step burns CPU for a fixed time,
as a heavy simulator does), one that breaks the Gymnasium API, and one whose reset never returns."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

STEP_COST_S = 0.002  # a simulator step that costs 2 ms of CPU: more than PPO learns a sample in


class SlowEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        end = time.perf_counter() + STEP_COST_S
        while time.perf_counter() < end:
            pass
        self.t += 1
        obs = np.full(3, (self.t % 10) / 10, np.float32)
        return obs, 1.0, False, self.t >= 200, {}


class OldApiEnv(SlowEnv):
    def step(self, action):  # gym 0.21's 4-tuple: breaks Gymnasium's API
        obs, reward, _terminated, truncated, info = super().step(action)
        return obs, reward, truncated, info


class HangingEnv(SlowEnv):
    def reset(self, *, seed=None, options=None):
        while True:
            time.sleep(1)


def make_env() -> gym.Env:
    return SlowEnv()


def make_broken() -> gym.Env:
    return OldApiEnv()


def make_hanging() -> gym.Env:
    return HangingEnv()


gym.register("MySlow-v0", entry_point="mypkg.envs:SlowEnv", max_episode_steps=200)

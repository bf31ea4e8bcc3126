"""The pufferlib backend's batched env for the shared SB3 PPO trainer. Imported only in training workers.

PufferLib's vectoriser resets an env on the step *after* its episode ends: that step ignores its
action and returns the reset observation with reward 0, and no final observation is kept (the trap
raw EnvPool has: wrapped naively, SB3 learns from one spurious transition per episode and cannot
bootstrap a time-limit truncation). PufferLib's own trainer is built for it; SB3 is not.

So for training each env is a SameStepPufferEnv: PufferLib's GymnasiumPufferEnv that resets at once
on the step that ends an episode. It writes the reset observation into PufferLib's shared buffer
beside that step's reward and terminal/truncation flags, and hands the final observation back
through PufferLib's info channel (the pipe its workers send episode infos through), tagged with the
env's index; steps that end nothing send no info. The vectoriser itself (Serial, or Multiprocessing
with its shared-memory buffers and busy-waiting workers) runs unchanged. The throughput stepper
keeps PufferLib's own next-step reset (gpuenv.backends.pufferlib.adapter).

Seeds: env i takes seed + i at its first reset, as in SB3's DummyVecEnv; PufferLib's Multiprocessing
would seed worker w's env j with seed + w + j, the same seed in more than one env.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pufferlib.emulation
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from gpuenv.backends._common import sb3_infos
from gpuenv.backends.spec import NativeTask
from gpuenv.backends.vecenv import NoSubEnvs

FINAL_OBS, ENV_INDEX = "final_obs", "gpuenv_env"


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int, make: Any = None):
    """(SB3 VecEnv, details for the record). `make`: how one Gymnasium env is built (default: the catalogue's)."""
    import functools

    from gpuenv.backends._gym_make import make_env
    from gpuenv.backends.pufferlib.adapter import vectorise

    creators = [functools.partial(SameStepPufferEnv, native.env_id, make or make_env, i, seed + i) for i in range(num_envs)]
    vec, batch, details = vectorise(variant, num_envs, seed, creators)
    if batch != num_envs:  # SB3 steps every env at once
        vec.close()
        raise ValueError(f"pufferlib {variant}: SB3 steps every env at once; its batch of {batch} of {num_envs} envs cannot train")
    details.update(autoreset_mode="same-step", autoreset="gpuenv SameStepPufferEnv: reset on the step that ends; final observation through PufferLib's info channel",
                   seeds=f"env i: {seed} + i")
    return PufferVecEnv(vec), details


class SameStepPufferEnv(pufferlib.emulation.GymnasiumPufferEnv):
    """One Gymnasium env under PufferLib's emulation layer, reset on the step that ends its episode."""

    def __init__(self, env_id: str, make: Any, index: int, first_seed: int, buf=None, seed=None) -> None:
        super().__init__(env_creator=make, env_args=[env_id, None], buf=buf)
        self.index, self._seed = index, first_seed  # PufferLib's `seed` may repeat across workers: unused

    def reset(self, seed=None, options=None):
        first, self._seed = self._seed, None  # later resets continue the env's own random state
        return super().reset(seed=first)

    def step(self, action):
        obs, reward, terminal, truncated, _info = super().step(action)
        if not self.done:
            return obs, reward, terminal, truncated, {}
        final = self.observations[0].copy()
        super().reset()  # the reset observation goes into the buffer; the flags of this step stay
        self.rewards[0], self.terminals[0], self.truncations[0] = reward, terminal, truncated
        return self.observations, reward, terminal, truncated, {ENV_INDEX: self.index, FINAL_OBS: final}


class PufferVecEnv(NoSubEnvs, VecEnv):
    """An SB3 VecEnv over a PufferLib vector env of SameStepPufferEnvs whose batch is every env."""

    def __init__(self, vec: Any) -> None:
        super().__init__(vec.num_envs, vec.single_observation_space, vec.single_action_space)
        self.vec = vec
        self._dtype = np.int32 if hasattr(vec.single_action_space, "n") else np.float32  # PufferLib's transport dtype
        self._actions: Any = None

    def reset(self) -> np.ndarray:
        # PufferLib's Multiprocessing.async_reset reads once more the infos its recv() already read (a
        # worker's semaphore stays INFO), so a second reset after an episode ended hangs (pufferlib-core
        # 3.0.23 and PufferAI's 3.0.0 alike). Between two of these steps no worker is busy: mark them read.
        semaphores = getattr(self.vec, "buf", {}).get("semaphores")
        if semaphores is not None:
            import pufferlib.vector

            semaphores[semaphores == pufferlib.vector.INFO] = pufferlib.vector.MAIN
        self.vec.async_reset(0)  # the envs seed themselves (SameStepPufferEnv)
        obs = np.array(self.vec.recv()[0])
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.ascontiguousarray(actions, dtype=self._dtype)

    def step_wait(self):
        self.vec.send(self._actions)
        obs, reward, terminal, truncated, _teacher, infos, _ids, _masks = self.vec.recv()
        terminal, truncated = np.array(terminal, dtype=bool), np.array(truncated, dtype=bool)
        dones = terminal | truncated
        finals = ((info[ENV_INDEX], info[FINAL_OBS]) for info in infos if ENV_INDEX in info)
        return np.array(obs), np.array(reward, dtype=np.float32), dones, sb3_infos(self.num_envs, dones, truncated & ~terminal, finals)

    def close(self) -> None:
        from gpuenv.backends.pufferlib.adapter import close_vector

        close_vector(self.vec)

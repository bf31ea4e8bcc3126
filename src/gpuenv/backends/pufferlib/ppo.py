"""The pufferlib backend's batched env for the shared SB3 PPO trainer. Imported only in training workers.

PufferLib's vectoriser resets an env on the step *after* its episode ends: the step that ends returns
the final observation, and the next one ignores its action and returns the reset observation with
reward 0 (the trap raw EnvPool has: wrapped naively, SB3 learns from one spurious transition per
episode and gets no terminal observation to bootstrap a time-limit truncation from). PufferLib's own
trainer is built for it; SB3 is not.

So for training each env is a SameStepPufferEnv: PufferLib's GymnasiumPufferEnv that resets at once
on the step that ends an episode. It writes the reset observation into PufferLib's shared buffer
beside that step's reward and terminal/truncation flags, and hands the final observation back
through PufferLib's info channel (the pipe its workers send episode infos through), tagged with the
env's index; steps that end nothing send no info. The vectoriser itself (Serial, or Multiprocessing
with its shared-memory buffers and busy-waiting workers) runs unchanged. The throughput stepper
keeps PufferLib's own next-step reset (gpuenv.backends.pufferlib.adapter).

Seeds: env i takes seed + i at its first reset, as in SB3's DummyVecEnv; PufferLib's Multiprocessing
would seed worker w's env j with seed + w + j, the same seed in more than one env.

PufferLib's workers are not daemon processes and spin on shared-memory flags: a worker that dies
leaves recv() spinning for ever, and one never closed makes the interpreter's exit wait for ever.
PufferVecEnv waits on the flags itself, raising once a worker has exited, and closes at exit.
"""

from __future__ import annotations

import atexit
import functools
from typing import Any

import numpy as np
import pufferlib.emulation
import pufferlib.spaces
import pufferlib.vector
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from gpuenv.backends._common import sb3_infos
from gpuenv.backends._gym_make import make_env
from gpuenv.backends.pufferlib.adapter import close_vector, vectorise
from gpuenv.backends.spec import NativeTask
from gpuenv.backends.vecenv import NoSubEnvs

FINAL_OBS, ENV_INDEX = "final_obs", "gpuenv_env"


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int, make: Any = None):
    """(SB3 VecEnv, details for the record). `make`: how one Gymnasium env is built (default: the catalogue's)."""
    creators = [functools.partial(SameStepPufferEnv, native.env_id, make or make_env, i, seed + i) for i in range(num_envs)]
    vec, batch, details = vectorise(variant, num_envs, seed, creators)
    if batch != num_envs:  # SB3 steps every env at once
        close_vector(vec)
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
        space = vec.single_action_space  # PufferLib's transport dtype: int32 for discrete actions
        self._dtype = space.dtype if isinstance(space, pufferlib.spaces.Box) else np.int32
        self._actions: Any = None
        # Multiprocessing's workers and their flags (Serial steps in this process: nothing to wait on)
        self._procs = vec.processes if isinstance(vec, pufferlib.vector.Multiprocessing) else []
        self._closed = False
        atexit.register(self.close)  # before multiprocessing's exit handler joins the workers (last in, first run)

    def _wait(self) -> None:
        """Until every Multiprocessing worker is done with what it was sent; raises if one has exited."""
        if not self._procs:
            return
        semaphores, spins = self.vec.buf["semaphores"], 0
        while (semaphores < pufferlib.vector.MAIN).any():
            spins += 1
            if spins % 4096 == 0 and any(p.exitcode is not None for p in self._procs):
                codes = [p.exitcode for p in self._procs]
                self.close()
                raise RuntimeError(f"a PufferLib worker process exited (exit codes {codes}); its env failed")

    def reset(self) -> np.ndarray:
        if self._procs:
            semaphores = self.vec.buf["semaphores"]
            # PufferLib's Multiprocessing.async_reset reads again an info its recv() has already read (the
            # worker's flag stays INFO, and every reset sends one), so a second reset hangs (pufferlib-core
            # 3.0.23 and PufferAI's 3.0.0 alike). Every worker is idle here: mark what was read as read.
            for w in np.flatnonzero(semaphores == pufferlib.vector.INFO):
                if not self.vec.recv_pipes[w].poll():
                    semaphores[w] = pufferlib.vector.MAIN
        self.vec.async_reset(0)  # the envs seed themselves (SameStepPufferEnv)
        self._wait()
        obs = np.array(self.vec.recv()[0])
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.ascontiguousarray(actions, dtype=self._dtype)

    def step_wait(self):
        self.vec.send(self._actions)
        self._wait()
        obs, reward, terminal, truncated, _teacher, infos, _ids, _masks = self.vec.recv()
        terminal, truncated = np.array(terminal, dtype=bool), np.array(truncated, dtype=bool)
        dones = terminal | truncated
        finals = ((info[ENV_INDEX], info[FINAL_OBS]) for info in infos if ENV_INDEX in info)
        return np.array(obs), np.array(reward, dtype=np.float32), dones, sb3_infos(self.num_envs, dones, truncated & ~terminal, finals)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        close_vector(self.vec)

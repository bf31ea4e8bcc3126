"""Gymnasium's InvertedPendulum-v5 on Genesis: Gymnasium's own MJCF (from the gymnasium package in
Genesis's environment) loaded by Genesis's MJCF importer, batched by scene.build(n_envs), with
Gymnasium's control, reward, termination and reset.

One difference is corrected, and recorded: Genesis's importer gives every joint an armature of 0.1,
where the file's defaults set 0. With it, the pole turns about 18% slower than in MuJoCo under the
same force; set to the file's 0, Genesis follows MuJoCo within its integrator (MuJoCo's RK4 here,
Genesis's own), which tests/test_genesis.py checks against Gymnasium's env step by step.

Per env step (Gymnasium's frame_skip 2 at the file's 0.02 s): the action, clipped to the motor's
ctrlrange [-3, 3], times its gear 100, is the slider's force for both physics steps. Reward 1 while
the pole is within 0.2 rad and the state finite (v5's `int(not terminated)`), termination past it,
truncation at 1000 steps; a finished env is reset at once to the initial state plus U(-0.01, 0.01) on
each position and velocity (v5's reset_noise_scale), its final observation kept."""

from __future__ import annotations

from importlib import resources
from typing import Any

import numpy as np

GEAR = 100.0
CTRL = 3.0
ANGLE_LIMIT = 0.2
RESET_NOISE = 0.01
ARMATURE = 0.0  # the file's <default><joint armature="0">; Genesis's importer sets 0.1
RESET_MODE = ("auto-reset in the adapter, as Gymnasium's vector envs: a pole past 0.2 rad, or 1000 steps, resets that env "
              "(set_dofs_position/velocity for the finished envs only) within the same step")


def model_file() -> str:
    return str(resources.files("gymnasium") / "envs" / "mujoco" / "assets" / "inverted_pendulum.xml")


class Pendulum:
    """num_envs InvertedPendulums in one Genesis scene; step(actions) -> (obs, reward, terminated,
    truncated, final_obs), numpy, auto-resetting the finished envs."""

    def __init__(self, gs: Any, num_envs: int, seed: int, physics_dt_s: float, frame_skip: int, episode_steps: int,
                 self_collision: bool = True) -> None:
        import torch

        self.gs, self.torch, self.self_collision = gs, torch, self_collision
        self.scene = gs.Scene(sim_options=gs.options.SimOptions(dt=physics_dt_s, substeps=1),
                              rigid_options=gs.options.RigidOptions(enable_self_collision=self_collision), show_viewer=False)
        self.robot = self.scene.add_entity(gs.morphs.MJCF(file=model_file()))
        self.scene.build(n_envs=num_envs)
        self.dofs = list(range(self.robot.n_dofs))  # slider, hinge
        self.imported_armature = [round(float(x), 4) for x in self.robot.get_dofs_armature().reshape(-1)[: len(self.dofs)]]
        self.robot.set_dofs_armature(torch.full((len(self.dofs),), ARMATURE), self.dofs)
        self.num_envs, self.frame_skip, self.episode_steps = num_envs, frame_skip, episode_steps
        self.rng = np.random.default_rng(seed)
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.reset()

    def _set(self, envs: np.ndarray) -> None:
        k, d = len(envs), len(self.dofs)
        qpos, qvel = (self.torch.from_numpy(self.rng.uniform(-RESET_NOISE, RESET_NOISE, (k, d)).astype(np.float32)) for _ in range(2))
        idx = self.torch.from_numpy(envs.astype(np.int64))
        self.robot.set_dofs_position(qpos, self.dofs, envs_idx=idx, zero_velocity=True)
        self.robot.set_dofs_velocity(qvel, self.dofs, envs_idx=idx)
        self.t[envs] = 0

    def reset(self) -> np.ndarray:
        self._set(np.arange(self.num_envs))
        return self.obs()

    def obs(self) -> np.ndarray:
        pos, vel = self.robot.get_dofs_position(self.dofs), self.robot.get_dofs_velocity(self.dofs)
        return self.torch.cat([pos, vel], dim=-1).reshape(self.num_envs, -1).cpu().numpy().astype(np.float32)

    def step(self, actions: np.ndarray):
        a = np.clip(np.asarray(actions, dtype=np.float32).reshape(self.num_envs, -1)[:, :1], -CTRL, CTRL)
        force = self.torch.from_numpy(np.concatenate([GEAR * a, np.zeros_like(a)], axis=1))
        for _ in range(self.frame_skip):
            self.robot.control_dofs_force(force, self.dofs)
            self.scene.step()
        obs = self.obs()
        self.t += 1
        terminated = ~np.isfinite(obs).all(axis=1) | (np.abs(obs[:, 1]) > ANGLE_LIMIT)
        truncated = (self.t >= self.episode_steps) & ~terminated
        reward = (~terminated).astype(np.float32)
        done = np.flatnonzero(terminated | truncated)
        final = obs.copy()
        if done.size:
            self._set(done)
            obs = self.obs()
        return obs, reward, terminated, truncated, final

    def details(self) -> dict[str, Any]:
        return {
            "model": "gymnasium's envs/mujoco/assets/inverted_pendulum.xml, loaded by Genesis's MJCF importer",
            "armature": f"{ARMATURE:g} on both joints, the file's default (Genesis's importer set {self.imported_armature})",
            "integrator_note": "the file's RK4 integrator is MuJoCo's option; Genesis integrates with its own",
            "control": f"force = {GEAR:g} x action clipped to [-{CTRL:g}, {CTRL:g}] on the slider (the file's motor), per physics step",
            "reward": f"1 while |hinge| <= {ANGLE_LIMIT} rad and the state is finite (Gymnasium v5)",
            "reset_noise": f"U(-{RESET_NOISE}, {RESET_NOISE}) on each position and velocity (Gymnasium v5)",
        }

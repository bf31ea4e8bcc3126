"""The logical tasks: one name per workload, the same on every backend that offers it.

Which backend offers a task, under which native id and with which physics facts, is declared by the
backend (its `Backend.tasks`), never here: gpuenv never substitutes a look-alike. Contract tests open
each real env and check that the observation and action sizes match what is declared.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from gpuenv.errors import UserError

OWN_ENV = "GPUENV_OWN_ENV"  # JSON: the user's own env `gpuenv profile` measures (worker processes inherit it)
OWN_FAMILY = "your environment"  # the family of that env's task


@dataclass(frozen=True)
class Task:
    name: str
    family: str
    description: str
    # Episodes end only at the time limit (no termination condition): a backend can then suppress
    # resets by removing the limit, and the throughput suite's `step` phase measures stepping alone.
    time_limit_only: bool = False
    # It rewards something: False for a speed scene (no reward, no episodes), where no trainer has anything
    # to learn and `gpuenv decide` predicts no training.
    rewarded: bool = True


TASKS: dict[str, Task] = {
    t.name: t
    for t in [
        Task("cartpole", "classic-control", "CartPole-v1 (classic control, no physics engine)"),
        Task("inverted_pendulum", "mujoco-classic", "InvertedPendulum: keep a pole upright on a cart, +1 per step (MuJoCo)"),
        Task("hopper", "mujoco-locomotion", "Hopper: one-legged hop forward (MuJoCo)"),
        Task("halfcheetah", "mujoco-locomotion", "HalfCheetah: run forward (MuJoCo)", time_limit_only=True),
        Task("ant", "mujoco-locomotion", "Ant: quadruped runs forward (MuJoCo)"),
        Task("humanoid", "mujoco-locomotion", "Humanoid: walk forward (MuJoCo)"),
        Task("pong", "atari", "Atari Pong, DQN-style preprocessing (84x84 gray, 4 stacked frames, frame skip 4)"),
        Task("cheetah_run", "dm_control", "DeepMind Control Suite cheetah-run", time_limit_only=True),
        Task("cartpole_balance", "dm_control", "DeepMind Control Suite cartpole-balance", time_limit_only=True),
        Task("breakout_minatar", "minatar", "MinAtar Breakout: a 10x10 Breakout on 4 binary channels (gymnax's JAX version)"),
        Task("franka_scene", "robot-scene", "A Franka Panda arm on a plane under joint position targets; no reward, no episodes (Genesis's speed benchmark)", rewarded=False),
        Task("go2_scene", "robot-scene", "A Unitree Go2 quadruped on a plane under joint position targets; no reward, no episodes (Genesis's speed benchmark)", rewarded=False),
        Task("ocean_breakout", "ocean", "PufferLib Ocean's Breakout: its own C game (paddle, ball, 6x18 bricks as 118 features), not Atari's"),
        Task("ocean_cartpole", "ocean", "PufferLib Ocean's CartPole in C: Gymnasium's CartPole equations, but a 200-step limit (v0's), "
             "reward 0 on the step that ends an episode and reset noise of 0.04, so not CartPole-v1"),
        Task("ballchase", "game-engine", "BallChase: an agent on a walled plane chases a target point (Godot physics, godot-rl protocol)"),
    ]
}


def own_env() -> dict | None:
    """The user's env that `gpuenv profile` measures, as it described it in GPUENV_OWN_ENV: its task
    name, spec (a Gymnasium id or module:factory), imports, spaces and identity; None outside a profile."""
    raw = os.environ.get(OWN_ENV, "")
    try:
        d = json.loads(raw) if raw else None
    except ValueError:
        return None
    return d if isinstance(d, dict) and isinstance(d.get("task"), str) and isinstance(d.get("spec"), str) else None


def find_task(name: str) -> Task | None:
    """The catalogue's task, or the user's own env's while `gpuenv profile` measures it; None if neither."""
    if name in TASKS:
        return TASKS[name]
    own = own_env()
    if own is not None and own["task"] == name:
        return Task(name, OWN_FAMILY, f"your environment {own['spec']}", bool(own.get("time_limit_only")))
    return None


def get_task(name: str) -> Task:
    task = find_task(name)
    if task is None:
        raise UserError(f"unknown task '{name}'; known tasks: {', '.join(TASKS)}")
    return task


def task_rank(name: str) -> int:
    """Catalogue order (cartpole, inverted_pendulum, ...) for tables; unknown tasks last."""
    order = list(TASKS)
    return order.index(name) if name in order else len(order)

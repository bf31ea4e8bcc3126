"""The logical tasks: one name per workload, the same on every backend that offers it.

Which backend offers a task, under which native id and with which physics facts, is declared by the
backend (its `Backend.tasks`), never here: gpuenv never substitutes a look-alike. Contract tests open
each real env and check that the observation and action sizes match what is declared.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuenv.errors import UserError


@dataclass(frozen=True)
class Task:
    name: str
    family: str
    description: str
    # Episodes end only at the time limit (no termination condition): a backend can then suppress
    # resets by removing the limit, and the throughput suite's `step` phase measures stepping alone.
    time_limit_only: bool = False


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
        Task("ballchase", "game-engine", "BallChase: an agent on a walled plane chases a target point (Godot physics, godot-rl protocol)"),
    ]
}


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise UserError(f"unknown task '{name}'; known tasks: {', '.join(TASKS)}") from None


def task_rank(name: str) -> int:
    """Catalogue order (cartpole, inverted_pendulum, ...) for tables; unknown tasks last."""
    order = list(TASKS)
    return order.index(name) if name in order else len(order)

"""The task catalogue: one logical task -> each backend's native env and the facts that change speed.

A backend that lacks a task simply has no entry (or an entry with `unsupported`): gpuenv never
substitutes a look-alike. The facts here are declared; contract tests open each real env and check
that the observation and action sizes match what is declared.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpuenv.errors import UserError


@dataclass(frozen=True)
class NativeTask:
    """How one backend provides a logical task."""

    env_id: str
    control_dt_s: float | None  # seconds of simulated time per agent step
    frame_skip: int  # simulator frames (or physics substeps) per agent step
    physics_dt_s: float | None  # one physics step
    episode_steps: int  # time limit in agent steps
    obs_shape: tuple[int, ...]
    action_kind: str  # "discrete" or "box"
    action_size: int  # number of discrete actions, or dimensions of the box
    notes: str = ""
    unsupported: str = ""  # non-empty: the backend has the env but gpuenv cannot run it faithfully
    max_return: float | None = None  # largest possible episode return, where known (checks PPO thresholds)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["obs_shape"] = list(self.obs_shape)
        return d


@dataclass(frozen=True)
class Task:
    name: str
    family: str
    description: str
    offers: dict[str, NativeTask]

    def native(self, backend: str) -> NativeTask:
        nt = self.offers.get(backend)
        if nt is None:
            offered = ", ".join(sorted(self.offers)) or "none"
            raise UserError(
                f"task '{self.name}' is not offered by backend '{backend}' "
                f"(offered by: {offered}); pick another task or backend (see `gpuenv list`)"
            )
        if nt.unsupported:
            raise UserError(f"task '{self.name}' on backend '{backend}' is not supported: {nt.unsupported}")
        return nt

    def runnable_on(self, backend: str) -> bool:
        nt = self.offers.get(backend)
        return nt is not None and not nt.unsupported


_MUJOCO_NOTE = "Gymnasium v5 MJCF"
_ISAAC_NOTE = (
    "Isaac Lab's own USD robot and reward (not Gymnasium's model); sizes from its env cfg, not verified here"
)
_PONG_GYM_NOTE = (
    "ALE/Pong-v5 with frameskip=1, sticky actions 0, then AtariPreprocessing(frame_skip=4, 84x84 gray, "
    "noop_max=30) and FrameStackObservation(4): the same preprocessing EnvPool's Pong-v5 does in C++"
)

TASKS: dict[str, Task] = {
    t.name: t
    for t in [
        Task(
            "cartpole",
            "classic-control",
            "CartPole-v1 (classic control, no physics engine)",
            {
                "gymnasium": NativeTask("CartPole-v1", 0.02, 1, 0.02, 500, (4,), "discrete", 2, max_return=500.0),
                "envpool": NativeTask("CartPole-v1", 0.02, 1, 0.02, 500, (4,), "discrete", 2, max_return=500.0),
                "fake": NativeTask(
                    "fake-cartpole", 0.02, 1, 0.02, 500, (4,), "discrete", 2, "test-only", max_return=500.0
                ),
                "isaaclab": NativeTask(
                    "Isaac-Cartpole-Direct-v0", 1 / 60, 2, 1 / 120, 300, (4,), "box", 1, _ISAAC_NOTE + "; continuous force"
                ),
            },
        ),
        Task(
            "inverted_pendulum",
            "mujoco-classic",
            "InvertedPendulum: keep a pole upright on a cart, +1 per step (MuJoCo)",
            {
                "gymnasium": NativeTask(
                    "InvertedPendulum-v5", 0.04, 2, 0.02, 1000, (4,), "box", 1, _MUJOCO_NOTE, max_return=1000.0
                ),
                "envpool": NativeTask(
                    "InvertedPendulum-v5", 0.04, 2, 0.02, 1000, (4,), "box", 1, _MUJOCO_NOTE, max_return=1000.0
                ),
                "brax": NativeTask(
                    "inverted_pendulum",
                    0.04,
                    2,
                    0.02,
                    1000,
                    (4,),
                    "box",
                    1,
                    "Brax's own port; dt depends on the pipeline (positional: 0.005 s x 4 = 0.02 s)",
                    max_return=1000.0,
                ),
            },
        ),
        Task(
            "hopper",
            "mujoco-locomotion",
            "Hopper: one-legged hop forward (MuJoCo)",
            {
                "gymnasium": NativeTask("Hopper-v5", 0.008, 4, 0.002, 1000, (11,), "box", 3, _MUJOCO_NOTE),
                "envpool": NativeTask("Hopper-v5", 0.008, 4, 0.002, 1000, (11,), "box", 3, _MUJOCO_NOTE),
                "brax": NativeTask("hopper", 0.008, 4, 0.002, 1000, (11,), "box", 3, "Brax's own port"),
            },
        ),
        Task(
            "halfcheetah",
            "mujoco-locomotion",
            "HalfCheetah: run forward (MuJoCo)",
            {
                "gymnasium": NativeTask("HalfCheetah-v5", 0.05, 5, 0.01, 1000, (17,), "box", 6, _MUJOCO_NOTE),
                "envpool": NativeTask("HalfCheetah-v5", 0.05, 5, 0.01, 1000, (17,), "box", 6, _MUJOCO_NOTE),
                "brax": NativeTask("halfcheetah", 0.05, 5, 0.01, 1000, (17,), "box", 6, "Brax's own port of the model"),
                "mjx": NativeTask(
                    "half_cheetah.xml", 0.05, 5, 0.01, 1000, (17,), "box", 6, "mujoco.mjx on Gymnasium's v5 MJCF"
                ),
            },
        ),
        Task(
            "ant",
            "mujoco-locomotion",
            "Ant: quadruped runs forward (MuJoCo)",
            {
                "gymnasium": NativeTask(
                    "Ant-v5", 0.05, 5, 0.01, 1000, (105,), "box", 8, _MUJOCO_NOTE + ", contact forces in obs"
                ),
                "envpool": NativeTask(
                    "Ant-v5", 0.05, 5, 0.01, 1000, (105,), "box", 8, _MUJOCO_NOTE + ", contact forces in obs"
                ),
                "brax": NativeTask(
                    "ant", 0.05, 5, 0.01, 1000, (27,), "box", 8, "Brax's own port; no contact forces in obs"
                ),
                "isaaclab": NativeTask("Isaac-Ant-v0", 1 / 60, 2, 1 / 120, 960, (60,), "box", 8, _ISAAC_NOTE),
                "mjx": NativeTask(
                    "ant.xml", 0.05, 5, 0.01, 1000, (27,), "box", 8, "mujoco.mjx on Gymnasium's v5 MJCF; obs qpos+qvel"
                ),
            },
        ),
        Task(
            "humanoid",
            "mujoco-locomotion",
            "Humanoid: walk forward (MuJoCo)",
            {
                "gymnasium": NativeTask("Humanoid-v5", 0.015, 5, 0.003, 1000, (348,), "box", 17, _MUJOCO_NOTE),
                "envpool": NativeTask("Humanoid-v5", 0.015, 5, 0.003, 1000, (348,), "box", 17, _MUJOCO_NOTE),
                "brax": NativeTask("humanoid", 0.015, 5, 0.003, 1000, (244,), "box", 17, "Brax's own port"),
                "isaaclab": NativeTask("Isaac-Humanoid-v0", 1 / 60, 2, 1 / 120, 960, (87,), "box", 21, _ISAAC_NOTE),
                "mjx": NativeTask(
                    "humanoid.xml",
                    0.015,
                    5,
                    0.003,
                    1000,
                    (45,),
                    "box",
                    17,
                    unsupported="Gymnasium's humanoid.xml uses the PGS solver, which MJX does not implement; "
                    "changing the solver would change the task",
                ),
            },
        ),
        Task(
            "pong",
            "atari",
            "Atari Pong, DQN-style preprocessing (84x84 gray, 4 stacked frames, frame skip 4)",
            {
                "gymnasium": NativeTask("ALE/Pong-v5", None, 4, None, 27000, (4, 84, 84), "discrete", 6, _PONG_GYM_NOTE),
                "envpool": NativeTask("Pong-v5", None, 4, None, 27000, (4, 84, 84), "discrete", 6),
            },
        ),
        Task(
            "cheetah_run",
            "dm_control",
            "DeepMind Control Suite cheetah-run",
            {"envpool": NativeTask("CheetahRun-v1", 0.01, 1, 0.01, 1000, (17,), "box", 6, "dm_control suite")},
        ),
        Task(
            "cartpole_balance",
            "dm_control",
            "DeepMind Control Suite cartpole-balance",
            {"envpool": NativeTask("CartpoleBalance-v1", 0.01, 1, 0.01, 1000, (5,), "box", 1, "dm_control suite")},
        ),
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

"""Genesis scenes stepped by gpuenv's harness: scene.build(n_envs) batches the envs; each step sets
the robot's joint position targets from the harness's action pool (mapped from [-1, 1] onto each
joint's range around its rest pose) and calls scene.step(). The `reused-*` variants set the pool's
first target once and then only step, as Genesis's speed benchmark does. There are no episodes (a
scene, not an RL task): nothing resets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gpuenv.backends._common import HostLoop
from gpuenv.backends.base import ActionSpace, Case, StepperFacts
from gpuenv.backends.genesis import PENDULUM
from gpuenv.backends.genesis.pendulum import CTRL, Pendulum
from gpuenv.backends.genesis.pendulum import RESET_MODE as RESET_PENDULUM
from gpuenv.backends.spec import NativeTask
from gpuenv.errors import Unsupported

RESET_MODE = "none: a scene without episodes (Genesis's speed benchmark), nothing resets"
# Franka: PD gains of Genesis's Franka examples; Go2: a standing pose, PD 20/0.5, targets within 0.25 rad of it
FRANKA_KP = (4500, 4500, 3500, 3500, 2000, 2000, 2000, 100, 100)
FRANKA_KV = (450, 450, 350, 350, 200, 200, 200, 10, 10)
GO2_LEGS = ("FR", "FL", "RR", "RL")
GO2_POSE = {"hip": 0.0, "thigh": 0.8, "calf": -1.5}
GO2_RANGE = 0.25


def _init(seed: int):
    import genesis as gs

    if not getattr(gs, "_initialized", False):
        gs.init(backend=gs.cpu, logging_level="warning", precision="32", seed=seed)
    return gs


class GenesisStepper:
    def __init__(self, case: Case, native: NativeTask) -> None:
        import torch

        gs = _init(case.seed)
        self.reused = case.variant.startswith("reused")
        self_collision = not case.variant.endswith("-noself")
        self.scene = gs.Scene(
            sim_options=gs.options.SimOptions(dt=native.physics_dt_s, substeps=1),
            rigid_options=gs.options.RigidOptions(enable_self_collision=self_collision),
            show_viewer=False,
        )
        self.scene.add_entity(gs.morphs.Plane())
        go2 = native.env_id.startswith("urdf/go2")
        if go2:
            robot = self.scene.add_entity(gs.morphs.URDF(file=native.env_id, pos=(0, 0, 0.42)))
        else:
            robot = self.scene.add_entity(gs.morphs.MJCF(file=native.env_id))
        self.scene.build(n_envs=case.num_envs)
        if go2:
            names = [f"{leg}_{part}_joint" for leg in GO2_LEGS for part in GO2_POSE]
            self.dofs = [robot.get_joint(n).dofs_idx_local[0] for n in names]
            center = torch.tensor([GO2_POSE[n.split("_")[1]] for n in names])
            half = torch.full_like(center, GO2_RANGE)
            robot.set_dofs_kp(torch.full((len(self.dofs),), 20.0), self.dofs)
            robot.set_dofs_kv(torch.full((len(self.dofs),), 0.5), self.dofs)
        else:
            self.dofs = list(range(robot.n_dofs))
            lo, hi = (x.reshape(-1, len(self.dofs))[0].cpu() for x in robot.get_dofs_limit(self.dofs))
            center, half = (lo + hi) / 2, (hi - lo) / 2
            robot.set_dofs_kp(torch.tensor(FRANKA_KP, dtype=torch.float32), self.dofs)
            robot.set_dofs_kv(torch.tensor(FRANKA_KV, dtype=torch.float32), self.dofs)
        self.robot, self.center, self.half = robot, center.float(), half.float()
        self.steps_per_chunk = case.chunk_steps
        self._targets: Any = None
        self._i = 0
        details = facts(gs, self.scene, self_collision)
        details.update(action_protocol="one target set once, then scene.step() only" if self.reused else "a fresh target every step",
                       joints=len(self.dofs))
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=(len(self.dofs),),
            action_space=ActionSpace("box", low=(-1.0,) * len(self.dofs), high=(1.0,) * len(self.dofs)),
            reset_mode=RESET_MODE,
            device="cpu",
            details=details,
            physics_steps=int(self.scene.substeps),  # one scene.step() per env step
        )

    def load_actions(self, pool: np.ndarray) -> None:
        import torch

        self._targets = self.center + self.half * torch.from_numpy(np.ascontiguousarray(pool, dtype=np.float32))
        if self.reused:  # Genesis's speed benchmark: one target, set once
            self.robot.control_dofs_position(self._targets[0], self.dofs)

    def run(self, loops: int) -> None:
        step, targets, n, i = self.scene.step, self._targets, len(self._targets), self._i
        if self.reused:
            for _ in range(loops * self.steps_per_chunk):
                step()
        else:
            control = self.robot.control_dofs_position
            for _ in range(loops * self.steps_per_chunk):
                control(targets[i % n], self.dofs)
                step()
                i += 1
        self._i = i

    def sync(self) -> None:
        """Genesis's CPU backend steps synchronously: nothing is queued."""

    def close(self) -> None:
        self.scene = None

    def keep_caches(self) -> None:
        self.scene = None
        keep_caches(self.facts)


def keep_caches(facts: StepperFacts) -> None:
    """Genesis writes the kernels Quadrants compiled to its offline cache in gs.destroy(), which it
    registers with atexit; the worker leaves with os._exit, so without this call every process compiled
    them all again. The record says `hit` where the cache held kernels and this process added none,
    `miss` where it wrote new ones, `not cached` where nothing was written (cache off or unwritable).
    Another run sharing the cache at the same time can make a hit read as a miss. The stepper has
    dropped its scene first."""
    import genesis as gs
    from quadrants.lang import impl

    root = Path(impl.get_runtime().prog.config().offline_cache_file_path) / "kernel_compilation_manager"
    before = _cache_files(root)
    gs.destroy()
    after = _cache_files(root)
    facts.details["compile_cache"] = "miss" if after - before else "hit" if before else "not cached"


def _cache_files(root: Path) -> set[tuple[str, int]]:
    """(path, mtime) of the compiled kernels in Quadrants's cache folder; a file removed meanwhile is skipped."""
    out = set()
    for p in root.glob("*") if root.is_dir() else ():
        try:
            out.add((p.name, p.stat().st_mtime_ns))
        except FileNotFoundError:
            continue
    return out


def facts(gs, scene, self_collision: bool) -> dict:
    """The solver's settings as they ran."""
    from importlib.metadata import version

    o = scene.rigid_solver._options
    out: dict[str, Any] = {
        "genesis": version("genesis-world"),
        "quadrants": version("quadrants"),
        "backend": "gs.cpu",
        "precision": "float32",  # gs.init(precision="32"); the name every MuJoCo-style record shares
        "performance_mode": False,
        "physics_timestep_s": float(scene.dt),
        "substeps": int(scene.substeps),
        "self_collision": self_collision,
    }
    for key in ("integrator", "constraint_solver", "iterations", "tolerance", "ls_iterations", "ls_tolerance",
                "max_collision_pairs", "friction_cone"):
        v = getattr(o, key, None)
        out[key] = getattr(v, "name", v) if v is None or isinstance(v, (int, float, bool)) else str(v)  # enums by name
    out["solver"] = out["constraint_solver"]  # the shared name (gpuenv.backends._mujoco.KEYS) beside Genesis's own
    try:
        out["max_contacts"] = int(scene.rigid_solver.collider.collider_info.max_contacts[None])
    except Exception:  # noqa: BLE001 - a fact for the record, never a reason to fail the case
        out["max_contacts"] = None
    return out


class PendulumStepper(HostLoop):
    """Gymnasium's InvertedPendulum on Genesis (gpuenv.backends.genesis.pendulum): the harness's actions
    are the motor's controls, finished envs reset inside the step."""

    def __init__(self, case: Case, native: NativeTask) -> None:
        if case.variant.startswith("reused"):
            raise Unsupported(f"genesis:{case.variant} sets one target once (Genesis's speed-benchmark protocol for its scenes); "
                              "inverted_pendulum is an RL task whose episodes end within steps: run genesis:random or random-noself")
        self.env = open_pendulum(case.variant, native, case.num_envs, case.seed)
        self.steps_per_chunk = case.chunk_steps
        details = {**facts(self.env.gs, self.env.scene, self.env.self_collision), **self.env.details()}
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=(4,),
            action_space=ActionSpace("box", low=(-CTRL,), high=(CTRL,)),
            reset_mode=RESET_PENDULUM,
            device="cpu",
            details=details,
            physics_steps=self.env.frame_skip * int(self.env.scene.substeps),  # frame_skip scene.step()s per env step
        )

    def close(self) -> None:
        self.env = None

    def keep_caches(self) -> None:
        self.env = None
        keep_caches(self.facts)


def open_pendulum(variant: str, native: NativeTask, num_envs: int, seed: int) -> Pendulum:
    """The batched InvertedPendulum of a case; self-collision as the variant says (two bodies: nothing to collide)."""
    gs = _init(seed)
    assert native.physics_dt_s is not None
    return Pendulum(gs, num_envs, seed, native.physics_dt_s, native.frame_skip, native.episode_steps,
                    self_collision=not variant.endswith("-noself"))


def open(case: Case, native: NativeTask) -> GenesisStepper | PendulumStepper:  # noqa: A001 - the adapter contract
    if native.env_id == PENDULUM:
        return PendulumStepper(case, native)
    return GenesisStepper(case, native)

"""Isaac Lab 3.x: its direct and manager-based tasks, stepped with torch actions on the sim device.

Runs in the backend's own Python 3.12 environment (docker/locks/isaaclab.txt). Physics is chosen by
Isaac Lab's presets (`parse_env_cfg(..., overrides=["physics=<variant>"])`), and
`isaaclab.app.launch_simulation(cfg, args)` starts Isaac Sim's Kit only where the config needs it
(Isaac Sim PhysX, Kit renderers): with `newton_mjwarp` nothing is launched ("kit-less") and the
simulation runs on the CPU where there is no GPU (Newton skips CUDA graphs there).

Isaac Lab 2.x (NVIDIA's Isaac Sim 5.1 image, gpuenv/isaaclab-isaacsim) has no launch_simulation:
there Kit is launched with AppLauncher inside the imports stage, ids take -v0, and only
isaacsim_physx runs. That path is NOT VERIFIED (no machine here has Isaac Sim and an RTX GPU).

Startup comes in Isaac Lab's own stages, timed by the harness (an adapter never reads a clock), the
same ones `isaaclab benchmark runtime` reports: imports, task_config, launch, scene_build (gym.make +
reset), first_step. Warp compiles its kernels into a persistent cache (gpuenv's, see worker_env):
records say whether this process found them there (warm) or compiled some (cold).

Stepping follows `isaaclab benchmark runtime`: under torch.inference_mode(), actions in [-1, 1]
(Isaac Lab's tasks scale them), auto-reset inside step(). The actions come from gpuenv's shared
pool, moved to the sim device once, instead of sampled per step outside the timed region.
"""

from __future__ import annotations

import os
from typing import Any

from gpuenv.backends.base import ActionSpace, Case, StepperFacts
from gpuenv.backends.isaaclab import assets, warp_cache
from gpuenv.backends.spec import NativeTask

RESET_MODE = "Isaac Lab auto-reset inside step(): terminated/truncated envs reset in the same step on the sim device"
DEVICE_ENV = "GPUENV_ISAACLAB_DEVICE"  # default: cuda:0 where torch sees a GPU, else cpu


def sim_device(torch) -> str:
    return os.environ.get(DEVICE_ENV) or ("cuda:0" if torch.cuda.is_available() else "cpu")


def physics_facts(cfg, variant: str) -> dict[str, Any]:
    """What the record says about the physics: preset, solver, dt, decimation."""
    physics = getattr(cfg.sim, "physics", None)
    solver = getattr(physics, "solver_cfg", None)
    facts: dict[str, Any] = {
        "physics_preset": variant,
        "physics_cfg": type(physics).__name__ if physics is not None else "none",
        "sim_dt_s": float(cfg.sim.dt),
        "decimation": int(cfg.decimation),
        "control_dt_s": float(cfg.sim.dt) * int(cfg.decimation),
        "episode_length_s": float(cfg.episode_length_s),
    }
    if solver is not None:
        held = {k: getattr(solver, k) for k in ("solver_type", "solver", "integrator", "iterations", "ls_iterations") if hasattr(solver, k)}
        # Newton's solver config as Isaac Lab holds it, and its MuJoCo-style settings under the names every
        # MuJoCo-based record shares (gpuenv.backends._mujoco.KEYS)
        facts["solver_cfg"] = held
        facts.update({k: held[k] for k in ("solver", "integrator", "iterations", "ls_iterations") if k in held})
    if physics is not None and hasattr(physics, "num_substeps"):
        facts["num_substeps"] = int(physics.num_substeps)
    facts["physics_timestep_s"] = float(cfg.sim.dt) / facts.get("num_substeps", 1)  # one physics (sub)step
    return facts


class IsaacLabStepper:
    def __init__(self, launched, env, cfg, obs, case: Case, native: NativeTask, torch, details: dict) -> None:
        self.launched, self.env, self.torch = launched, env, torch
        u = env.unwrapped
        self.device = str(u.device)
        act_dim = int(u.single_action_space.shape[0])
        policy_obs = obs["policy"] if isinstance(obs, dict) else obs
        self._actions: Any = None
        self._i = 0
        self.chunk_steps = case.chunk_steps
        on_gpu = self.device.startswith("cuda")
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=tuple(int(x) for x in policy_obs.shape[1:]),
            # Isaac Lab's action spaces are unbounded boxes; its tasks scale actions in [-1, 1].
            action_space=ActionSpace("box", low=(-1.0,) * act_dim, high=(1.0,) * act_dim),
            reset_mode=RESET_MODE,
            device=f"gpu:{torch.cuda.get_device_name(0)}" if on_gpu else "cpu",
            # decimation physics steps per env step, each of num_substeps solver substeps where the preset has them
            physics_steps=int(details.get("decimation", 1)) * int(details.get("num_substeps", 1)),
            details={
                **details,
                "sim_device": self.device,
                "sync": "torch.cuda.synchronize() at the end of each timed value" if on_gpu
                else "none needed: the CPU simulation returns when the step is done",
            },
        )

    def load_actions(self, pool) -> None:
        self._actions = self.torch.as_tensor(pool, device=self.device)

    def step(self, action) -> None:
        with self.torch.inference_mode():
            self.env.step(action)

    def run(self, loops: int) -> None:
        pool = self._actions.shape[0]
        step = self.env.step
        with self.torch.inference_mode():
            for _ in range(loops * self.chunk_steps):
                step(self._actions[self._i % pool])
                self._i += 1

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def close(self) -> None:
        self.env.close()
        self.launched.__exit__(None, None, None)


def open_stages(case: Case, native: NativeTask):
    """[(stage name, callable)]: the harness calls them in order and times each; the last returns
    the stepper. Isaac Lab is imported in the first stage, after the asset root is set."""
    state: dict[str, Any] = {}

    def imports():
        state["details"] = assets.ensure()  # ISAACSIM_ASSET_ROOT before isaaclab reads it
        state["kernels_before"] = warp_cache.count()
        import gymnasium
        import torch

        if int(_version("isaaclab").split(".")[0] or 0) < 3:  # 2.x (gpuenv/isaaclab-isaacsim, NOT VERIFIED): Kit before isaaclab_tasks
            state["legacy"] = _launch_kit_2x(case, torch)
        else:
            from isaaclab.app import launch_simulation
        import isaaclab
        import isaaclab_tasks  # noqa: F401 - registers the Isaac-* gym ids
        from isaaclab_tasks.utils import parse_env_cfg

        state.update(gym=gymnasium, torch=torch, parse=parse_env_cfg, isaaclab=isaaclab)
        if "legacy" not in state:
            state["launch"] = launch_simulation

    def task_config():
        from gpuenv.gpu import gpu_guard

        device = state["device"] = sim_device(state["torch"])
        state["details"].update(gpu_guard(device.startswith("cuda"), f"Isaac Lab would simulate on '{device}', not the GPU "
                                          "this image is for (torch sees no CUDA device)"))
        if "legacy" in state:  # 2.x: -v0 ids, PhysX only, no presets
            state["env_id"] = f"{native.env_id}-v0"
            cfg = state["parse"](state["env_id"], device=device, num_envs=case.num_envs)
        else:
            state["env_id"] = native.env_id
            cfg = state["parse"](native.env_id, device=device, num_envs=case.num_envs, overrides=[f"physics={case.variant}"])
        cfg.seed = case.seed
        state["cfg"] = cfg

    def launch():
        if "legacy" in state:
            state["launched"] = state["legacy"]  # Kit already runs (imports stage)
            return
        launched = state["launch"](state["cfg"], {"headless": True, "device": state["device"]})
        launched.__enter__()  # Kit where the config needs it; kit-less presets start nothing
        state["launched"] = launched

    def scene_build():
        env = state["gym"].make(state["env_id"], cfg=state["cfg"])
        state["env"] = env
        state["obs"], _ = env.reset(seed=case.seed)

    def first_step():
        torch, env = state["torch"], state["env"]
        u = env.unwrapped
        details = {
            "isaaclab": getattr(state["isaaclab"], "__version__", None) or _version("isaaclab"),
            **physics_facts(state["cfg"], case.variant),
            **state["details"],
            "kit": "not launched (kit-less)" if _kit_absent() else "Isaac Sim Kit launched",
        }
        stepper = IsaacLabStepper(state["launched"], env, state["cfg"], state["obs"], case, native, torch, details)
        stepper.step(torch.zeros((u.num_envs, u.single_action_space.shape[0]), device=stepper.device))
        stepper.sync()
        compiled = warp_cache.count() - state["kernels_before"]
        stepper.facts.details["warp_kernel_cache"] = warp_cache.describe(state["kernels_before"], compiled)
        stepper.facts.details["compile_cache"] = "miss" if compiled > 0 else "hit"
        return stepper

    return [("imports", imports), ("task_config", task_config), ("launch", launch), ("scene_build", scene_build),
            ("first_step", first_step)]


class _Kit2x:
    """Isaac Lab 2.x's AppLauncher app, closed like launch_simulation's context."""

    def __init__(self, app) -> None:
        self.app = app

    def __exit__(self, *exc) -> None:
        self.app.close()


def _launch_kit_2x(case: Case, torch) -> _Kit2x:
    from gpuenv.errors import UserError

    if case.variant != "isaacsim_physx":
        raise UserError(f"Isaac Lab 2.x has no physics presets: it runs isaacsim_physx only (asked: {case.variant})")
    from isaaclab.app import AppLauncher  # 2.x only: 3.x's AppLauncher is deprecated and forces Kit

    return _Kit2x(AppLauncher(headless=True, device=sim_device(torch)).app)


def _version(dist: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _kit_absent() -> bool:
    import sys

    return "omni.kit.app" not in sys.modules and "isaacsim" not in sys.modules


def open(case: Case, native: NativeTask) -> IsaacLabStepper:  # noqa: A001 - the adapter contract
    stepper = None
    for _, stage in open_stages(case, native):
        stepper = stage() or stepper
    assert stepper is not None  # the last stage builds it
    return stepper

"""Isaac Lab 2.3 (Isaac Sim 5.1, Python 3.11): GPU-parallel PhysX envs, stepped with torch actions.

NOT VERIFIED: written against Isaac Lab's own source (scripts/benchmarks/benchmark_non_rl.py,
scripts/environments/random_agent.py, isaaclab.app.AppLauncher, isaaclab_tasks.utils.parse_env_cfg);
no machine available to this project has Isaac Sim and an RTX GPU. Its tests skip where Isaac Lab is
absent, and its records say which Isaac Lab and Isaac Sim versions produced them.

Isaac Sim's app must be launched before any other isaaclab / omni / pxr module is imported, so this
module imports nothing from Isaac Lab at top level. Startup comes in three stages, which the harness
times (an adapter never reads a clock): app launch, imports, scene build (gym.make + reset).
"""

from __future__ import annotations

import os
from typing import Any

from gpuenv.backends.base import ActionSpace, Case, StepperFacts
from gpuenv.backends.spec import NativeTask

RESET_MODE = "Isaac Lab auto-reset inside step(): terminated/truncated envs reset in the same step on the GPU"
DEVICE_ENV = "GPUENV_ISAACLAB_DEVICE"  # default cuda:0


class IsaacLabStepper:
    def __init__(self, app, env, cfg, obs, case: Case, native: NativeTask, modules: dict) -> None:
        self.app, self.env = app, env
        torch = self.torch = modules["torch"]
        u = env.unwrapped
        self.device = u.device
        act_dim = int(u.single_action_space.shape[0])
        policy_obs = obs["policy"] if isinstance(obs, dict) else obs
        self._actions: Any = None
        self._i = 0
        self.chunk_steps = case.chunk_steps
        on_gpu = str(self.device).startswith("cuda")
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=tuple(int(x) for x in policy_obs.shape[1:]),
            # Isaac Lab's action spaces are unbounded boxes; its tasks scale actions in [-1, 1].
            action_space=ActionSpace("box", low=(-1.0,) * act_dim, high=(1.0,) * act_dim),
            reset_mode=RESET_MODE,
            device=f"gpu:{torch.cuda.get_device_name(0)}" if on_gpu else str(self.device),
            details={
                "isaaclab": getattr(modules["isaaclab"], "__version__", "unknown"),
                "isaacsim": modules["isaacsim_version"],
                "physics": "PhysX (GPU pipeline)" if on_gpu else "PhysX (CPU)",
                "sim_dt_s": float(cfg.sim.dt),
                "decimation": int(cfg.decimation),
                "control_dt_s": float(cfg.sim.dt) * int(cfg.decimation),
                "episode_length_s": float(cfg.episode_length_s),
                "sync": "torch.cuda.synchronize() at the end of each timed value",
            },
        )

    def load_actions(self, pool) -> None:
        self._actions = self.torch.as_tensor(pool, device=self.device)

    def run(self, loops: int) -> None:
        pool = self._actions.shape[0]
        step = self.env.step
        for _ in range(loops * self.chunk_steps):
            step(self._actions[self._i % pool])
            self._i += 1

    def sync(self) -> None:
        if str(self.device).startswith("cuda"):
            self.torch.cuda.synchronize()

    def close(self) -> None:
        self.env.close()
        self.app.close()


def open_stages(case: Case, native: NativeTask):
    """[(stage name, callable)]: the harness calls them in order and times each; the last returns
    the stepper."""
    device = os.environ.get(DEVICE_ENV, "cuda:0")
    state: dict = {}

    def app_launch():
        from isaaclab.app import AppLauncher

        state["app"] = AppLauncher(headless=True, device=device).app

    def imports():
        import gymnasium
        import isaaclab
        import isaaclab_tasks  # noqa: F401 - registers the Isaac-* gym ids
        import torch
        from isaaclab_tasks.utils import parse_env_cfg

        try:
            import isaacsim

            version = getattr(isaacsim, "__version__", "unknown")
        except ImportError:
            version = "not importable"
        state.update(gym=gymnasium, parse_env_cfg=parse_env_cfg, modules={"torch": torch, "isaaclab": isaaclab, "isaacsim_version": version})

    def scene_build():
        cfg = state["parse_env_cfg"](native.env_id, device=device, num_envs=case.num_envs)
        cfg.seed = case.seed
        env = state["gym"].make(native.env_id, cfg=cfg)
        obs, _ = env.reset(seed=case.seed)
        state["modules"]["torch"].cuda.synchronize()
        return IsaacLabStepper(state["app"], env, cfg, obs, case, native, state["modules"])

    return [("app_launch", app_launch), ("imports", imports), ("scene_build", scene_build)]


def open(case: Case, native: NativeTask) -> IsaacLabStepper:  # noqa: A001 - the adapter contract
    stepper = None
    for _, stage in open_stages(case, native):
        stepper = stage() or stepper
    assert stepper is not None  # the last stage builds it
    return stepper

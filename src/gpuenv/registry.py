"""Backend name -> adapter, resolved lazily.

Availability is decided with `importlib.util.find_spec`, which finds a module without importing it:
listing backends, or running one, never imports another backend's libraries.
Adding a backend = one adapter file + one entry here + one optional-dependency extra.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field

from gpuenv.errors import BackendUnavailable, UserError


@dataclass(frozen=True)
class BackendInfo:
    name: str
    module: str  # adapter module, imported only when the backend runs
    requires: tuple[str, ...]  # top-level modules that must be importable
    extra: str  # pip extra that installs them
    variants: tuple[str, ...]  # the first one is the default
    description: str
    device: str = "cpu"  # "cpu" or "gpu": where its simulator steps on a GPU machine
    hidden: bool = False  # test-only backends: runnable by name, never listed or auto-selected
    variant_notes: dict[str, str] = field(default_factory=dict)
    min_envs: dict[str, int] = field(default_factory=dict)  # variant -> smallest num_envs it can run
    install_hint: str = ""  # how to get it, where a pip extra is not the way

    def missing(self) -> list[str]:
        return [m for m in self.requires if importlib.util.find_spec(m) is None]

    def unavailable_reason(self) -> str | None:
        missing = self.missing()
        if not missing:
            return None
        how = self.install_hint or f"pip install 'gpuenv[{self.extra}]'"
        return f"{self.name} is not installed ({', '.join(missing)} missing): {how}"

    def load(self):
        """Import the adapter module; it exposes `open(case, native) -> Stepper`."""
        reason = self.unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        return importlib.import_module(self.module)


@dataclass(frozen=True)
class Registry:
    backends: dict[str, BackendInfo]

    def get(self, name: str) -> BackendInfo:
        try:
            return self.backends[name]
        except KeyError:
            known = ", ".join(b.name for b in self.visible())
            raise UserError(f"unknown backend '{name}'; known backends: {known}") from None

    def visible(self) -> list[BackendInfo]:
        return [b for b in self.backends.values() if not b.hidden]

    def parse(self, selector: str) -> tuple[BackendInfo, str | None]:
        """'envpool' -> (envpool, None); 'envpool:async' -> (envpool, 'async'). Validates the variant."""
        name, _, variant = selector.partition(":")
        info = self.get(name)
        if variant and variant not in info.variants:
            raise UserError(
                f"unknown variant '{variant}' of backend '{name}'; variants: {', '.join(info.variants)}"
            )
        return info, variant or None


DEFAULT_REGISTRY = Registry(
    {
        b.name: b
        for b in [
            BackendInfo(
                "gymnasium",
                "gpuenv.backends.gymnasium",
                ("gymnasium", "stable_baselines3", "mujoco", "ale_py"),
                "gymnasium",
                ("subproc", "dummy", "sync"),
                "CPU baseline: Gymnasium envs in SB3 SubprocVecEnv / DummyVecEnv or Gymnasium SyncVectorEnv",
                variant_notes={
                    "subproc": "SB3 SubprocVecEnv, one process per env (the baseline speedups are quoted against)",
                    "dummy": "SB3 DummyVecEnv, all envs in one process, stepped in turn",
                    "sync": "Gymnasium SyncVectorEnv (next-step autoreset)",
                },
            ),
            BackendInfo(
                "envpool",
                "gpuenv.backends.envpool",
                ("envpool",),
                "envpool",
                ("sync", "async"),
                "EnvPool: C++ thread pool of envs",
                variant_notes={
                    "sync": "batch_size = num_envs",
                    "async": "send/recv with batch_size = num_envs / 2",
                },
                min_envs={"async": 2},
            ),
            BackendInfo(
                "brax",
                "gpuenv.backends.brax",
                ("brax", "jax"),
                "brax",
                ("generalized", "positional", "spring", "mjx"),
                "Brax envs, vmapped and stepped in a jit-compiled lax.scan chunk",
                device="gpu",
                variant_notes={v: f"Brax physics pipeline '{v}'" for v in ("generalized", "positional", "spring", "mjx")},
            ),
            BackendInfo(
                "mjx",
                "gpuenv.backends.mjx",
                ("mujoco", "jax", "gymnasium"),
                "mjx",
                ("jax",),
                "mujoco.mjx on Gymnasium's MJCF models, vmapped in a jit-compiled lax.scan chunk",
                device="gpu",
                variant_notes={"jax": "MJX implementation 'jax' (runs on CPU and GPU)"},
            ),
            BackendInfo(
                "isaaclab",
                "gpuenv.backends.isaaclab",
                ("isaaclab", "isaaclab_tasks", "isaacsim"),
                "isaaclab",
                ("physx",),
                "Isaac Lab 2.3 on Isaac Sim 5.1: GPU PhysX envs stepped with torch actions (not verified here)",
                device="gpu",
                variant_notes={"physx": "PhysX GPU pipeline, headless app, torch.cuda.synchronize per value"},
                install_hint="it needs Isaac Sim and an RTX-class GPU: use the gpuenv/isaaclab image (make bench-isaac)",
            ),
            BackendInfo(
                "fake",
                "gpuenv.backends.fake",
                (),
                "test",
                ("ok", "raise", "segfault", "hang", "exit"),
                "test-only backend that behaves or fails on purpose",
                hidden=True,
            ),
        ]
    }
)

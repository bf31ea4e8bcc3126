"""Godot 4 adapter: the godot backend's pool (gpuenv launches Godot, godot-rl's client talks to it)
with Godot 4, the Godot 4 project and the variant's physics engine.

Each pool runs a private copy of the project (a few KB; the godot backend's Launch.copy): Godot 4
writes its `.godot/` cache into the project folder, which may be read-only (an image), and the
physics engine is a project setting, written into the copy's override.cfg. The copy is removed
when the pool closes.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpuenv.backends.base import Case
from gpuenv.backends.godot.adapter import GodotPool, GodotStepper, Launch
from gpuenv.backends.godot.ppo import vecenv_of
from gpuenv.backends.godot4 import ENGINES
from gpuenv.backends.godot4.runtime import INSTALL, PROGRAM
from gpuenv.backends.spec import NativeTask
from gpuenv.errors import UserError

PROJECT = Path(__file__).resolve().parent / "project"


def split(variant: str) -> tuple[str, str]:
    """'jolt-uncapped-x5' -> ('jolt', 'uncapped-x5'): the engine, and the pacing the godot backend reads."""
    m = re.fullmatch(r"(godotphysics2d|godotphysics|jolt)-(.+)", variant)
    if not m:
        raise UserError(f"godot4 variant {variant!r}: write ENGINE-PACING, ENGINE one of {', '.join(ENGINES)}, "
                        "PACING realtime or uncapped (optionally -xSPEEDUP, -arACTION_REPEAT)")
    return m.group(1), m.group(2)


class Godot4Pool(GodotPool):
    def __init__(self, variant: str, num_envs: int, seed: int) -> None:
        engine, pacing = split(variant)
        setting, dims = ENGINES[engine]
        override = f'[physics]\n\n{dims}d/physics_engine="{setting}"\n' if dims == 3 else ""
        super().__init__(pacing, num_envs, seed, Launch(PROGRAM, PROJECT, (f"--dims={dims}",), INSTALL, copy=override))
        if self.physics_engine != setting:
            self.close()
            raise UserError(f"Godot {self.version} ran {self.physics_engine!r}, not {setting!r}: this Godot build lacks it "
                            "(Jolt is built into Godot 4.4 and later)")


def open(case: Case, native: NativeTask) -> GodotStepper:  # noqa: A001 - the adapter contract
    return GodotStepper(case, native, Godot4Pool(case.variant, case.num_envs, case.seed))


def make_vecenv(variant: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record): the godot backend's GodotVecEnv on a Godot 4 pool."""
    return vecenv_of(Godot4Pool(variant, num_envs, seed), native)

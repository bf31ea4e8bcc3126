"""MuJoCo's solver settings under one set of names, for every MuJoCo-based backend's record (MJX,
Playground, Brax's MJX pipeline, Gymnasium's and EnvPool's MuJoCo tasks), and the settings sets the
variants run with, each with its source.

Under `vmap` MJX runs every line-search iteration for every env and the solver loop until the
slowest env converges, so a model's solver settings decide its speed more than anything else: a
number without them is not comparable with another. The record's `what.details` carries the keys of
`options()`; `show` and the README name the variant's settings set.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco

# The keys every MuJoCo-based record carries in what.details (names shared across backends).
KEYS = ("physics_timestep_s", "integrator", "solver", "cone", "iterations", "ls_iterations", "tolerance",
        "eulerdamp", "contacts", "precision")


@dataclass(frozen=True)
class SolverSettings:
    """A set of solver settings a variant runs with, and where its values come from."""

    name: str
    solver: str  # "newton", "cg"
    iterations: int
    ls_iterations: int
    eulerdamp: bool
    source: str

    def apply(self, model: mujoco.MjModel) -> None:
        """Set these on `model`, in place (the integrator and timestep stay the model's)."""
        model.opt.solver = {"newton": mujoco.mjtSolver.mjSOL_NEWTON, "cg": mujoco.mjtSolver.mjSOL_CG}[self.solver]
        model.opt.iterations = self.iterations
        model.opt.ls_iterations = self.ls_iterations
        set_eulerdamp(model, self.eulerdamp)


# Brax's MJX configurations (brax/envs/ant.py and humanoid.py, backend="mjx", brax 0.14): what Brax and
# MuJoCo Playground train with on accelerators. mjx-testspeed's defaults (MuJoCo's own benchmark) are
# the same counts with CG: cg, 1 iteration, 4 line-search iterations.
BRAX_MJX = SolverSettings("Brax's MJX settings", "newton", 1, 4, False,
                          "brax/envs/ant.py, humanoid.py (backend='mjx'): Newton, 1 iteration, 4 line-search, Euler damping off")


def set_eulerdamp(model: mujoco.MjModel, on: bool) -> None:
    bit = int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    model.opt.disableflags = (model.opt.disableflags & ~bit) if on else (model.opt.disableflags | bit)


def options(opt, precision: str) -> dict:
    """Solver options as they ran, under KEYS: `opt` is a MjModel's (MuJoCo's C engine) or an MJX
    model's (a Brax System's: its enums and arrays read the same). precision: "float32" (JAX's
    default, x64 off) or "float64" (MuJoCo's C engine; JAX with x64)."""
    flags = int(opt.disableflags)
    return {
        "physics_timestep_s": float(opt.timestep),
        "integrator": mujoco.mjtIntegrator(int(opt.integrator)).name.removeprefix("mjINT_").lower(),
        "solver": mujoco.mjtSolver(int(opt.solver)).name.removeprefix("mjSOL_").lower(),
        "cone": mujoco.mjtCone(int(opt.cone)).name.removeprefix("mjCONE_").lower(),
        "iterations": int(opt.iterations),
        "ls_iterations": int(opt.ls_iterations),
        "tolerance": float(opt.tolerance),
        "eulerdamp": not flags & int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP),
        "contacts": not flags & int(mujoco.mjtDisableBit.mjDSBL_CONTACT),
        "precision": precision,
    }


def file_options(path: str) -> dict:
    """options() of the model file a C-MuJoCo backend loads (Gymnasium's, EnvPool's), float64. A file
    this MuJoCo no longer compiles (EnvPool's hopper and walker2d use global coordinates, which MuJoCo
    2.3.4 dropped; EnvPool runs its own MuJoCo build) is read as XML: its <option> and <flag> over
    MuJoCo's defaults, which is what its engine compiles."""
    try:
        return options(mujoco.MjModel.from_xml_path(path).opt, "float64")
    except ValueError:
        return {**options(_xml_option(path), "float64"), "options_read": "from the file's <option> over MuJoCo's defaults (not compiled here)"}


def _xml_option(path: str) -> mujoco.MjOption:
    import xml.etree.ElementTree as ET

    opt = mujoco.MjOption()
    node = ET.parse(path).getroot().find("option")
    if node is None:
        return opt
    enums = {"integrator": (mujoco.mjtIntegrator, "mjINT_"), "solver": (mujoco.mjtSolver, "mjSOL_"), "cone": (mujoco.mjtCone, "mjCONE_")}
    for key, value in node.attrib.items():
        if key in enums:
            enum, prefix = enums[key]
            setattr(opt, key, int(getattr(enum, prefix + value.upper())))
        elif key in ("timestep", "tolerance"):
            setattr(opt, key, float(value))
        elif key in ("iterations", "ls_iterations"):
            setattr(opt, key, int(value))
    flags = node.find("flag")
    if flags is not None and flags.get("eulerdamp") == "disable":
        opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    if flags is not None and flags.get("contact") == "disable":
        opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    return opt


def jax_precision() -> str:
    import jax

    return "float64" if jax.config.jax_enable_x64 else "float32"  # type: ignore[attr-defined]

"""Local stand-ins for the Isaac Lab assets the gpuenv tasks load, made from what the installed
wheels ship: no download at run time, nothing committed that this project did not write.

Isaac Lab resolves its robot and ground-plane USD files under ISAACSIM_ASSET_ROOT (by default
NVIDIA's remote storage, out of reach from many machines). Where that variable is unset, the worker
points it at a folder built here once per newton version:

- Isaac/IsaacLab/Robots/Classic/Cartpole/cartpole.usd: newton's examples/assets/
  cartpole_single_pendulum.usda (its header: a physics-only copy of Isaac Lab's cartpole.usd, same
  joint names), with its defaultPrim set to the `cartpole` prim it defines (the file names another).
- Isaac/Robots/IsaacSim/Ant/ant_instanceable.usd: newton's examples/assets/ant.usda.
- Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda: a
  ground plane written here (an Xform with a collision Plane, the prim Isaac Lab's spawner looks for).

USD reads text layers under a .usd name. Records say "substitute assets from the newton wheel" and
the newton version; a run with ISAACSIM_ASSET_ROOT set by the user records that root instead.
Humanoid has no substitute (newton's humanoid is a different model: Isaac Lab's joint names fail).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gpuenv.cache import writable

ROOT_ENV = "ISAACSIM_ASSET_ROOT"
SOURCE = "substitute assets from the newton wheel"

CARTPOLE = "Isaac/IsaacLab/Robots/Classic/Cartpole/cartpole.usd"
ANT = "Isaac/Robots/IsaacSim/Ant/ant_instanceable.usd"
GROUND = "Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda"

GROUND_PLANE_USDA = """#usda 1.0
(
    defaultPrim = "GroundPlane"
    metersPerUnit = 1
    upAxis = "Z"
)

def Xform "GroundPlane"
{
    def Plane "CollisionPlane" (
        prepend apiSchemas = ["PhysicsCollisionAPI"]
    )
    {
        uniform token axis = "Z"
        double length = 100
        double width = 100
        uniform token purpose = "guide"
    }
}
"""


def cache_root() -> Path:
    return writable("isaaclab-assets")


def newton_assets() -> tuple[Path, str]:
    """(newton's examples/assets folder, newton's version)."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("newton")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("newton is not installed: its wheel ships the substitute assets")
    folder = Path(next(iter(spec.submodule_search_locations))) / "examples" / "assets"
    return folder, importlib.metadata.version("newton")


def with_default_prim(usda: str, prim: str) -> str:
    """The layer with its defaultPrim metadata naming `prim` (which the layer must define)."""
    if not re.search(rf'^def \w+ "{re.escape(prim)}"', usda, re.M):
        raise ValueError(f"the layer defines no top-level prim {prim!r}")
    out, n = re.subn(r'defaultPrim = "[^"]*"', f'defaultPrim = "{prim}"', usda, count=1)
    if n != 1:
        raise ValueError("the layer has no defaultPrim metadata")
    return out


def build(root: Path, source: Path) -> None:
    """Write the stand-in asset tree under root from newton's asset folder."""
    files = {
        CARTPOLE: with_default_prim((source / "cartpole_single_pendulum.usda").read_text(), "cartpole"),
        ANT: (source / "ant.usda").read_text(),
        GROUND: GROUND_PLANE_USDA,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)


def ensure() -> dict[str, str]:
    """Set ISAACSIM_ASSET_ROOT (unless the user did) to the local stand-ins, built if missing.
    Returns the record's facts about the assets. Call before importing isaaclab (it reads the
    variable at import)."""
    if os.environ.get(ROOT_ENV):
        return {"asset_source": f"{ROOT_ENV}={os.environ[ROOT_ENV]} (set by the user)"}
    source, version = newton_assets()
    root = cache_root() / f"newton-{version}"
    if not all((root / rel).is_file() for rel in (CARTPOLE, ANT, GROUND)):
        build(root, source)
    os.environ[ROOT_ENV] = str(root)
    return {"asset_source": f"{SOURCE} {version} (cartpole_single_pendulum.usda, ant.usda) and a ground plane written by gpuenv",
            "asset_root": str(root)}

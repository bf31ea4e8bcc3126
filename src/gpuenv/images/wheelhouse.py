"""The wheelhouse for a GPU machine without internet (`make gpu-wheels`, read by `make gpu-check`).

Such a machine (a lent cloud GPU, a cluster node) has Python 3.12 with JAX and torch built for its
CUDA, and nothing can be installed from an index there. What gpuenv's GPU parts need beyond that is
downloaded here as wheels for that Python, at the versions and hashes of the brax image's lock
(docker/locks/brax.txt, which holds every package the brax and mjx images run), without their
dependencies: the machine's own JAX, jaxlib, flax, optax, numpy and torch are used as they are.
gpuenv itself is not a wheel: it runs from the checkout that travels to the machine (PYTHONPATH=src),
where its suites and claims are, at the commit being checked.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpuenv.errors import UserError
from gpuenv.images.catalogue import DOCKER, LOCKS

# What such a machine lacks, one distribution per line (how the list was found is said there).
WANTED = DOCKER / "gpu-wheels.txt"
SOURCE_LOCK = LOCKS / "brax.txt"
PYTHON = "3.12"
# pip matches manylinux tags exactly: every tag these wheels are published under, newest first.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
LIMIT_BYTES = 50 * 10**6


@dataclass(frozen=True)
class Wheelhouse:
    dest: Path
    wheels: tuple[Path, ...]

    @property
    def bytes(self) -> int:
        return sum(p.stat().st_size for p in self.wheels)


def wanted() -> tuple[str, ...]:
    """The distributions docker/gpu-wheels.txt names."""
    lines = (line.split("#", 1)[0].strip() for line in WANTED.read_text().splitlines())
    return tuple(line.lower() for line in lines if line)


def requirements(lock_text: str, names: tuple[str, ...] | None = None) -> str:
    """The lock's entries (pin and every hash) for `names` (default: wanted()); a name the lock lacks is a UserError."""
    wanted_names = {n.lower() for n in (names if names is not None else wanted())}
    kept: list[str] = []
    found: set[str] = set()
    keep = False
    for line in lock_text.splitlines(keepends=True):
        m = re.match(r"^([A-Za-z0-9_.-]+)==", line)
        if m:
            name = m.group(1).lower().replace("_", "-")
            keep = name in wanted_names
            found |= {name} if keep else set()
        if keep and not line.lstrip().startswith("#"):
            kept.append(line)
    missing = sorted(wanted_names - found)
    if missing:
        raise UserError(f"{SOURCE_LOCK.name} pins no {', '.join(missing)}; regenerate it with `make locks` or drop the name from "
                        f"{WANTED.relative_to(DOCKER.parent)}")
    return "".join(kept)


def download(dest: Path) -> Wheelhouse:
    """Download the wheels into `dest` (hash-checked, Python 3.12 manylinux x86-64, no dependencies);
    a wheelhouse over LIMIT_BYTES is a UserError (it travels with every call to the machine)."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        req, fresh = Path(tmp) / "gpu-wheels.txt", Path(tmp) / "wheels"
        req.write_text(requirements(SOURCE_LOCK.read_text()))
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes", "--only-binary=:all:",
               "--python-version", PYTHON, "--implementation", "cp", *(a for p in PLATFORMS for a in ("--platform", p)),
               "-d", str(fresh), "-r", str(req)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            tail = [line for line in (r.stderr or r.stdout).splitlines() if line.strip() and not line.startswith("WARNING")][-1:]
            raise UserError(f"pip could not download the GPU wheels into {dest}: {tail[0] if tail else f'exit {r.returncode}'}; "
                            "a package index must be reachable from here")
        for old in dest.glob("*.whl"):  # wheels of earlier versions would stop the install there (two of one package)
            old.unlink()
        for w in fresh.glob("*.whl"):
            shutil.move(str(w), dest / w.name)
    house = Wheelhouse(dest, tuple(sorted(dest.glob("*.whl"))))
    if house.bytes > LIMIT_BYTES:
        raise UserError(f"the wheelhouse {dest} holds {house.bytes / 1e6:.1f} MB, over its {LIMIT_BYTES / 1e6:.0f} MB limit: "
                        "remove wheels of older versions from it (rm -r it and run `make gpu-wheels` again)")
    return house

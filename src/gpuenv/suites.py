"""Suites: declarative TOML workloads in suites/, validated before anything runs.

A suite file's `kind` names its measurement mode's suite section (without one, the mode table's
first mode: mode_table.default_mode); the mode
(gpuenv.modes) validates the rest and expands it into the cases a run executes. This module only
finds, reads and dispatches suite files, and holds the checks every mode's loader shares.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from gpuenv import inputs
from gpuenv.errors import UserError
from gpuenv.registry import Registry
from gpuenv.results.types import IDENTIFIER

NAME = re.compile(IDENTIFIER)  # a suite's name goes into every record


def suites_dir() -> Path:
    env = os.environ.get("GPUENV_SUITES_DIR")
    if env:
        return Path(env)
    # src/gpuenv/suites.py -> repo root /suites
    return Path(__file__).resolve().parents[2] / "suites"


def available_suites() -> list[str]:
    d = suites_dir()
    return sorted(p.stem for p in d.glob("*.toml")) if d.is_dir() else []


# The largest value a suite or the command line may ask for. Beyond these no run can be meant (or fit
# a machine): an absurd size must be one line when the suite loads, not a worker that crashes or
# runs out of memory after minutes. num_envs: env i is seeded seed + i, and simulators take 31-bit
# seeds (the throughput suite leaves 2^20 below 2^31).
LIMITS: dict[str, float] = {
    "num_envs": 1 << 20,
    "processes": 100,
    "seeds": 100,
    "values": 1000,
    "warmups": 100,
    "chunk_steps": 1_000_000,
    "min_time_s": 3600.0,
    "timeout_s": 7 * 86400.0,
    "max_time_s": 7 * 86400.0,
    "memory_limit_mib": 1 << 24,  # 16 TiB
    "max_env_steps": 10**12,
    "eval_every_steps": 10**12,
    "eval_episodes": 10_000,
}


def at_most(name: str, value: float, where: str) -> None:
    """UserError when `value` is above LIMITS[name], saying the limit."""
    if value > LIMITS[name]:
        raise UserError(f"{where}: {name} = {value:,} is more than gpuenv runs (at most {LIMITS[name]:,g}); use a smaller value")


def unknown_keys(keys: Any, allowed: Any, where: str) -> None:
    bad = sorted(set(keys) - set(allowed))
    if bad:
        raise UserError(f"{where}: unknown key '{bad[0]}' (allowed: {', '.join(sorted(allowed))})")


def str_list(table: dict, key: str, typ: type, where: str) -> tuple:
    if key not in table:
        raise UserError(f"{where}: missing key '{key}'")
    v = table[key]
    if not isinstance(v, list) or not v or not all(isinstance(x, typ) and not isinstance(x, bool) for x in v):
        raise UserError(f"{where}: key '{key}' must be a non-empty list of {typ.__name__}")
    return tuple(v)


def resolve_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix == ".toml" or os.sep in name_or_path:
        if not p.is_file():
            raise UserError(f"suite file {p} does not exist")
        path = p
    else:
        path = suites_dir() / f"{name_or_path}.toml"
        if not path.is_file():
            known = ", ".join(available_suites()) or "none found"
            raise UserError(f"unknown suite '{name_or_path}'; known suites: {known} (or pass a path to a .toml file)")
    if not NAME.match(path.stem):
        raise UserError(f"suite file {path}: rename it to letters, digits, '_', '.' or '-' (the name goes into every record)")
    return path


def read_toml(path: Path) -> dict:
    return inputs.read_toml(path, f"suite file {path}")


def load_any(name_or_path: str, registry: Registry, *, seeds: int | None = None) -> tuple[Any, Any]:
    """(mode, the mode's suite object), by the file's `kind`."""
    from gpuenv.mode_table import default_mode, mode_for_kind

    path = resolve_path(name_or_path)
    data = read_toml(path)
    if "kind" not in data:
        mode = default_mode()
    elif not isinstance(data["kind"], str):
        raise UserError(f"{path}: kind must be a string")
    else:
        try:
            mode = mode_for_kind(data["kind"])
        except UserError as e:
            raise UserError(f"{path}: {e}") from None
    return mode, mode.load_suite(path, data, registry, seeds=seeds)

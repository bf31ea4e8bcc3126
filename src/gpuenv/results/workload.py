"""Workload identity: which records measured the same thing, whatever machine or versions they ran with.
Derived from what a record describes (the mode's `workload(record)`), recomputed on every read."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gpuenv.mode_table import record_module

# The catalogue facts that define what is simulated (not notes, max_return or unsupported).
CATALOGUE_WORKLOAD_KEYS = (
    "env_id",
    "control_dt_s",
    "frame_skip",
    "physics_dt_s",
    "episode_steps",
    "obs_shape",
    "action_kind",
    "action_size",
)


def catalogue_workload(catalogue: dict) -> dict:
    return {k: catalogue.get(k) for k in CATALOGUE_WORKLOAD_KEYS}


def _canonical(value: Any) -> Any:
    """JSON-ready value where 3 and 3.0 are the same number, so an id does not depend on how a
    producer happened to type it."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def workload_id(mode: str, facts: dict) -> str:
    """16 hex chars naming a workload: sha256 of the canonical JSON of {measurement_mode, **facts}.

    Records with the same id measured the same thing (on whatever machine, with whatever versions),
    so they can be compared; the facts are what the mode's `workload(record)` returns."""
    text = json.dumps(_canonical({"measurement_mode": mode, **facts}), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record_workload_id(record: dict) -> str:
    """The workload id of a validated record dict."""
    mode = record["measurement_mode"]
    return workload_id(mode, record_module(mode).workload(record))



"""Schema version 1 -> 2 on read (as asv does with api_version): never refused, migrated."""

from __future__ import annotations

import copy
from typing import Any

from gpuenv.mode_table import MODE_PACKAGES, record_module
from gpuenv.results.models import FailureKind

# Legacy (v1) records carry only the reason text; its kind is read from it, and only there.
_LEGACY_KINDS: tuple[tuple[tuple[str, ...], FailureKind], ...] = (
    (("interrupted",), FailureKind.interrupted),
    (("timed out",), FailureKind.timeout),
    (("killed by",), FailureKind.killed),
    (("diverged",), FailureKind.diverged),
    (("does not substitute", "older than the adapter", "not supported"), FailureKind.unsupported),
    (("could not summarise",), FailureKind.internal),
    (("MemoryError",), FailureKind.oom),
)


def legacy_failure_kind(reason: str) -> FailureKind:
    for needles, kind in _LEGACY_KINDS:
        if any(n in reason for n in needles):
            return kind
    return FailureKind.crashed


def legacy_failure(reason: Any, *, process: Any = None, stderr_tail: Any = "") -> dict:
    """A v2 failure object from a v1 reason string (anything else is left for validation to name)."""
    kind = legacy_failure_kind(reason).value if isinstance(reason, str) else FailureKind.crashed.value
    return {"kind": kind, "reason": reason, "process": process, "stderr_tail": stderr_tail}




def migrate_v1(record: dict) -> dict:
    """A schema-version-1 record as version 2 (a new dict), workload_id still unset.

    Common part: `summary: {}` becomes null, the failure reason string becomes a failure object with
    its kind read from the text, `seed` becomes `process`; then the mode's own migrate_v1.
    gpuenv.results.schema.validate() then validates it and sets workload_id, as for a new record."""
    out = copy.deepcopy(record)
    out["schema_version"] = 2
    if out.get("summary") == {}:
        out["summary"] = None
    f = out.get("failure")
    if isinstance(f, dict) and "kind" not in f:
        out["failure"] = legacy_failure(
            f.get("reason"), process=f.get("process", f.get("seed")), stderr_tail=f.get("stderr_tail", "")
        )
    mode = out.get("measurement_mode")
    if mode in MODE_PACKAGES:  # an unknown mode is reported by validation
        out = record_module(mode).migrate_v1(out)
    return out

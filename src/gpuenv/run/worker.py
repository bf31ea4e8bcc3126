"""One worker process = one process of one case. Started as `python -m gpuenv worker SPEC OUT`.

The spec names its measurement mode; the mode's `worker(spec)` does the work (it imports only its
own backend). The worker writes one JSON object to OUT: the result, or the error that stopped it with
its failure kind (results.models.FailureKind), decided by the exception's type, never its text.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from gpuenv.errors import Diverged, Unsupported, UserError

WORKER_ERROR_EXIT = 3


def failure_kind(e: BaseException) -> str:
    if isinstance(e, Unsupported):
        return "unsupported"
    if isinstance(e, UserError):
        return "refused"
    if isinstance(e, Diverged):
        return "diverged"
    if isinstance(e, MemoryError):
        return "oom"
    return "crashed"


def run(spec: dict) -> dict:
    if spec.get("provenance"):  # the runner asks a backend's own environment what it has
        from gpuenv.measure.system import provenance

        return {"ok": True, "provenance": provenance()}
    from gpuenv.modes import get_mode

    return get_mode(spec["mode"]).worker(spec)


def main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    try:
        result = run(spec)
        code = 0
    except Exception as e:  # noqa: BLE001 - any backend failure becomes this case's recorded failure
        kind = failure_kind(e)
        message = str(e) if kind in ("unsupported", "refused") else f"{type(e).__name__}: {e}"
        result = {"ok": False, "kind": kind, "error": message}
        if kind == "crashed":
            result["traceback"] = traceback.format_exc()
        code = WORKER_ERROR_EXIT
    tmp = Path(out_path + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(out_path)
    return code


def exit_now(code: int) -> None:
    """Leave without interpreter teardown (torch, JAX and env pools take seconds to tear down)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

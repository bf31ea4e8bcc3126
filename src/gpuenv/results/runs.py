"""What records say about the runs they belong to."""

from __future__ import annotations

from collections.abc import Sequence

from gpuenv.results.models import RecordBase


def half_finished(records: Sequence[RecordBase]) -> dict[str, str]:
    """Run id -> why the run is half-finished: a case was interrupted (Ctrl-C, a timeout, a budget),
    or a bench command's plan had more cases than the run holds records of it (the command was
    killed before it wrote them). Runs whose records carry no invocation (older ones) are judged by
    their interrupted records alone."""
    out: dict[str, str] = {}
    invocations: dict[tuple[str, str], tuple[int, set[str]]] = {}
    for r in records:
        if r.status == "interrupted" and r.run_id not in out:
            out[r.run_id] = f"{r.case_key} was {r.failure.reason if r.failure else 'interrupted'}"
        if r.invocation is not None:
            invocations.setdefault((r.run_id, r.invocation.started_utc), (r.invocation.cases, set()))[1].add(r.case_key)
    for (run_id, started), (cases, keys) in sorted(invocations.items()):
        if len(keys) < cases and run_id not in out:
            out[run_id] = f"{len(keys)} of the {cases} cases its bench command planned at {started} have records"
    return out

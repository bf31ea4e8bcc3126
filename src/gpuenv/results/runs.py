"""What records say about the runs they belong to."""

from __future__ import annotations

from collections.abc import Sequence

from gpuenv.results.models import RecordBase


def half_finished(records: Sequence[RecordBase]) -> dict[str, str]:
    """Run id -> why the run is half-finished: a case whose newest record in the run was interrupted
    (Ctrl-C, a timeout, a budget), or a run whose newest bench command planned more cases than it
    wrote records (killed before it wrote them). A later command into the same run (`bench --run-id`)
    that measures the cases again finishes it. Runs whose records carry no invocation (older ones)
    are judged by their interrupted records alone."""
    newest: dict[tuple[str, str], RecordBase] = {}  # (run, case key) -> its newest record
    invocations: dict[str, dict[str, tuple[int, set[str]]]] = {}  # run -> started -> (cases planned, case keys written)
    for r in sorted(records, key=lambda r: r.created_utc):
        newest[(r.run_id, r.case_key)] = r
        if r.invocation is not None:
            invocations.setdefault(r.run_id, {}).setdefault(r.invocation.started_utc, (r.invocation.cases, set()))[1].add(r.case_key)
    out: dict[str, str] = {}
    for (run_id, key), r in sorted(newest.items()):
        if r.status == "interrupted" and run_id not in out:
            out[run_id] = f"{key} was {r.failure.reason if r.failure else 'interrupted'}"
    for run_id, by_start in sorted(invocations.items()):
        started = max(by_start)
        cases, keys = by_start[started]
        if len(keys) < cases and run_id not in out:
            out[run_id] = f"{len(keys)} of the {cases} cases its bench command planned at {started} have records"
    return out

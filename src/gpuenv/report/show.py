"""`gpuenv show`: stored records as pyperf's `show` gives them, one section per machine and run, each
headed by what its numbers were measured on (the machine as `gpuenv.measure.fingerprint.machines`
tells machines apart, the run, its suite, when, gpuenv's version and commit, the backends' library
versions); the measurement modes' own tables inside. Rows of two machines or two runs never share a
table. The same sections as Markdown (for READMEs) and as JSON (one object)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpuenv.format import time_span
from gpuenv.measure.fingerprint import runs_by_machine
from gpuenv.modes import of
from gpuenv.registry import default_registry
from gpuenv.results.schema import Record


@dataclass(frozen=True)
class Section:
    """One run's records, with the machine it ran on (numbered as the machines are, from 1)."""

    machine_index: int
    machine: str
    run_id: str
    records: list[Record]

    @property
    def suites(self) -> list[str]:
        return sorted({r.suite for r in self.records})

    @property
    def span(self) -> tuple[str, str]:
        times = [r.created_utc for r in self.records]
        return min(times), max(times)

    @property
    def commit(self) -> str | None:
        """gpuenv's commit the run measured with (with '+uncommitted changes' when its tree was dirty)."""
        git = self.records[0].where.git
        if not git.sha:
            return None
        return git.sha[:10] + (" +uncommitted changes" if git.dirty else "")

    @property
    def versions(self) -> dict[str, str]:
        """The library versions of the run's backends (and gpuenv's), as its records carry them."""
        registry = default_registry()
        names = ["gpuenv"]
        for r in self.records:
            if r.case.backend in registry.backends:
                names += registry.get(r.case.backend).packages
        out: dict[str, str] = {}
        for name in dict.fromkeys(names):
            seen = sorted({v for r in self.records if (v := r.where.packages.get(name))})
            if seen:
                out[name] = " / ".join(seen)
        return out

    def heading(self) -> str:
        when = time_span([r.created_utc for r in self.records])
        commit = f", commit {self.commit}" if self.commit else ""
        libs = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        return (f"machine [{self.machine_index}] {self.machine}\n"
                f"run {self.run_id}: suite {', '.join(self.suites)}, {len(self.records)} record(s), {when}{commit}; {libs}")

    def to_dict(self) -> dict[str, Any]:
        start, end = self.span
        return {"run_id": self.run_id, "suites": self.suites, "from": start, "to": end, "commit": self.commit,
                "versions": self.versions, "records": [row(r) for r in self.records]}


def sections(records: list[Record]) -> list[Section]:
    """Per machine (in `machines`' order), its runs in the order they started."""
    return [Section(*group) for group in runs_by_machine(records)]


def row(r: Record) -> dict[str, Any]:
    """A record's headline as one JSON row: its case, status and number with the 95% interval and unit."""
    c = r.case
    out: dict[str, Any] = {"case_key": r.case_key, "mode": r.measurement_mode, "backend": c.backend, "variant": c.variant,
                           "task": c.task, "num_envs": c.num_envs, "status": r.status}
    if r.status == "ok":
        h = of(r).headline(r)
        out |= {"value": h.value, "ci_low": h.ci_low, "ci_high": h.ci_high, "unit": h.unit, "higher_is_better": h.higher_is_better}
    elif r.failure is not None:
        out |= {"failure": r.failure.reason}
    return out


def to_json(found: list[Section]) -> dict[str, Any]:
    label: dict[int, str] = {}
    runs: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in found:
        label[s.machine_index] = s.machine
        runs[s.machine_index].append(s.to_dict())
    return {"machines": [{"machine": label[i], "runs": runs[i]} for i in label]}


def markdown(found: list[Section]) -> str:
    from gpuenv.report.table import markdown as tables_markdown

    parts = []
    for s in found:
        first, second = s.heading().split("\n", 1)
        parts.append(f"**{first}**  \n{second}\n\n{tables_markdown(s.records)}")
    return "\n\n".join(parts)

"""Measurement modes are plug-ins, looked up by the `measurement_mode` string records carry.

Each mode is a package under gpuenv.modes: its `record` module defines the typed record model
(`RECORD`, `workload`, `migrate_v1`) and its package defines `MODE`, a `Mode` (suite section, worker
entry, record building, tables, headline). The runner, the readers and the history tools ask the mode
instead of branching on it. A new mode is one package and one line in MODE_PACKAGES.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpuenv.errors import UserError

if TYPE_CHECKING:
    from rich.table import Table

    from gpuenv.registry import Registry
    from gpuenv.run.runner import Outcome, RecordContext

# measurement_mode string -> the package that implements it.
MODE_PACKAGES: dict[str, str] = {
    "env-step-throughput": "gpuenv.modes.throughput",
    "time-to-reward": "gpuenv.modes.ttr",
}


@dataclass(frozen=True)
class Headline:
    """The one number a record stands for, as compare / regressions / asv / the report use it."""

    value: float
    ci_low: float
    ci_high: float
    unit: str  # "env steps/s", "s to reward"
    higher_is_better: bool

    def goodness(self) -> float:
        """A value where higher is always better (for change points)."""
        return self.value if self.higher_is_better else 1.0 / self.value


@dataclass(frozen=True)
class Metric:
    """A lower-is-better quantity every worker of a case measures beside the headline."""

    name: str  # "host memory"
    unit: str
    field: str  # its key in a worker's memory dict


MEMORY_METRICS = (
    Metric("host memory", "MiB", "tree_pss_peak_mib"),  # PSS of the worker's process tree
    Metric("device memory", "MiB", "device_peak_mib"),  # what the backend allocated on the device
)


class Item(Protocol):
    """One planned case of a mode: what the runner needs to know to run it."""

    @property
    def key(self) -> str: ...

    @property
    def backend(self) -> str: ...

    @property
    def processes(self) -> int: ...

    @property
    def timeout_s(self) -> float: ...


class CaseItem:
    """Mixin for a mode's Item dataclass with a `case` field: its key and backend are the case's."""

    case: Any

    @property
    def key(self) -> str:
        return self.case.key

    @property
    def backend(self) -> str:
        return self.case.backend


@dataclass(frozen=True)
class Plan:
    suite: str
    items: list[Any]  # the mode's Item objects, in suite order
    skipped: list[str]  # one line per case the suite lists but this plan does not run, with why
    unit: str  # "3 processes each", "3 seeds each"


class Mode:
    """Base class of a measurement mode's plug-in object (`MODE` in its package)."""

    name: str  # the measurement_mode string in records
    suite_kind: str  # the `kind` of its suite files
    process_word: str = "process"  # what one worker process is, for progress lines
    stop_after_failure: bool = True  # a failed process ends the case (throughput) or not (seeds)
    packages: tuple[str, ...] = ()  # distributions its records must carry (beyond the backends')

    # --- suites and plans
    def load_suite(self, path: Path, data: dict, registry: Registry, *, seeds: int | None) -> Any:
        raise NotImplementedError

    def plan(self, suite: Any, registry: Registry, *, backends: list[str] | None, tasks: list[str] | None,
             num_envs: list[int] | None) -> Plan:
        raise NotImplementedError

    def unavailable(self, item: Any, registry: Registry) -> str | None:
        """Why this machine cannot run the item beyond its backend (a trainer not installed ...)."""
        return None

    # --- running (the runner calls these; worker() runs inside the worker process)
    def process_spec(self, item: Any, index: int, out_dir: Path) -> dict:
        raise NotImplementedError

    def worker(self, spec: dict) -> dict:
        raise NotImplementedError

    def build_record(self, item: Any, outcomes: list[Outcome], ctx: RecordContext) -> dict:
        raise NotImplementedError

    # --- reading records
    def headline(self, record: dict) -> Headline:
        raise NotImplementedError

    def ratio(self, new: dict, old: dict) -> tuple[float, float, float]:
        """NEW/OLD of the headline value with a 95% interval."""
        raise NotImplementedError

    def progress_line(self, record: dict) -> str:
        h = self.headline(record)
        return f"{h.value:,.1f} {h.unit}"

    def worker_memories(self, record: dict) -> list[dict]:
        """The memory dict (gpuenv.measure.monitor.memory) of each worker process or seed that has one."""
        return []

    def memory_values(self, record: dict, metric: Metric) -> list[float]:
        """One peak per worker process or seed (MiB), where measured: compare and regressions treat
        these like time, lower is better."""
        return [m[metric.field] for m in self.worker_memories(record) if m and m.get(metric.field)]

    # Rendering: a mode's `report` module beside its class (`<package>.report`), where it has one,
    # provides tables(records), footnotes(records), markdown(records) and
    # site_sections(records, out, num_envs); a mode without one renders nothing.
    def _report(self) -> Any:
        try:
            return importlib.import_module(type(self).__module__ + ".report")
        except ModuleNotFoundError:
            return None

    def tables(self, records: list[dict]) -> list[Table]:
        r = self._report()
        return r.tables(records) if r else []

    def footnotes(self, records: list[dict]) -> list[str]:
        r = self._report()
        return r.footnotes(records) if r else []

    def markdown(self, records: list[dict]) -> str:
        r = self._report()
        return r.markdown(records) if r else ""

    def missed(self, record: dict) -> bool:
        """An ok record that missed its pass criterion (the CLI exits 1)."""
        return False

    def site_sections(self, records: list[dict], out: Path, num_envs: int | None = None) -> Iterator[str]:
        """HTML sections of the report site, from the latest ok record per case (PNG files into out)."""
        r = self._report()
        return r.site_sections(records, out, num_envs) if r else iter(())

    def asv_benchmark(self, record: dict) -> str:
        """asv benchmark name."""
        raise NotImplementedError

    def asv_value(self, record: dict) -> float:
        """The headline as asv stores it: smaller is better (asv's rule)."""
        h = self.headline(record)
        return 1.0 / h.value if h.higher_is_better else h.value


def known_modes() -> list[str]:
    return list(MODE_PACKAGES)


def get_mode(name: str) -> Mode:
    pkg = MODE_PACKAGES.get(name)
    if pkg is None:
        raise UserError(f"unknown measurement mode {name!r} (known: {', '.join(MODE_PACKAGES)})")
    return importlib.import_module(pkg).MODE


def all_modes() -> list[Mode]:
    return [get_mode(n) for n in MODE_PACKAGES]


def mode_for_kind(kind: str) -> Mode:
    for m in all_modes():
        if m.suite_kind == kind:
            return m
    raise UserError(f"unknown suite kind {kind!r} (known: {', '.join(m.suite_kind for m in all_modes())})")


def of(record: dict) -> Mode:
    return get_mode(record["measurement_mode"])


def record_model(mode: str) -> Any:
    """The pydantic model of a mode's records (imports only that mode's record module)."""
    return record_module(mode).RECORD


def record_module(mode: str) -> Any:
    if mode not in MODE_PACKAGES:
        raise UserError(f"unknown measurement mode {mode!r} (known: {', '.join(MODE_PACKAGES)})")
    return importlib.import_module(MODE_PACKAGES[mode] + ".record")

"""The mode contract: what a measurement mode provides (`Mode`), what it plans (`Plan`, items), what
the runner hands it back (`Outcome`, `RecordContext`) and what readers ask of it (`Headline`,
`Metric`). The runner and the readers know modes only through this module; a mode's package
subclasses `Mode` as its `MODE`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from gpuenv.results import schema
from gpuenv.results.models import RecordBase

if TYPE_CHECKING:
    from rich.table import Table


def failure(kind: str, reason: str, process: int | None = None, stderr_tail: str = "") -> dict:
    """A record's (or a process's) failure: kind is a results.models.FailureKind value."""
    return {"kind": kind, "reason": reason, "process": process, "stderr_tail": stderr_tail}


@dataclass
class Outcome:
    """One worker process of a case, as the runner saw it end."""

    index: int
    result: dict | None  # the worker's JSON when it finished
    failure: dict | None  # why there is no result (see failure())
    stderr_tail: str = ""


@dataclass(frozen=True)
class RecordContext:
    """What every record of a run shares, and how the case ended."""

    suite: str
    run_id: str
    where: dict
    interrupted_by: str | None = None  # what stopped the run while this case ran ("Ctrl-C (SIGINT)")
    broken: str | None = None  # gpuenv could not summarise the case (a bug): why
    tags: dict | None = None  # what every record of the run carries beyond GPUENV_RECORD_TAGS (`gpuenv ab`'s side)
    invocation: dict | None = None  # the bench command's start and case count (results.models.Invocation)

    def header(self, *, case_key: str, status: str, mode: str) -> dict:
        return schema.header(run_id=self.run_id, case_key=case_key, suite=self.suite, status=status, mode=mode, tags=self.tags,
                             invocation=self.invocation)

    def status(self, ok: bool) -> str:
        return "interrupted" if self.interrupted_by else ("ok" if ok and not self.broken else "failed")

    def failure(self, outcomes: list[Outcome]) -> dict:
        """The record's failure when its status is not ok."""
        if self.interrupted_by:
            return failure("interrupted", f"interrupted by {self.interrupted_by}")
        if self.broken:
            return failure("internal", self.broken)
        first = next((o for o in outcomes if o.failure), None)
        return first.failure if first and first.failure else failure("crashed", "no process finished")


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
class StepRate:
    """What a record says of stepping alone (random actions): the rate with its interval at a
    num_envs, and the fixed cost paid before it (startup and compile)."""

    median: float
    ci_low: float
    ci_high: float
    num_envs: int
    fixed_s: float  # startup + compile, seconds
    physics_per_step: int | None = None  # physics (sub)steps per env step as the backend ran them; None: unknown


@dataclass(frozen=True)
class PhaseRate:
    """One phase of a case measured apart: env steps (or, for `learn`, samples learned) per second."""

    median: float
    ci_low: float
    ci_high: float
    num_envs: int
    definition: str  # the trainer definition it ran ("" where none: stepping phases)
    learner: str = ""  # the policy phases' learner (phases.learner_key): a learn rate serves every collect of the same one


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


R = TypeVar("R", bound=RecordBase)


class Mode(Generic[R]):
    """Base class of a measurement mode's plug-in object (`MODE` in its package). R is the mode's
    record model: every reading method takes a validated record of it (gpuenv.results.schema.read,
    gpuenv.history.load.load_records), never a dict."""

    name: str  # the measurement_mode string in records
    suite_kind: str  # the `kind` of its suite files
    process_word: str = "process"  # what one worker process is, for progress lines
    stop_after_failure: bool = True  # a failed process ends the case (throughput) or not (seeds)
    packages: tuple[str, ...] = ()  # distributions its records must carry (beyond the backends')

    # --- suites and plans (registry: a gpuenv.registry.Registry)
    def load_suite(self, path: Path, data: dict, registry: Any, *, seeds: int | None) -> Any:
        raise NotImplementedError

    def plan(self, suite: Any, registry: Any, *, backends: list[str] | None, tasks: list[str] | None,
             num_envs: list[int] | None) -> Plan:
        raise NotImplementedError

    def with_measure(self, item: Any, settings: dict[str, Any], where: str) -> Any:
        """The item measured with these settings (MEASURE_OPTIONS' keys) in place of its suite's
        (`bench --processes ...`); UserError naming `where` for one the mode has no use for or a
        value out of range."""
        raise NotImplementedError

    def with_processes(self, item: Any, n: int) -> Any:
        """The item run by n worker processes (seeds) instead of the suite's (`gpuenv ab`'s blocks)."""
        return self.with_measure(item, {"processes": n}, "--blocks")

    def describe(self, item: Any) -> str:
        """How the item is measured, in one line (`bench --dry-run`)."""
        raise NotImplementedError

    def unavailable(self, item: Any, registry: Any) -> str | None:
        """Why this machine cannot run the item beyond its backend (a trainer not installed ...)."""
        return None

    def serves_env(self, item: Any) -> bool:
        """Its worker runs in the main install even where the backend has an environment of its own, which
        serves the env to it (gpuenv.backends.served): the shared PPO trainer needs torch and SB3."""
        return False

    # --- running (the runner calls these; worker() runs inside the worker process)
    def process_spec(self, item: Any, index: int, out_dir: Path) -> dict:
        raise NotImplementedError

    def worker(self, spec: dict, keep: Callable[[dict], None] = lambda result: None) -> dict:
        """One process of a case, inside a worker process. `keep(result)` stores a result the runner
        records (marked incomplete) should the worker die after that point (gpuenv.run.worker)."""
        raise NotImplementedError

    def build_record(self, item: Any, outcomes: list[Outcome], ctx: RecordContext) -> dict:
        raise NotImplementedError

    # --- reading records
    def headline(self, record: R) -> Headline:
        raise NotImplementedError

    def ratio(self, new: R, old: R) -> tuple[float, float, float]:
        """NEW/OLD of the headline value with a 95% interval."""
        raise NotImplementedError

    def process_values(self, record: R) -> dict[int, float]:
        """The headline's quantity as each worker process (or seed) of the record measured it, by
        process index, for processes that measured one (`gpuenv ab` pairs these across sides)."""
        return {}

    def step_rate(self, record: R) -> StepRate | None:
        """The stepping rate an ok record measured, or None where the mode measures something else
        (claims, decide and the site's scaling figures ask this, never the mode's name)."""
        return None

    def phase_rates(self, record: R) -> dict[str, PhaseRate]:
        """phase -> its rate with interval and what it ran, per phase an ok record measured apart with a
        number ({} where the mode measures no phases): the parts of `gpuenv decide`'s training model."""
        return {}

    def trained_runs(self, record: R) -> tuple[str | None, list[tuple[float, float, bool]]]:
        """(the trainer, [(env steps trained, training seconds, reached the threshold)] per seed that trained:
        to the threshold, or censored at its budget (what it spent); training seconds exclude startup, compile
        and evaluation); (None, []) where the mode trains nothing."""
        return None, []

    def training_rates(self, record: R) -> list[float]:
        """Env steps/s each training run of an ok record reached (per seed); [] where the mode trains nothing."""
        return []

    def trained_learner(self, record: R) -> str | None:
        """The learner (throughput.phases.learner_key) a training record's shared SB3 trainer ran: its task,
        its hyperparameters but n_steps, the policy's device and torch's threads; None where the record does
        not say or the mode trains nothing."""
        return None

    def training_fixed_s(self, record: R) -> float:
        """Startup and compile seconds of an ok record's training runs, median over seeds; 0.0 where the
        mode trains nothing."""
        return 0.0

    def trainer_text(self, record: R) -> str:
        """The trainer a training record ran, in words; "" where the mode trains nothing."""
        return ""

    def training_line(self, record: R) -> str:
        """What an ok training record reached, in one line (decide quotes it); "" where the mode trains nothing."""
        return ""

    def phase_rows(self, record: R) -> list[list[str]]:
        """[phase, env steps/s, ratio to the case's own rate, what ran or why not] per phase measured
        apart, for a case's page; [] where the mode measures no phases."""
        return []

    def phase_ratios(self, record: R) -> dict[str, tuple[float, float, float]]:
        """phase -> its rate / the case's own rate (median, 95% interval), per phase measured apart
        with a number; {} where the mode measures no phases."""
        return {}

    def device(self, record: R) -> str | None:
        """Where the simulator ran, as the record says it ("cpu", "gpu:NAME", "tpu:KIND"); None: unknown."""
        return None

    def process_rows(self, record: R) -> list[list[str]]:
        """[process, its values, startup s] per worker process, for a case's page (formatted); [] where
        the mode has no per-process values."""
        return []

    def page_rows(self, record: R) -> list[tuple[str, Any]]:
        """(name, value) rows of a case's page that only this mode's records have (how it ran)."""
        return []

    def reproduce_args(self, record: R) -> list[str]:
        """The `gpuenv bench` filters that run this record's case again (after --suite)."""
        return ["--backend", record.case.label, "--task", record.case.task]

    def progress_line(self, record: R) -> str:
        h = self.headline(record)
        return f"{h.value:,.1f} {h.unit}"

    def worker_memories(self, record: R) -> list[dict]:
        """The memory dict (gpuenv.measure.monitor.memory) of each worker process or seed that has one."""
        return []

    def memory_values(self, record: R, metric: Metric) -> list[float]:
        """One peak per worker process or seed (MiB), where measured: compare and regressions treat
        these like time, lower is better."""
        return [m[metric.field] for m in self.worker_memories(record) if m and m.get(metric.field)]

    # Rendering: a mode's `report` module beside its class (`<package>.report`), where it has one,
    # provides tables(records, details), footnotes(records), markdown(records) and
    # site_sections(records, out, num_envs); a mode without one renders nothing.
    def _report(self) -> Any:
        try:
            return importlib.import_module(type(self).__module__ + ".report")
        except ModuleNotFoundError:
            return None

    def tables(self, records: list[R], details: bool = False) -> list[Table]:
        """details: long cells whole (a bottleneck's numbers), where a short label is the default."""
        r = self._report()
        return r.tables(records, details=details) if r else []

    def footnotes(self, records: list[R]) -> list[str]:
        r = self._report()
        return r.footnotes(records) if r else []

    def markdown(self, records: list[R]) -> str:
        r = self._report()
        return r.markdown(records) if r else ""

    def missed(self, record: R) -> bool:
        """An ok record that missed its pass criterion (the CLI exits 1)."""
        return False

    def site_sections(self, records: list[R], out: Path, num_envs: int | None = None) -> Iterator[str]:
        """HTML sections of the report site, from the latest ok record per case (PNG files into out)."""
        r = self._report()
        return r.site_sections(records, out, num_envs) if r else iter(())

    def asv_benchmark(self, record: R) -> str:
        """asv benchmark name."""
        raise NotImplementedError

    def asv_param(self, record: R) -> str:
        """The record's value on its asv benchmark's one parameter axis: backend:variant@num_envs."""
        return f"{record.case.label}@{record.case.num_envs}"

    def asv_value(self, record: R) -> float:
        """The headline as asv stores it: smaller is better (asv's rule)."""
        h = self.headline(record)
        return 1.0 / h.value if h.higher_is_better else h.value

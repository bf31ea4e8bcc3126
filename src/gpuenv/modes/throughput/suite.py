"""The throughput suite section: [measure] settings and [[matrix]] tables, expanded into cases.

    description = "..."
    [measure]               # every key optional; defaults below
    processes = 3           # worker processes per case (values pooled over them)
    values = 3              # kept timed values per process
    warmups = 1             # discarded timed values per process
    min_time_s = 0.2        # calibrate loops until one value lasts this long
    chunk_steps = 100       # steps of every env per chunk (JAX: the lax.scan length)
    timeout_s = 600         # per worker process
    seed = 0
    memory_limit_mib = 0    # address-space limit of each worker (RLIMIT_AS); a case over it is `oom`
    phases = []             # also measure these apart (gpuenv.modes.throughput.phases): "step" (resets
                            # suppressed), "vecenv", "inference", "collect", "learn", "update"; "step+reset" is the case itself
    phase_ppo = {}          # sizes of the shared PPO definition the policy phases run, replacing the
                            # definition's own: n_steps, batch_size, n_epochs (e.g. { n_steps = 64 })
    [[matrix]]              # backends x tasks x num_envs; a task a backend lacks is reported, not run
    backends = ["<backend>:<variant>", "<backend>"]
    tasks = ["halfcheetah"]
    num_envs = [1, 8, 64]
    chunk_steps = 50        # optional per-matrix override of a [measure] key
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from pathlib import Path

from gpuenv.backends.base import Case
from gpuenv.errors import UserError
from gpuenv.modes.base import CaseItem, Plan
from gpuenv.registry import Registry
from gpuenv.suites import at_most, str_list, unknown_keys
from gpuenv.tasks import TASKS, find_task, get_task

# Env i of a case is seeded seed + i, and EnvPool and NumPy's legacy seeding take 32-bit signed
# seeds: leave room for 2^20 envs below 2^31.
SEED_MAX = 2**31 - 1 - 2**20


@dataclass(frozen=True)
class MeasureSpec:
    processes: int = 3
    values: int = 3
    warmups: int = 1
    min_time_s: float = 0.2
    chunk_steps: int = 100
    timeout_s: float = 600.0
    seed: int = 0
    memory_limit_mib: int = 0  # 0: none
    phases: tuple[str, ...] = ()  # extra phases measured apart (phases.EXTRA order)
    phase_ppo: tuple[tuple[str, int], ...] = ()  # (key, value) sizes replacing the shared PPO definition's

    def check(self, where: str) -> MeasureSpec:
        if self.processes < 1 or self.values < 1 or self.warmups < 0 or self.chunk_steps < 1:
            raise UserError(f"{where}: processes, values and chunk_steps must be >= 1 and warmups >= 0")
        if not (math.isfinite(self.min_time_s) and self.min_time_s > 0) or not (
            math.isfinite(self.timeout_s) and self.timeout_s > 0
        ):
            raise UserError(f"{where}: min_time_s and timeout_s must be finite and > 0")
        if self.memory_limit_mib < 0 or 0 < self.memory_limit_mib < 256:
            raise UserError(f"{where}: memory_limit_mib must be 0 (no limit) or >= 256 (a Python worker needs about 200 MiB of address space)")
        if not 0 <= self.seed <= SEED_MAX:
            raise UserError(f"{where}: seed must be in 0..{SEED_MAX} (got {self.seed}; env i is seeded seed + i, and simulators take 31-bit seeds)")
        for name in ("processes", "values", "warmups", "chunk_steps", "min_time_s", "timeout_s", "memory_limit_mib"):
            at_most(name, getattr(self, name), where)
        return self


@dataclass(frozen=True)
class PlannedCase(CaseItem):
    """One throughput case and how to measure it (the runner's Item)."""

    case: Case
    measure: MeasureSpec

    @property
    def processes(self) -> int:
        return self.measure.processes

    @property
    def timeout_s(self) -> float:
        return self.measure.timeout_s


@dataclass(frozen=True)
class MatrixEntry:
    backends: tuple[str, ...]
    tasks: tuple[str, ...]
    num_envs: tuple[int, ...]
    measure: MeasureSpec


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    description: str
    measure: MeasureSpec
    matrix: tuple[MatrixEntry, ...]


_MEASURE_KEYS = {f.name: f.type for f in fields(MeasureSpec)}
_MATRIX_KEYS = {"backends", "tasks", "num_envs"} | set(_MEASURE_KEYS)
_TOP_KEYS = {"description", "kind", "measure", "matrix"}



def _measure(table: dict, base: MeasureSpec, where: str) -> MeasureSpec:
    values: dict = {}
    if "phases" in table:
        from gpuenv.modes.throughput.phases import check_names

        values["phases"] = check_names(table["phases"], where)
    if "phase_ppo" in table:
        from gpuenv.modes.throughput.phases import check_sizes

        values["phase_ppo"] = check_sizes(table["phase_ppo"], where)
    for k in _MEASURE_KEYS:
        if k in table and k not in ("phases", "phase_ppo"):
            v = table[k]
            want = float if k in ("min_time_s", "timeout_s") else int
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (want is int and not isinstance(v, int)):
                raise UserError(f"{where}: key '{k}' must be a {want.__name__}, got {v!r}")
            values[k] = want(v)
    return replace(base, **values).check(where)



def load_suite(path: Path, data: dict, registry: Registry) -> Suite:
    unknown_keys(data, _TOP_KEYS, str(path))
    measure_table = data.get("measure", {})
    if not isinstance(measure_table, dict):
        raise UserError(f"{path}: [measure] must be a table")
    unknown_keys(measure_table, _MEASURE_KEYS, f"{path} [measure]")
    base = _measure(measure_table, MeasureSpec(), f"{path} [measure]")
    matrix_tables = data.get("matrix")
    if not isinstance(matrix_tables, list) or not matrix_tables:
        raise UserError(f"{path}: needs at least one [[matrix]] table")
    entries = []
    for i, t in enumerate(matrix_tables, 1):
        where = f"{path} [[matrix]] #{i}"
        if not isinstance(t, dict):
            raise UserError(f"{where}: must be a table ([[matrix]] with keys backends, tasks, num_envs)")
        unknown_keys(t, _MATRIX_KEYS, where)
        backends = str_list(t, "backends", str, where)
        for b in backends:
            try:
                registry.parse(b)
            except UserError as e:
                raise UserError(f"{where}: {e}") from None
        tasks = str_list(t, "tasks", str, where)
        for task in tasks:
            if find_task(task) is None:
                raise UserError(f"{where}: unknown task '{task}' (known: {', '.join(TASKS)})")
        num_envs = str_list(t, "num_envs", int, where)
        if min(num_envs) < 1:
            raise UserError(f"{where}: num_envs must be >= 1")
        at_most("num_envs", max(num_envs), where)
        entries.append(MatrixEntry(backends, tasks, num_envs, _measure(t, base, where)))
    desc = data.get("description", "")
    return Suite(path.stem, path, str(desc), base, tuple(entries))



def _matches(selector: str, wanted: str) -> bool:
    """Does a suite selector ('b:v') match a user filter ('b' or 'b:v')?"""
    if ":" in wanted:
        return selector == wanted or (":" not in selector and wanted.split(":")[0] == selector)
    return selector.split(":")[0] == wanted


def plan(
    suite: Suite,
    registry: Registry,
    *,
    backends: list[str] | None = None,
    tasks: list[str] | None = None,
    num_envs: list[int] | None = None,
) -> Plan:
    """Expand a suite (optionally filtered by the CLI) into cases, in suite order."""
    for b in backends or []:
        registry.parse(b)
    for t in tasks or []:
        get_task(t)
    for n in num_envs or []:
        if n < 1:
            raise UserError(f"--num-envs must be >= 1 (got {n})")
        at_most("num_envs", n, "--num-envs")

    cases: list[PlannedCase] = []
    skipped: list[str] = []
    seen: set[str] = set()
    # A backend the suite does not list (e.g. `--backend envpool:async` on a suite with only sync)
    # runs over every matrix entry's tasks and sizes.
    unmatched = [w for w in backends or [] if not any(_matches(s, w) for e in suite.matrix for s in e.backends)]
    # Likewise a task no entry lists runs under every entry; a task the suite lists runs only where it is listed
    # (with its entry's sizes and phases), never under another entry's settings.
    unlisted = [t for t in tasks or [] if not any(t in e.tasks for e in suite.matrix)]
    for sel in backends or [] if tasks else []:  # both asked for by name: a task the backend lacks is an error, not a skip
        for t in tasks or []:
            info = registry.parse(sel)[0]
            if registry.why_not(t, info.name):
                registry.native(t, info.name)
    for entry in suite.matrix:
        selectors: list[str] = list(unmatched)
        for sel in entry.backends:
            if backends:
                hits = [w for w in backends if _matches(sel, w)]
                # 'b:v2' asked for, suite lists 'b' or 'b:v1': run what was asked
                selectors += [w if ":" in w else sel for w in hits]
            else:
                selectors.append(sel)
        entry_tasks = [t for t in entry.tasks if not tasks or t in tasks] + unlisted
        for sel in dict.fromkeys(selectors):
            info, variant = registry.parse(sel)
            variant = variant or info.variants[0]
            for task_name in entry_tasks:
                why = registry.why_not(task_name, info.name)
                if why:
                    if backends and tasks:
                        # Both asked for explicitly: that is an error, not a silent skip.
                        registry.native(task_name, info.name)
                    if f"{sel} / {task_name}: {why}" not in skipped:
                        skipped.append(f"{sel} / {task_name}: {why}")
                    continue
                for n in num_envs or entry.num_envs:
                    need = info.min_envs.get(variant, 1)
                    if n < need:
                        skipped.append(f"{sel} / {task_name} at num_envs={n}: variant '{variant}' needs num_envs >= {need}")
                        continue
                    case = Case(
                        backend=info.name,
                        variant=variant,
                        task=task_name,
                        num_envs=n,
                        chunk_steps=entry.measure.chunk_steps,
                        seed=entry.measure.seed,
                    )
                    if case.key not in seen:
                        seen.add(case.key)
                        cases.append(PlannedCase(case, entry.measure))
    if backends and not cases and not skipped:
        raise UserError(
            f"suite '{suite.name}' has no cases for backend(s) {', '.join(backends)}; see `gpuenv list`"
        )
    return Plan(suite.name, list(cases), skipped, "processes each as the suite sets")

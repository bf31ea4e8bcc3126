"""What a `gpuenv bench` runs: the suite's plan, cut to the cases asked for and to what this machine
can run (said once per reason, never recorded as failures). The commands that run suites (bench,
bench-image, a dispatch's array task) take their plan from here."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpuenv.errors import UserError
from gpuenv.registry import default_registry
from gpuenv.suites import load_any


@dataclass(frozen=True)
class BenchPlan:
    mode: Any  # a gpuenv.modes.base.Mode
    plan: Any  # its Plan, items runnable here
    unavailable: list[str]  # one line per reason a planned case cannot run here
    skipped: list[str]  # what the suite lists but the plan does not run (the mode says why)


def only_cases(plan: Any, keys: list[str]) -> Any:
    """The plan cut down to these case keys (as `gpuenv dispatch` gives each array task its cases)."""
    known = {item.key for item in plan.items}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise UserError(f"--case {unknown[0]}: not a case of suite '{plan.suite}' with these filters "
                        f"(`gpuenv list` shows the suites; its cases: {', '.join(sorted(known)[:5])}{' ...' if len(known) > 5 else ''})")
    return replace(plan, items=[item for item in plan.items if item.key in set(keys)])


def bench_plan(suite: str, *, backends: list[str] | None = None, tasks: list[str] | None = None,
               num_envs: list[int] | None = None, seeds: int | None = None, cases: list[str] | None = None,
               measure: dict[str, Any] | None = None, here: bool = True) -> BenchPlan:
    """The plan of `gpuenv bench`; UserError when a backend asked for is not installed or nothing can run.
    measure: settings that replace every case's suite ones ({'processes': 5, 'min_time_s': 1.0}: `bench
    --processes 5 --min-time 1`). here=False: the workers run in other environments (a sweep's
    version sets), so what this interpreter lacks is no reason to leave a case out."""
    registry = default_registry()
    for selector in backends or []:  # asked for by name but not installed: say how to install it
        reason = registry.parse(selector)[0].unavailable_reason() if here else None
        if reason:
            raise UserError(reason)
    mode, s = load_any(suite, registry, seeds=seeds)
    plan = mode.plan(s, registry, backends=backends, tasks=tasks, num_envs=num_envs)
    if cases:
        plan = only_cases(plan, cases)
    if measure:
        where = ", ".join(f"--{k.removesuffix('_s').replace('_', '-')} {v:g}" for k, v in measure.items())
        plan = replace(plan, items=[mode.with_measure(item, measure, where) for item in plan.items],
                       unit=f"{measure['processes']} {mode.process_word}{'es' if mode.process_word.endswith('s') else 's'} each"
                       if "processes" in measure else plan.unit)
    items: list = []
    unavailable: dict[str, None] = {}
    for item in plan.items:
        reason = (registry.get(item.backend).unavailable_reason() or mode.unavailable(item, registry)) if here else None
        if reason is None:
            items.append(item)
        else:
            unavailable.setdefault(reason, None)
    if not items:
        why = [*plan.skipped, *unavailable]
        raise UserError(f"nothing to run in suite '{plan.suite}' on this machine"
                        + (f": {'; '.join(why[:3])}{' ...' if len(why) > 3 else ''}" if why else "") + "; see `gpuenv list`")
    return BenchPlan(mode, replace(plan, items=items), list(unavailable), list(plan.skipped))

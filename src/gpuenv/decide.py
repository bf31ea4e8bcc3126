"""`gpuenv decide --task T --budget STEPS [--configs K]`: the course's decision, computed from records.

The course ends with a decision table, not a model:

    course tasks                 -> Godot CPU is fine
    budget < 50M steps           -> CPU is fine
    20+ hyperparameter configs   -> consider EnvPool
    a NeurIPS submission         -> almost surely GPU

This module answers it from measured records of one machine: per backend, the wall-clock to the
budget (startup and compile included, configs one after another), from its best measured throughput
on the task and, where time-to-reward records exist, from the rate PPO trained at (simulation plus
training). It names the row the question lands in and why, the framework to use, and which rows
this machine's records cannot check (a GPU backend measured only on a CPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuenv.errors import UserError
from gpuenv.modes import of
from gpuenv.results.schema import Record

BUDGET_LIMIT = 50_000_000  # the course's "budget < 50M steps: CPU is fine"
CONFIGS_ENVPOOL = 20  # "20+ hyperparameter configs: consider EnvPool"

ROWS = {
    "course": "course tasks: Godot CPU is fine",
    "small": "budget < 50M steps: CPU is fine",
    "configs": "20+ hyperparameter configs: consider EnvPool",
    "gpu": "a NeurIPS submission: almost surely GPU",
}


def parse_steps(text: str) -> int:
    """'50M', '1B', '2.5e7', '200k', '1_000_000' -> steps; UserError on anything else."""
    m = re.fullmatch(r"\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kKmMbBgG]?)\s*", text)
    if not m:
        raise UserError(f"--budget {text!r} is not a number of steps: write e.g. 50M, 1B, 200k or 2e7")
    scale = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9}[m.group(2).lower()]
    value = float(m.group(1).replace("_", "")) * scale
    if not 1 <= value <= 1e15:
        raise UserError(f"--budget {text!r} must be between 1 and 1e15 steps")
    return int(value)


@dataclass
class Option:
    selector: str  # backend:variant
    num_envs: int
    rate: float  # env steps/s, median
    ci: tuple[float, float]
    fixed_s: float  # startup + compile, per run
    device: str  # where it was measured: cpu, gpu or tpu
    gpu_backend: bool  # the backend steps on a GPU where there is one
    case_key: str
    train_rate: float | None = None  # env steps/s PPO trained at (time-to-reward records)
    ttr: str = ""  # what the time-to-reward records say

    def wall_s(self, budget: int, configs: int) -> float:
        return configs * (self.fixed_s + budget / self.rate)

    def train_wall_s(self, budget: int, configs: int) -> float | None:
        return None if not self.train_rate else configs * (self.fixed_s + budget / self.train_rate)


@dataclass
class Decision:
    task: str
    budget: int
    configs: int
    machine: str
    options: list[Option]
    row: str
    answer: str
    why: list[str] = field(default_factory=list)
    needs_gpu: list[str] = field(default_factory=list)


def named_by(row: str) -> list[str]:
    """The backends a row of the decision table names (their declarations say so: Backend.decision_row)."""
    from gpuenv.registry import default_registry

    return [b.name for b in default_registry().backends.values() if b.decision_row == row]


def _course_task(task: str) -> bool:
    """A task of the course's own simulator (the backend the 'course' row names)."""
    from gpuenv.registry import default_registry

    return any(task in default_registry().get(name).tasks for name in named_by("course"))


def _of(opts: list[Option], row: str) -> list[Option]:
    names = named_by(row)
    return [o for o in opts if o.selector.split(":", 1)[0] in names]


def options_for(task: str, records: list[Record]) -> tuple[str, list[Option]]:
    """(machine, one option per backend:variant) from the machine with the newest records of this
    task: records of different machines never mix in one answer."""
    from gpuenv.claims import device_class
    from gpuenv.measure.fingerprint import machines
    from gpuenv.registry import default_registry

    mine = [r for r in records if r.status == "ok" and r.case.task == task]
    if not mine:
        raise UserError(f"no ok record of task {task!r} in these results: measure it first "
                        f"(gpuenv bench --task {task}), or pass --results with the directories that have it")
    groups = machines(mine)
    machine, recs = max(groups, key=lambda g: max(r.created_utc for r in g[1]))
    reg = default_registry()
    best: dict[str, Option] = {}
    for r in recs:
        step = of(r).step_rate(r)
        if step is None:
            continue
        sel = r.case.label
        if sel in best and best[sel].rate >= step.median:
            continue
        b = reg.backends.get(r.case.backend)
        best[sel] = Option(sel, step.num_envs, step.median, (step.ci_low, step.ci_high), step.fixed_s,
                           device_class(r), bool(b and b.device == "gpu"), r.case_key)
    for r in recs:  # training runs: the rate PPO trained at, per seed, where the same backend:variant has one
        rates = of(r).training_rates(r)
        sel = r.case.label
        if sel not in best or not rates:
            continue
        o = best[sel]
        n = r.case.num_envs
        o.ttr = (f"{of(r).training_line(r)}, training at {rates[len(rates) // 2]:,.0f} env steps/s (median over seeds) "
                 f"at {n} envs")
        if n == o.num_envs:  # a training rate only beside the throughput of the same size
            o.train_rate = rates[len(rates) // 2]
    if not best:
        raise UserError(f"no throughput record of task {task!r} on {machine}: run `gpuenv bench --task {task}` first")
    return machine, sorted(best.values(), key=lambda o: -o.rate)


def decide(task: str, budget: int, configs: int, records: list[Record]) -> Decision:
    if configs < 1:
        raise UserError(f"--configs must be >= 1 (got {configs})")
    machine, opts = options_for(task, records)
    total = budget * configs
    from gpuenv.format import duration

    def wall(o: Option) -> float:
        return o.wall_s(budget, configs)

    fastest = min(opts, key=wall)

    def quickest(among: list[Option]) -> Option:
        """Of these options the one that reaches the budget first; the fastest of all where there are none."""
        return min(among, key=wall, default=fastest)

    def line(o: Option) -> str:
        t = o.train_wall_s(budget, configs)
        ppo = f"; with PPO training {duration(t)} (time-to-reward records)" if t else ""
        return (f"{o.selector} at {o.num_envs} envs: {o.rate:,.0f} env steps/s -> {duration(wall(o))} "
                f"for {configs} x {budget:,} steps ({o.fixed_s:.0f} s startup+compile per run){ppo}")

    why, needs = [], []
    gpu_here = [o for o in opts if o.gpu_backend and o.device != "cpu"]
    gpu_cpu = [o for o in opts if o.gpu_backend and o.device == "cpu"]
    if gpu_cpu:
        needs.append(f"{', '.join(o.selector for o in gpu_cpu)} step on a GPU where there is one; here they were measured on the CPU, "
                     f"so the '{ROWS['gpu']}' row and how far below {BUDGET_LIMIT // 1_000_000}M steps a GPU stops paying for its "
                     "startup and compile need GPU measurements (gpuenv bench --suite throughput on a GPU machine)")
    if _course_task(task):
        row = ROWS["course"]
        pick = quickest(_of(opts, "course"))
        why.append(f"{task} is a course task ({', '.join(named_by('course'))}'s): {line(pick)}")
    elif configs >= CONFIGS_ENVPOOL:
        row = ROWS["configs"]
        pool = _of(opts, "configs")
        pick = quickest(pool)
        names = ", ".join(named_by("configs"))
        why.append(f"{configs} configs >= {CONFIGS_ENVPOOL}: many short CPU runs, where {names}'s in-process pool wins: {line(pick)}")
        if not pool:
            why.append(f"no {names} record of {task} here: gpuenv bench --backend {names} --task {task}")
    elif total <= BUDGET_LIMIT:
        row = ROWS["small"]
        pick = quickest([o for o in opts if not o.gpu_backend])
        why.append(f"{total:,} steps in all is within the course's {BUDGET_LIMIT:,} (taken as 'up to'): the fastest CPU backend "
                   f"measured here finishes in {duration(wall(pick))}: {line(pick)}")
    else:
        row = ROWS["gpu"]
        pick = quickest(gpu_here)
        why.append(f"{total:,} steps in all is past the course's {BUDGET_LIMIT:,}: at this scale a GPU simulator pays for its startup")
        if not gpu_here:
            why.append(f"this machine measured no backend on a GPU; its fastest is {line(pick)}")
    for o in opts:
        if o is not pick:
            why.append(f"vs {line(o)}")
    if pick.ttr:
        why.append(pick.ttr)
    answer = f"{pick.selector} ({pick.num_envs} envs): {duration(wall(pick))} on this machine"
    if row == ROWS["gpu"] and not gpu_here:
        from gpuenv.registry import default_registry

        gpu_backends = ", ".join(b.name for b in default_registry().visible() if b.device == "gpu" and task in b.tasks)
        answer = (f"a GPU simulator ({gpu_backends or 'none offers ' + task}), not measured on a GPU here; "
                  f"this machine's fastest: {answer}")
    return Decision(task, budget, configs, machine, opts, row, answer, why, needs)

"""`gpuenv decide --task T --budget STEPS [--configs K]`: the course's decision, computed from records.

The course ends with a decision table, not a model:

    course tasks                 -> Godot CPU is fine
    budget < 50M steps           -> CPU is fine
    20+ hyperparameter configs   -> consider EnvPool
    a NeurIPS submission         -> almost surely GPU

This module answers it from measured records of one machine: per backend, the wall-clock to
*train* for the budget where the records hold what it costs, else to step through it (said so).
Two training models, each naming its trainer:
- `Parts`, for the shared SB3 PPO, composes one PPO iteration from what a throughput case measured
  apart: collection at its collect phase's rate (SB3's own rollout: stepping, the policy's forward
  pass at the trainer's batch, the rollout buffer and the advantages; the +inference phase where an
  older record has no collect phase) and learning at its learn phase's rate (PPO's update alone,
  samples per second), plus startup and compile once per run: seconds = fixed + steps x (1/collect +
  1/learn). The interval takes both rates' interval ends together. `model_checks` tests it against
  every time-to-reward record of the same machine, backend, task and size.
- `EndToEnd`, for a native on-device trainer (Brax's PPO in JAX), whose collection and learning
  overlap on the device, and for the shared trainer where only its trainings were measured: a
  time-to-reward record's training rate, measured whole (env steps per second of training, startup,
  compile and evaluation apart), over its seeds.
An option trains with whichever of the two its records have that trains faster. The answer names
the machine the records come from, the row the question lands in and why, the framework to use,
and which rows the records cannot check (a GPU backend measured only on a CPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuenv.errors import UserError
from gpuenv.measure.fingerprint import without_speed
from gpuenv.modes import of
from gpuenv.modes.base import PhaseRate
from gpuenv.results.schema import Record

NO_TRAINING = ("neither the shared trainer's collect (or +inference) and learn phases nor a time-to-reward run were measured "
               "for it")
BUDGET_LIMIT = 50_000_000  # the course's "budget < 50M steps: CPU is fine"
# The course wrote "Gesamt-Budget < 50M Timesteps": below it, strictly. A budget of exactly 50M is not below
# it, so it lands on the next row that applies (20+ configs, else the GPU row), and the answer says so.
THRESHOLD_TEXT = "the course's 'Gesamt-Budget < 50M Timesteps': exactly 50M is not below it"
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


@dataclass(frozen=True)
class Parts:
    """A PPO iteration's parts for one backend at one num_envs, measured in one throughput record."""

    num_envs: int
    collect: tuple[float, float, float]  # env steps/s of +inference: median, ci_low, ci_high
    learn: tuple[float, float, float]  # samples learned/s of learn
    trainer: str  # the definition both ran (suites/ppo.toml case ...)
    case_key: str
    fixed_s: float = 0.0  # startup + compile of that record (at its num_envs)

    collect_phase: str = "collect"  # the phase collection was measured by: collect, or +inference (older records)
    learn_case: str = ""  # the record whose learn phase it takes, where not its own (same learner: phases.learner_key)
    learner: str = ""  # the collect phase's learner (phases.learner_key; "" in records before it was recorded)

    def train_s(self, steps: float) -> tuple[float, float, float]:
        """Seconds to collect and learn `steps` env steps: (median, low, high)."""
        (c, c_lo, c_hi), (le, le_lo, le_hi) = self.collect, self.learn
        return steps * (1 / c + 1 / le), steps * (1 / c_hi + 1 / le_hi), steps * (1 / c_lo + 1 / le_lo)

    @property
    def rate(self) -> float:
        """Env steps/s of training, collection and learning together."""
        return 1 / (1 / self.collect[0] + 1 / self.learn[0])

    @property
    def how(self) -> str:
        return (f"{self.trainer}: collection {self.collect[0]:,.0f} ({self.collect_phase} phase) + learning "
                f"{self.learn[0]:,.0f} steps/s" + (f" (learn phase of {self.learn_case}: the same learner)" if self.learn_case else ""))


@dataclass(frozen=True)
class EndToEnd:
    """A trainer's training measured whole, in one time-to-reward record (per seed: env steps trained
    / training seconds, startup, compile and evaluation apart)."""

    num_envs: int
    rates: tuple[float, float, float]  # env steps/s of training: median, lowest, highest over seeds
    trainer: str
    trainer_id: str  # the case's trainer (sb3, brax_ppo): what options_for keeps one model of
    case_key: str
    seeds: int
    fixed_s: float  # startup + compile, median over seeds
    runs: tuple[tuple[float, float], ...] = ()  # per seed that trained: (env steps, training seconds)

    def train_s(self, steps: float) -> tuple[float, float, float]:
        m, lo, hi = self.rates
        return steps / m, steps / hi, steps / lo

    @property
    def rate(self) -> float:
        return self.rates[0]

    @property
    def how(self) -> str:
        return f"{self.trainer}: measured end to end, {self.rates[0]:,.0f} env steps/s of training over {self.seeds} seed(s)"


Training = Parts | EndToEnd


Learners = dict[str, tuple[PhaseRate, str]]  # learner key -> (its newest learn phase, that record's case key)


def learners_of(records: list[Record]) -> Learners:
    """The newest learn phase of each learner (phases.learner_key) in these records (one machine's)."""
    out: Learners = {}
    for r in sorted(records, key=lambda r: r.created_utc):
        le = of(r).phase_rates(r).get("learn")
        if le is not None and le.learner:
            out[le.learner] = (le, r.case_key)
    return out


def parts_of(r: Record, learners: Learners | None = None) -> Parts | None:
    """The training parts one throughput record measured: its collect (else +inference) phase, and
    its learn phase, else the learn phase of another record of the machine that ran the same learner
    (the task's definition, on the same device: learning does not depend on the simulator)."""
    rates = of(r).phase_rates(r)
    phase = "collect" if "collect" in rates else "inference"
    c, le = rates.get(phase), rates.get("learn")
    learn_case = ""
    if c is not None and le is None and learners and c.learner in learners:
        le, learn_case = learners[c.learner]
    if c is None or le is None:
        return None
    trainer = f"SB3 PPO, {c.definition}" if c.definition else "SB3 PPO, the shared definition"
    step = of(r).step_rate(r)
    return Parts(c.num_envs, (c.median, c.ci_low, c.ci_high), (le.median, le.ci_low, le.ci_high), trainer, r.case_key,
                 step.fixed_s if step else 0.0, "collect" if phase == "collect" else "+inference", learn_case, c.learner)


def end_to_end_of(r: Record) -> EndToEnd | None:
    """A trainer's training as one time-to-reward record measured it, whole; None for records that
    train nothing. A native trainer's model; the shared SB3 trainer's where no parts were measured."""
    trainer, runs = of(r).trained_runs(r)
    rates = of(r).training_rates(r)
    if trainer is None or not rates:
        return None
    fixed = of(r).training_fixed_s(r)
    return EndToEnd(r.case.num_envs, (rates[len(rates) // 2], rates[0], rates[-1]), f"{of(r).trainer_text(r)}, {r.suite} suite",
                    trainer, r.case_key, len(rates), fixed, tuple((steps, secs) for steps, secs, _ in runs))


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
    ttr: str = ""  # what the time-to-reward records say
    training: Training | None = None  # what training costs, where its records measured it (the faster of the two models)

    def wall_s(self, budget: int, configs: int) -> float:
        return configs * (self.fixed_s + budget / self.rate)

    def predicted_s(self, budget: int, configs: int) -> tuple[float, float, float] | None:
        """Predicted wall-clock to train `configs` x `budget` steps (median, low, high), or None without parts."""
        if self.training is None:
            return None
        mid, lo, hi = self.training.train_s(budget)
        fixed = self.training.fixed_s  # the startup and compile of the size the parts were measured at
        return configs * (fixed + mid), configs * (fixed + lo), configs * (fixed + hi)


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
    checks: list[ModelCheck] = field(default_factory=list)  # the training model against time-to-reward records
    versus: list[str] = field(default_factory=list)  # the course's rule against the numbers: agreement or not, the crossover
    other_machines: list[str] = field(default_factory=list)  # machines in the records this answer is not from (--machine N)
    unfinished: list[str] = field(default_factory=list)  # its half-finished runs, taken in (--partial) or left out (also in why)
    pick: Option | None = None  # the option the answer names
    row_key: str = ""  # the row's key in ROWS: course, small, configs, gpu
    validation: Validation | None = None  # what checks the pick's prediction (or the run that would)

    def to_dict(self) -> dict:
        """Everything `decide` prints, for `decide --json`: the pick, the row, the prediction and its
        validation as fields (a consumer never parses the prose of `answer` and `why`)."""
        def option(o: Option) -> dict:
            pred = o.predicted_s(self.budget, self.configs)
            return {"backend": o.selector, "num_envs": o.num_envs, "env_steps_per_s": o.rate, "ci": list(o.ci),
                    "startup_compile_s": o.fixed_s, "measured_on": o.device, "case": o.case_key,
                    "stepping_s": o.wall_s(self.budget, self.configs),
                    "why_no_training": not_predicted(self.task, o.selector) if o.training is None else None,
                    "training": None if pred is None or o.training is None else {
                        "predicted_s": pred[0], "low_s": pred[1], "high_s": pred[2], "num_envs": o.training.num_envs,
                        "trainer": o.training.trainer, "how": o.training.how, "case": o.training.case_key,
                        "training_steps_per_s": o.training.rate,
                        **({"collection_steps_per_s": o.training.collect[0], "learning_samples_per_s": o.training.learn[0]}
                           if isinstance(o.training, Parts) else {"measured_end_to_end": True})}}

        total = self.budget * self.configs
        return {"task": self.task, "budget": self.budget, "configs": self.configs, "machine": self.machine, "row": self.row,
                "row_key": self.row_key,
                "pick": None if self.pick is None else option(self.pick),
                "gpu_measured_here": any(o.gpu_backend and o.device != "cpu" for o in self.options),
                "course": {"budget_limit_steps": BUDGET_LIMIT, "total_steps": total, "below_budget_limit": total < BUDGET_LIMIT,
                           "configs_envpool": CONFIGS_ENVPOOL, "course_task": self.row_key == "course"},
                "validation": None if self.validation is None else self.validation.to_dict(),
                "answer": self.answer, "why": self.why, "needs_gpu": self.needs_gpu, "versus_the_course": self.versus,
                "other_machines": self.other_machines,
                "options": [option(o) for o in self.options],
                "model_checks": [{"case": c.case_key, "predicted_s": c.predicted_s, "low_s": c.predicted_lo, "high_s": c.predicted_hi,
                                  "measured_s": c.measured_s, "seeds": c.seeds, "reached": c.reached, "env_steps": c.env_steps,
                                   "error": c.error, "text": c.text} for c in self.checks]}


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


def pick_machine(task: str, records: list[Record], machine: str | None,
                 groups: list[tuple[str, list[Record]]] | None = None) -> tuple[str, list[Record], list[tuple[str, list[Record]]]]:
    """(label, its records of `task`, the other machines' (label, records)) for one machine: the one `machine`
    names (its number in `gpuenv show`'s order, or text in its label), else the one with the newest
    records of this task. Records of different machines never mix in one answer."""
    from gpuenv.measure.fingerprint import machines

    if groups is None:  # a caller deciding many times over the same records passes them grouped once
        groups = machines(records)  # all records, as `gpuenv show` and the site number machines
    numbered = [(i, label, [r for r in recs if r.status == "ok" and r.case.task == task]) for i, (label, recs) in enumerate(groups, 1)]
    numbered = [g for g in numbered if g[2]]
    if not numbered:
        raise UserError(f"no ok record of task {task!r} in these results: measure it first "
                        f"(gpuenv bench --task {task}), or pass the directories that have it")
    listing = "; ".join(f"[{i}] {label}" for i, label, _ in numbered)
    if machine is None:
        chosen = max(numbered, key=lambda g: max(r.created_utc for r in g[2]))
    else:
        found = [g for g in numbered if (machine.strip() == str(g[0])) or (not machine.strip().isdigit() and machine.lower() in g[1].lower())]
        if len(found) != 1:
            raise UserError(f"--machine {machine!r} names {'none' if not found else len(found)} of the machines with {task} records "
                            f"({listing}): pass its number or a part of its label only it has")
        chosen = found[0]
    others = [(f"[{i}] {label}", recs) for i, label, recs in numbered if i != chosen[0]]
    return f"[{chosen[0]}] {chosen[1]}", chosen[2], others


def projections(task: str, opts: list[Option], budget: int, configs: int) -> list[str]:
    """For each GPU backend offering `task` that these records never measured on a GPU: each published
    claim of its env-step rate on a GPU or TPU (claims/register.toml), as what stepping through the
    budget would take at that rate: an unverified projection, beside the command that would measure it."""
    from gpuenv.claims.register import load_register
    from gpuenv.format import duration
    from gpuenv.registry import default_registry

    on_gpu = {o.selector.split(":", 1)[0] for o in opts if o.gpu_backend and o.device != "cpu"}
    gpu_backends = [b.name for b in default_registry().visible() if b.device == "gpu" and task in b.tasks and b.name not in on_gpu]
    out = []
    for c in load_register():
        backend = c.check.backend.split(":", 1)[0]
        rate = c.value if c.value is not None else c.value_low  # a range: its low end
        if (c.check.kind != "rate" or backend not in gpu_backends or c.check.task != task or c.unit != "env steps/s"
                or c.hardware_class not in ("gpu", "tpu") or not rate):
            continue
        out.append(f"unverified projection from {c.who}'s claim '{c.stated}' ({c.hardware}): {configs} x {budget:,} steps of "
                   f"{backend} stepping in {duration(configs * budget / float(rate))} at that rate, no training, not measured here "
                   f"(claim {c.id}); measure it on a GPU machine: make gpu-check, or gpuenv bench --suite throughput "
                   f"--backend {backend} --task {task}")
    return out


def newest_line(label: str, recs: list[Record]) -> str:
    return f"{label} (newest record {max(r.created_utc for r in recs)[:16].replace('T', ' ')} UTC)"


def across_machines(opts: list[Option], elsewhere: list[tuple[str, list[Option]]], budget: int, configs: int) -> list[str]:
    """The course's question when this machine measured no GPU simulator on a GPU and another machine
    in the records did: that machine's quickest GPU-measured backend beside this one's quickest CPU
    backend, each on its own machine, and the budget above which the GPU machine finishes first where
    both were measured the same way (training, or stepping)."""
    from gpuenv.format import duration

    cpu = [o for o in opts if o.device == "cpu" and not o.gpu_backend]
    if not cpu:
        return []

    def quickest(among: list[Option]) -> Option:
        return min(among, key=lambda o: (o.training is None, _cost(o, budget, configs)[1]))

    c = quickest(cpu)
    cf, cs, ck = _cost(c, budget, configs)
    out = []
    for label, theirs in elsewhere:
        gpu = [o for o in theirs if o.gpu_backend and o.device != "cpu"]
        if not gpu:
            continue
        g = quickest(gpu)
        gf, gs, gk = _cost(g, budget, configs)
        line = (f"measured on another machine, {without_speed(label)}: {g.selector} on its GPU, {gk} "
                f"{duration(gf + gs * budget)} for {configs} x {budget:,} steps at {g.training.num_envs if g.training else g.num_envs} envs, "
                f"against {c.selector} here, {ck} {duration(cf + cs * budget)}")
        if gk == ck:
            x = crossover(c, g, configs)
            if x is not None:
                line += f"; the GPU machine finishes first above {x:,.0f} steps per run"
            elif gs < cs:
                line += "; the GPU machine finishes first at every budget"
            elif gf < cf:  # slower per step, quicker to start: first only for short runs
                line += f"; the GPU machine finishes first only below {(cf - gf) / (gs - cs):,.0f} steps per run: it is slower per step"
            else:
                line += "; the GPU machine never finishes first: it is slower per step"
        if isinstance(g.training, Parts) and isinstance(c.training, Parts) and gk == ck == "training":
            line += (f" (learning {g.training.learn[0]:,.0f} samples/s there, {c.training.learn[0]:,.0f} here; collection "
                     f"{g.training.collect[0]:,.0f} there, {c.training.collect[0]:,.0f} here)")
        out.append(line)
    return out


def benchmark_only(r: Record) -> str | None:
    """Why no trainer steps the way this record's variant did (its backend's `benchmark_only`), or None."""
    from gpuenv.registry import default_registry

    b = default_registry().backends.get(r.case.backend)
    return b.benchmark_only.get(r.case.variant) if b else None


def options_for(task: str, machine: str, recs: list[Record]) -> list[Option]:
    """One option per backend:variant from one machine's ok records of the task (pick_machine)."""
    from gpuenv.claims import device_class
    from gpuenv.registry import default_registry

    reg = default_registry()
    best: dict[str, Option] = {}
    for r in recs:
        step = of(r).step_rate(r)
        if step is None or benchmark_only(r):
            continue
        sel = r.case.label
        if sel in best and best[sel].rate >= step.median:
            continue
        b = reg.backends.get(r.case.backend)
        best[sel] = Option(sel, step.num_envs, step.median, (step.ci_low, step.ci_high), step.fixed_s,
                           device_class(r), bool(b and b.device == "gpu"), r.case_key)
    if not best:
        raise UserError(f"no throughput record of task {task!r} on {machine}: run `gpuenv bench --task {task}` first")
    models: dict[str, dict[str, Training]] = {sel: {} for sel in best}  # per backend:variant, per trainer, the newest
    learners = learners_of(recs)
    for r in sorted(recs, key=lambda r: r.created_utc):
        sel = r.case.label
        if sel not in best:
            continue
        if (p := parts_of(r, learners)) is not None:
            models[sel]["sb3"] = p  # the shared trainer: composed from parts wherever they were measured
        elif (e := end_to_end_of(r)) is not None:
            if not isinstance(models[sel].get(e.trainer_id), Parts):  # its own time-to-reward runs check the parts instead
                models[sel][e.trainer_id] = e
            best[sel].ttr = f"{of(r).training_line(r)}, training at {e.rate:,.0f} env steps/s (median over seeds) at {e.num_envs} envs"
    for sel, trained in models.items():
        if trained:
            best[sel].training = max(trained.values(), key=lambda m: m.rate)
    return sorted(best.values(), key=lambda o: -o.rate)


@dataclass(frozen=True)
class Validation:
    """What checks a prediction: the time-to-reward runs of its machine, backend, task and size that the
    composed model was set against (their errors), the end-to-end measurement itself, or none (and the
    run that would check it)."""

    kind: str  # "model checks", "measured end to end", "not validated"
    checks: tuple[str, ...] = ()  # the time-to-reward records' case keys
    error_low: float | None = None  # predicted / measured - 1, lowest and highest over the checks
    error_high: float | None = None
    would_validate: str | None = None  # the command whose records would check it

    seeds: int = 0  # the seeds the checks trained (model checks), or those checked one against the others (end to end)

    @property
    def text(self) -> str:
        if self.kind == "model checks" and self.error_low is not None and self.error_high is not None:
            span = (f"{100 * self.error_low:+.0f}%" if len(self.checks) == 1 else
                    f"{100 * self.error_low:+.0f}% to {100 * self.error_high:+.0f}%")
            return (f"validated by {len(self.checks)} time-to-reward run(s) of this machine ({', '.join(self.checks)}; "
                    f"{self.seeds} seed(s)): error {span}")
        if self.kind == "measured end to end":
            checked = (f"; each of its {self.seeds} seeds' training time from the other seeds' rate: error {100 * self.error_low:+.0f}% "
                       f"to {100 * self.error_high:+.0f}%" if self.error_low is not None and self.error_high is not None else
                       "; one seed, so no seed checks another")
            return f"measured end to end ({', '.join(self.checks)}): the prediction is that training's own rate{checked}"
        return "not validated" + (f": {self.would_validate} would validate it" if self.would_validate else
                                  ": no time-to-reward suite trains it with this trainer at the parts' size yet")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "checks": list(self.checks), "error_low": self.error_low, "error_high": self.error_high,
                "seeds": self.seeds, "would_validate": self.would_validate, "text": self.text}


TTR_SUITES = ("ppo-smoke", "validate", "ppo")  # where a validating run is looked for: the quicker suites first


def would_validate(task: str, selector: str, trainer: str = "sb3", num_envs: int | None = None) -> str | None:
    """The command of the quickest time-to-reward suite (TTR_SUITES' order) with a case that trains `task`
    on `selector` with `trainer`, at `num_envs` where given (the parts' size: model_checks pairs a training
    with parts of its own size only), or None."""
    from gpuenv.registry import default_registry
    from gpuenv.suites import load_any

    backend, _, variant = selector.partition(":")
    for name in TTR_SUITES:
        _, suite = load_any(name, default_registry())
        for c in suite.cases:
            if (c.trainer == trainer and c.task == task and c.backend == backend and (not variant or c.variant == variant)
                    and (num_envs is None or c.num_envs == num_envs)):
                return f"gpuenv bench --suite {name} --task {task} --backend {selector}"
    return None


def nothing_to_train(task: str) -> str | None:
    """Why no trainer has anything to learn on this task (a speed scene without reward), else None."""
    from gpuenv.tasks import find_task

    t = find_task(task)
    if t is None or t.rewarded:
        return None
    return f"nothing to train: {task} has no reward (a speed scene: stepping only)"


def not_predicted(task: str, selector: str) -> str:
    """Why an option has no training prediction, and what would give it one."""
    from gpuenv.envs import ROOT
    from gpuenv.modes.throughput.phases import shared_definition
    from gpuenv.registry import default_registry

    untrainable = nothing_to_train(task)
    if untrainable:
        return untrainable
    backend, _, variant = selector.partition(":")
    b = default_registry().backends.get(backend)
    run = would_validate(task, selector) or would_validate(task, selector, "pufferl")
    then = f"; a time-to-reward run would measure it end to end: {run}" if run else ""
    if shared_definition(task, backend, variant) is None:
        return f"{NO_TRAINING} (suites/ppo.toml has no shared PPO definition for {task}){then}"
    if b is None or b.ppo_env is None:
        return f"{NO_TRAINING} ({backend} has no VecEnv for the shared PPO trainer){then}"
    if b.ppo_env.variants is not None and variant not in b.ppo_env.variants:
        return f"{NO_TRAINING} (the shared PPO trainer runs {backend} as {', '.join(b.ppo_env.variants)}, not {variant}){then}"
    if b.environment is not None and not b.environment.pins("stable-baselines3", ROOT):
        return f"{NO_TRAINING} ({backend}'s env trains served from its own environment, not in a throughput worker){then}"
    return f"{NO_TRAINING} (these records have no collect phase of it: gpuenv bench --suite quick --task {task} measures it){then}"


def validation_of(o: Option, task: str, checks: list[ModelCheck]) -> Validation | None:
    """The validation of one option's training prediction (None where nothing is predicted)."""
    if o.training is None:
        return None
    if isinstance(o.training, EndToEnd):
        errs = end_to_end_checks(o.training)
        return Validation("measured end to end", (o.training.case_key,), errs[0] if errs else None, errs[-1] if errs else None,
                          seeds=len(errs))
    mine = [c for c in checks if c.parts_case == o.training.case_key]
    if mine:
        errs = sorted(c.error for c in mine)
        return Validation("model checks", tuple(c.case_key for c in mine), errs[0], errs[-1], seeds=sum(c.seeds for c in mine))
    return Validation("not validated", would_validate=would_validate(task, o.selector, num_envs=o.training.num_envs))


@dataclass(frozen=True)
class ModelCheck:
    """The training model against one time-to-reward record of the same machine, backend, task and size:
    every seed that trained, to the threshold or to its budget (a fixed step budget is a check of the
    time model too: what the seed spent is what the model predicts for its steps)."""

    case_key: str  # the time-to-reward record's
    task: str
    parts_case: str
    seeds: int
    measured_s: float  # training seconds (startup, compile and evaluation excluded), median over seeds
    predicted_s: float  # the model's for the same env steps, median over seeds
    predicted_lo: float
    predicted_hi: float
    reached: int = 0  # of the seeds, those that reached the threshold (the rest stopped at the budget)
    env_steps: float = 0.0  # env steps trained, median over seeds

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted_s / self.measured_s - 1

    @property
    def text(self) -> str:
        """The check in one sentence (decide's table and decision.html print it)."""
        from gpuenv.format import duration

        to = ("to the threshold" if self.reached == self.seeds else "to the budget" if not self.reached else
              f"to the threshold ({self.reached}) or the budget ({self.seeds - self.reached})")
        steps = f", {self.env_steps:,.0f} env steps" if self.env_steps else ""
        return (f"{self.case_key}: predicted {duration(self.predicted_s)} [{duration(self.predicted_lo)}-{duration(self.predicted_hi)}] "
                f"of training, measured {duration(self.measured_s)} (median of {self.seeds} seeds trained {to}{steps}): "
                f"error {100 * self.error:+.0f}%")


def model_checks(records: list[Record]) -> list[ModelCheck]:
    """Every time-to-reward record with seeds that trained (to the threshold or to the budget), predicted
    from the parts measured on the same machine for its backend:variant, task and num_envs (SB3 trainers
    only: a native trainer's collection and learning overlap on the device, which these parts do not
    model; its end-to-end rate is checked seed against seed, end_to_end_checks)."""
    from statistics import median

    from gpuenv.measure.fingerprint import machines

    out = []
    for _, recs in machines([r for r in records if r.status == "ok"]):
        parts = {}
        learners = learners_of(recs)
        for r in sorted(recs, key=lambda r: r.created_utc):
            if (p := parts_of(r, learners)) is not None:
                parts[(r.case.label, r.case.task, r.case.num_envs)] = p
        for r in recs:
            trainer, runs = of(r).trained_runs(r)
            p = parts.get((r.case.label, r.case.task, r.case.num_envs))
            if not runs or p is None or trainer != "sb3":
                continue
            if p.learner and (ran := of(r).trained_learner(r)) is not None and ran != p.learner:
                continue  # another definition (hyperparameters, device, threads) than the parts measured
            pred = [p.train_s(steps) for steps, _, _ in runs]
            out.append(ModelCheck(r.case_key, r.case.task, p.case_key, len(runs), median(s for _, s, _ in runs),
                                  median(x[0] for x in pred), median(x[1] for x in pred), median(x[2] for x in pred),
                                  sum(reached for _, _, reached in runs), median(steps for steps, _, _ in runs)))
    return out


def end_to_end_checks(e: EndToEnd) -> list[float]:
    """A measured-end-to-end prediction checked seed against seed (leave one out): each seed's training
    seconds predicted from the median rate of the same record's other seeds; predicted / measured - 1 per
    seed, sorted. [] with fewer than two seeds."""
    from statistics import median

    if len(e.runs) < 2:
        return []
    out = []
    for i, (steps, secs) in enumerate(e.runs):
        rate = median(s / t for j, (s, t) in enumerate(e.runs) if j != i)
        out.append((steps / rate) / secs - 1)
    return sorted(out)


def _cost(o: Option, budget: int, configs: int) -> tuple[float, float, str]:
    """(fixed seconds, seconds per step, what it is) of an option: training where predicted, else stepping."""
    if o.training is not None:
        return configs * o.training.fixed_s, configs / o.training.rate, "training"
    return configs * o.fixed_s, configs / o.rate, "stepping"


def crossover(a: Option, b: Option, configs: int) -> float | None:
    """The budget (steps per run) above which b, with the larger startup and compile, finishes first;
    None where it never does (or always does). Both measured the same way (training, or stepping)."""
    fa, sa, _ = _cost(a, 1, configs)
    fb, sb, _ = _cost(b, 1, configs)
    if sb >= sa or fb <= fa:
        return None
    return (fb - fa) / (sa - sb)


def versus_rule(row: str, pick: Option, fastest: Option, opts: list[Option], budget: int, configs: int) -> list[str]:
    """The course's rule beside the numbers: where the row's pick is not the fastest measured, say so;
    the crossover budget where a GPU-measured backend and a CPU one were both measured the same way."""
    from gpuenv.format import duration

    out = []
    fp, fs, kind = _cost(fastest, budget, configs)
    gpu = [o for o in opts if o.gpu_backend and o.device != "cpu"]
    if row == ROWS["gpu"] and not gpu:
        out.append(f"the course's rule ({row}) cannot be checked here: no GPU simulator was measured on a GPU; the fastest "
                   f"measured is {fastest.selector}: {kind} {duration(fp + fs * budget)}")
    elif fastest is not pick:
        pp, ps, pkind = _cost(pick, budget, configs)
        out.append(f"the course's rule ({row}) points to {pick.selector}: {pkind} {duration(pp + ps * budget)}; measured here, "
                   f"{fastest.selector} is faster: {kind} {duration(fp + fs * budget)}")
    else:
        out.append(f"the course's rule ({row}) and the numbers agree: {pick.selector} is the fastest measured ({kind})")
    cpu = [o for o in opts if o.device == "cpu" and not o.gpu_backend]
    if gpu and cpu:
        g = min(gpu, key=lambda o: _cost(o, budget, configs)[1])
        c = min(cpu, key=lambda o: _cost(o, budget, configs)[1])
        if (g.training is None) == (c.training is None):
            x = crossover(c, g, configs)
            out.append(f"{g.selector} on the GPU repays its startup and compile over {c.selector} above {x:,.0f} steps per run"
                       if x is not None else f"{g.selector} on the GPU never repays its startup over {c.selector} here")
    else:
        out.append("no crossover budget: it needs a GPU simulator measured on a GPU and a CPU one, the same way, on one machine")
    return out


def decide(task: str, budget: int, configs: int, records: list[Record], machine: str | None = None, partial: bool = False,
           groups: list[tuple[str, list[Record]]] | None = None) -> Decision:
    """The answer from one machine's records (pick_machine); a half-finished run among them
    (results.runs.half_finished) is refused unless `partial`, and then named in the why lines."""
    from gpuenv.results.runs import half_finished

    if configs < 1:
        raise UserError(f"--configs must be >= 1 (got {configs})")
    machine, recs, others = pick_machine(task, records, machine, groups)
    runs = {r.run_id for r in recs}
    unfinished = {run: reason for run, reason in half_finished(records).items() if run in runs}
    left_out: dict[str, str] = {}
    if unfinished and not partial:  # answer from the machine's finished runs; refuse where only half-finished ones remain
        kept = [r for r in recs if r.run_id not in unfinished]
        if not any(of(r).step_rate(r) is not None for r in kept):
            run, reason = next(iter(unfinished.items()))
            raise UserError(f"run {run} of {without_speed(machine)} is half-finished ({reason}): an answer from it can "
                            "lack the backends it never reached; pass --partial to decide from it anyway, finish it "
                            f"(gpuenv bench ... --run-id {run}), or pick another machine with --machine N")
        recs, left_out, unfinished = kept, unfinished, {}
    opts = options_for(task, machine, recs)
    checks = [c for c in model_checks(recs) if c.task == task]  # recs: this machine's ok records of the task
    total = budget * configs
    protocol_only = sorted({(r.case.label, b) for r in recs if (b := benchmark_only(r)) and of(r).step_rate(r) is not None})
    from gpuenv.format import duration

    def wall(o: Option) -> float:
        """What the decision ranks by: the predicted training wall-clock where the parts were measured,
        else the stepping wall-clock (far shorter: never ranked against a training prediction)."""
        p = o.predicted_s(budget, configs)
        return p[0] if p else o.wall_s(budget, configs)

    def first(among: list[Option]) -> Option:
        modelled = [o for o in among if o.training]  # a training prediction is never ranked against a stepping time
        return min(modelled or among, key=wall)

    fastest = first(opts)

    def quickest(among: list[Option]) -> Option:
        """Of these options the one that trains (else steps) through the budget first; options with a
        training prediction come before those without; the fastest of all where there are none."""
        return first(among) if among else fastest

    def line(o: Option) -> str:
        p = o.predicted_s(budget, configs)
        if p and o.training:
            v = validation_of(o, task, checks)
            ppo = (f"; PPO training {duration(p[0])} [{duration(p[1])}-{duration(p[2])}] predicted at {o.training.num_envs} envs "
                   f"({o.training.how}){'; ' + v.text if v else ''}")
        else:
            ppo = f"; {nothing_to_train(task) or 'PPO training not predicted: ' + not_predicted(task, o.selector)}"
        return (f"{o.selector} at {o.num_envs} envs: {o.rate:,.0f} env steps/s -> {duration(o.wall_s(budget, configs))} of stepping "
                f"for {configs} x {budget:,} steps ({o.fixed_s:.0f} s startup+compile per run){ppo}")

    why, needs = [], []
    gpu_here = [o for o in opts if o.gpu_backend and o.device != "cpu"]
    gpu_cpu = [o for o in opts if o.gpu_backend and o.device == "cpu"]
    if gpu_cpu:
        needs.append(f"{', '.join(o.selector for o in gpu_cpu)} step on a GPU where there is one; here they were measured on the CPU, "
                     f"so the '{ROWS['gpu']}' row and how far below {BUDGET_LIMIT // 1_000_000}M steps a GPU stops paying for its "
                     "startup and compile need GPU measurements (gpuenv bench --suite throughput on a GPU machine)")
    needs += projections(task, opts, budget, configs)
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
    elif total < BUDGET_LIMIT:
        row = ROWS["small"]
        cpu_backends = [o for o in opts if not o.gpu_backend]
        pick = quickest(cpu_backends)
        head = f"{total:,} steps in all is below the course's {BUDGET_LIMIT:,}: "
        why.append(f"{head}the fastest CPU backend measured here finishes in {duration(wall(pick))}: {line(pick)}" if cpu_backends else
                   f"{head}no CPU backend was measured on this machine (compare with a CPU machine's records: --machine N); "
                   f"its fastest finishes in {duration(wall(pick))}: {line(pick)}")
    else:
        row = ROWS["gpu"]
        pick = quickest(gpu_here)
        why.append(f"{total:,} steps in all is not below the course's {BUDGET_LIMIT:,} ({THRESHOLD_TEXT}): at this scale a GPU "
                   "simulator pays for its startup")
        if not gpu_here:
            why.append(f"this machine measured no backend on a GPU; its fastest is {line(pick)}")
    for o in opts:
        if o is not pick:
            why.append(f"vs {line(o)}")
    why += [f"{sel} left out: {reason}" for sel, reason in protocol_only]
    halves = [*(f"from half-finished run {run} ({half}), as --partial asked" for run, half in unfinished.items()),
              *(f"left out half-finished run {run} ({half}); --partial takes it in" for run, half in left_out.items())]
    why += halves
    if pick.ttr:
        why.append(pick.ttr)
    verdict = versus_rule(row, pick, fastest, opts, budget, configs)
    if not gpu_here:  # another machine of the records may have measured a GPU simulator on its GPU
        elsewhere = []
        for label, theirs in others:
            try:
                elsewhere.append((label, options_for(task, label, theirs)))
            except UserError:  # only time-to-reward records there
                continue
        verdict += across_machines(opts, elsewhere, budget, configs)
    where = f"on the records' machine ({without_speed(machine)})"
    pred = pick.predicted_s(budget, configs)
    if pred and pick.training:
        answer = (f"{pick.selector}: trains {configs} x {budget:,} steps in {duration(pred[0])} [{duration(pred[1])}-{duration(pred[2])}] "
                  f"{where}, predicted for {pick.training.trainer} at {pick.training.num_envs} envs")
    else:
        answer = (f"{pick.selector} ({pick.num_envs} envs): {duration(wall(pick))} of stepping {where}; "
                  + (nothing_to_train(task) or f"training not predicted ({not_predicted(task, pick.selector)})"))
    validation = validation_of(pick, task, checks)
    if row == ROWS["gpu"] and not gpu_here:
        from gpuenv.registry import default_registry

        gpu_backends = ", ".join(b.name for b in default_registry().visible() if b.device == "gpu" and task in b.tasks)
        answer = (f"a GPU simulator ({gpu_backends or 'none offers ' + task}), not measured on a GPU here; "
                  f"this machine's fastest: {answer}")
    if isinstance(pick.training, EndToEnd):
        answer += (f"; not composed: the interval is the spread of its {pick.training.seeds} seed(s)' training rates"
                   + (f"; {validation.text}" if validation is not None else ""))
    elif pred and validation is not None:
        answer += f"; the interval is the parts' measurement noise only; {validation.text}"
    row_key = next(k for k, v in ROWS.items() if v == row)
    return Decision(task, budget, configs, machine, opts, row, answer, why, needs, checks, verdict,
                    [newest_line(label, theirs) for label, theirs in others], halves, pick, row_key, validation)


def decide_each(tasks: list[str] | None, budget: int, configs: int, records: list[Record], machine: str | None = None,
                partial: bool = False) -> list[tuple[str, Decision | str]]:
    """decide() for each task (default: every task with a throughput record, in catalogue order), the
    machine grouping computed once; a task that cannot be answered gets its one-line reason instead."""
    from gpuenv.measure.fingerprint import machines
    from gpuenv.tasks import task_rank

    if tasks is None:
        tasks = sorted({r.case.task for r in records if r.status == "ok" and of(r).step_rate(r) is not None}, key=task_rank)
        if not tasks:
            raise UserError("no ok throughput record in these results: run `gpuenv bench` first")
    groups = machines(records)
    out: list[tuple[str, Decision | str]] = []
    for task in tasks:
        try:
            out.append((task, decide(task, budget, configs, records, machine, partial, groups)))
        except UserError as e:
            out.append((task, str(e)))
    return out

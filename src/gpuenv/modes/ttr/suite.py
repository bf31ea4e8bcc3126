"""Time-to-reward suites: TOML files with `kind = "time-to-reward"`, validated before any training.

    description = "..."
    kind = "time-to-reward"
    [run]
    seeds = 3               # independent training runs per case, one worker process each
    pass_min_seeds = 2      # the case passes when at least this many runs reach the threshold
    timeout_s = 1800        # per run (worker process); a run past it is recorded as failed
    [[case]]
    task = "cartpole"
    backends = ["<backend>:<variant>", "<backend>"]
    trainer = "sb3"         # sb3 (shared) or a native trainer a backend declares (Backend.trainers)
    num_envs = 8            # training envs
    threshold = 475.0       # mean deterministic eval return that counts as solved
    max_env_steps = 200000  # budget: a run that has not reached the threshold by then is censored
    max_time_s = 900        # wall-clock budget (censored likewise)
    eval_every_steps = 10000
    eval_episodes = 10      # on separate eval envs, deterministic policy
    pass_min_seeds = 0      # optional: this case's own pass criterion; 0 = none (for a fixed step budget:
                            # with a threshold out of reach, a run still stops at the threshold)
    [case.hyperparams]      # passed to the trainer; keys checked against the trainer's declared keys

Thresholds live here, not in the libraries: registered reward_thresholds disagree (envpool registers
Hopper at 6000, Gymnasium at 3800) and Isaac Lab scales rewards by dt.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuenv.backends.spec import Trainer, resolve
from gpuenv.errors import UserError
from gpuenv.modes.base import CaseItem, Plan
from gpuenv.registry import Registry
from gpuenv.suites import at_most, unknown_keys
from gpuenv.tasks import get_task

SB3_KEYS = frozenset(
    "learning_rate n_steps batch_size n_epochs gamma gae_lambda clip_range clip_range_vf normalize_advantage "
    "ent_coef vf_coef max_grad_norm use_sde sde_sample_freq target_kl policy_kwargs normalize".split()
)
# The shared trainer: trains on every backend that declares a PPO env (Backend.ppo_env).
SB3 = Trainer(
    "sb3",
    "Stable-Baselines3 PPO (torch, CPU): the shared PPO definition run on every backend that declares a PPO env "
    "(same network, same hyperparameters)",
    SB3_KEYS,
    "gpuenv.modes.ttr.train:train_sb3",
    needs=("stable_baselines3", "torch"),
    check="gpuenv.modes.ttr.suite:check_sb3_values",
)


def trainers(registry: Registry) -> dict[str, tuple[Trainer, str | None]]:
    """trainer name -> (trainer, the backend it belongs to; None for the shared one)."""
    out: dict[str, tuple[Trainer, str | None]] = {SB3.name: (SB3, None)}
    for b in registry.backends.values():
        for tr in b.trainers:
            out[tr.name] = (tr, b.name)
    return out


def trains_on(registry: Registry, trainer: str) -> list[str]:
    """The backend selectors a trainer can train on (for messages)."""
    tr, owner = trainers(registry)[trainer]
    out = []
    for b in registry.visible() if owner is None else [registry.get(owner)]:
        variants = (b.ppo_env.variants if b.ppo_env else ()) if owner is None else tr.variants
        if owner is None and b.ppo_env is None:
            continue
        out += [b.name] if variants is None else [f"{b.name}:{v}" for v in variants]
    return out


def can_train(registry: Registry, trainer: str, backend: str, variant: str) -> bool:
    tr, owner = trainers(registry)[trainer]
    if owner is not None:
        return backend == owner and (tr.variants is None or variant in tr.variants)
    env = registry.get(backend).ppo_env
    return env is not None and (env.variants is None or variant in env.variants)


@dataclass(frozen=True)
class RunSpec:
    seeds: int = 3
    pass_min_seeds: int = 2
    timeout_s: float = 1800.0

    def with_seeds(self, n: int, where: str) -> RunSpec:
        """These settings with n seeds instead (`--seeds`, `bench --processes`, `ab`'s blocks), as many
        required to pass as before but never more than n; UserError naming `where` for an n out of range."""
        if n < 1:
            raise UserError(f"{where}: seeds must be >= 1 (got {n})")
        at_most("seeds", n, where)
        return replace(self, seeds=n, pass_min_seeds=min(self.pass_min_seeds, n))


@dataclass(frozen=True)
class PpoCase:
    backend: str
    variant: str
    task: str
    trainer: str
    num_envs: int
    threshold: float
    max_env_steps: int
    max_time_s: float
    eval_every_steps: int
    eval_episodes: int
    hyperparams: dict[str, Any] = field(default_factory=dict)
    pass_min_seeds: int | None = None  # the case's own pass criterion ([run]'s where None; 0: a fixed step budget)

    @property
    def key(self) -> str:
        return f"ppo-{self.trainer}-{self.backend}-{self.variant}-{self.task}-n{self.num_envs}"

    def to_dict(self) -> dict[str, Any]:
        """The record's case (the pass criterion is the run settings', in the record's settings)."""
        out = asdict(self)
        del out["pass_min_seeds"]
        return out

    def run_of(self, run: RunSpec) -> RunSpec:
        """The run settings this case runs with: [run]'s, with its own pass criterion where it sets one."""
        return run if self.pass_min_seeds is None else replace(run, pass_min_seeds=min(self.pass_min_seeds, run.seeds))


@dataclass(frozen=True)
class PpoSuite:
    name: str
    path: Path
    description: str
    run: RunSpec
    cases: tuple[PpoCase, ...]
    skipped: tuple[str, ...]  # one line per case not run, with why


_TOP = {"description", "kind", "run", "case"}
_RUN = {"seeds": int, "pass_min_seeds": int, "timeout_s": float}
_CASE = {
    "task": str,
    "backends": list,
    "trainer": str,
    "num_envs": int,
    "threshold": float,
    "max_env_steps": int,
    "max_time_s": float,
    "eval_every_steps": int,
    "eval_episodes": int,
    "hyperparams": dict,
    "pass_min_seeds": int,
}
_OPTIONAL = {"hyperparams", "pass_min_seeds"}


def _typed(table: dict, spec: dict[str, type], where: str, required: bool) -> dict:
    bad = sorted(set(table) - set(spec))
    if bad:
        raise UserError(f"{where}: unknown key '{bad[0]}' (allowed: {', '.join(sorted(spec))})")
    out = {}
    for k, typ in spec.items():
        if k not in table:
            if required and k not in _OPTIONAL:
                raise UserError(f"{where}: missing key '{k}'")
            continue
        v = table[k]
        ok = isinstance(v, typ) and not isinstance(v, bool)
        if typ is float:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            v = float(v) if ok else v
        if not ok:
            raise UserError(f"{where}: key '{k}' must be a {'finite number' if typ is float else typ.__name__}, got {v!r}")
        out[k] = v
    return out


def load_ppo_suite(path: Path, data: dict, registry: Registry, *, seeds: int | None = None) -> PpoSuite:
    where = str(path)
    unknown_keys(data, _TOP, where)
    known = trainers(registry)
    run_table = data.get("run", {})
    if not isinstance(run_table, dict):
        raise UserError(f"{where}: [run] must be a table")
    run = RunSpec(**_typed(run_table, _RUN, f"{where} [run]", required=False))
    file_seeds = run.seeds  # a case's own pass criterion is checked against the file's seeds, not --seeds
    if seeds is not None:
        run = run.with_seeds(seeds, "--seeds")
    if run.seeds < 1:
        raise UserError(f"{where}: seeds must be >= 1 (got {run.seeds})")
    if not 1 <= run.pass_min_seeds <= run.seeds:
        raise UserError(f"{where}: pass_min_seeds must be between 1 and seeds ({run.seeds})")
    if run.timeout_s <= 0:
        raise UserError(f"{where}: timeout_s must be > 0")
    at_most("seeds", run.seeds, f"{where} [run]")  # an override was checked by with_seeds, naming --seeds
    at_most("timeout_s", run.timeout_s, f"{where} [run]")
    tables = data.get("case")
    if not isinstance(tables, list) or not tables:
        raise UserError(f"{where}: needs at least one [[case]] table")
    cases: list[PpoCase] = []
    skipped: list[str] = []
    for i, t in enumerate(tables, 1):
        w = f"{where} [[case]] #{i}"
        if not isinstance(t, dict):
            raise UserError(f"{w}: must be a table")
        c = _typed(t, _CASE, w, required=True)
        if c["trainer"] not in known:
            shown = [k for k, (_, owner) in known.items() if owner is None or not registry.get(owner).hidden]
            raise UserError(f"{w}: unknown trainer '{c['trainer']}' (known: {', '.join(shown)})")
        trainer = known[c["trainer"]][0]
        task = get_task(c["task"])
        hp = c.get("hyperparams", {})
        unknown = sorted(set(hp) - trainer.keys)
        if unknown:
            raise UserError(f"{w}: trainer '{trainer.name}' has no hyperparameter '{unknown[0]}' (allowed: {', '.join(sorted(trainer.keys))})")
        for k in ("num_envs", "max_env_steps", "eval_every_steps", "eval_episodes"):
            if c[k] < 1:
                raise UserError(f"{w}: {k} must be >= 1 (got {c[k]})")
        if "pass_min_seeds" in c and not 0 <= c["pass_min_seeds"] <= file_seeds:
            raise UserError(f"{w}: pass_min_seeds must be between 0 (a fixed step budget: no pass criterion) and seeds ({file_seeds})")
        if c["max_time_s"] <= 0:
            raise UserError(f"{w}: max_time_s must be > 0")
        for k in ("num_envs", "max_env_steps", "eval_every_steps", "eval_episodes", "max_time_s"):
            at_most(k, c[k], w)
        if run.timeout_s < 1.5 * c["max_time_s"]:
            raise UserError(
                f"{w}: [run] timeout_s={run.timeout_s:g} must be at least 1.5 x max_time_s={c['max_time_s']:g}: a run "
                "past its time budget must end censored by the trainer, not killed (and lost) by the timeout"
            )
        if c["max_env_steps"] < c["eval_every_steps"]:
            raise UserError(
                f"{w}: budget max_env_steps={c['max_env_steps']} is below eval_every_steps={c['eval_every_steps']}: "
                "no evaluation would ever run; raise the budget or evaluate more often"
            )
        if c["max_env_steps"] % c["eval_every_steps"]:
            raise UserError(
                f"{w}: max_env_steps={c['max_env_steps']} must be a multiple of eval_every_steps={c['eval_every_steps']}, "
                "so that the last steps of the budget are evaluated too"
            )
        if trainer.check:
            resolve(trainer.check)(hp, w)
        if not c["backends"] or not all(isinstance(b, str) for b in c["backends"]):
            raise UserError(f"{w}: key 'backends' must be a non-empty list of str")
        for sel in c["backends"]:
            info, variant = registry.parse(sel)
            variant = variant or info.variants[0]
            if not can_train(registry, trainer.name, info.name, variant):
                raise UserError(
                    f"{w}: trainer '{trainer.name}' cannot train on {info.name}:{variant} "
                    f"(it trains on: {', '.join(trains_on(registry, trainer.name))})"
                )
            why = registry.why_not(task.name, info.name)
            if why:
                skipped.append(f"{sel} / {task.name}: {why}")
                continue
            native = registry.native(task.name, info.name)
            if native.max_return is not None and c["threshold"] > native.max_return:
                raise UserError(
                    f"{w}: threshold {c['threshold']:g} is unreachable: the largest possible episode return of "
                    f"{task.name} on {info.name} ({native.env_id}) is {native.max_return:g}"
                )
            cases.append(
                PpoCase(
                    backend=info.name,
                    variant=variant,
                    task=task.name,
                    trainer=trainer.name,
                    num_envs=c["num_envs"],
                    threshold=c["threshold"],
                    max_env_steps=c["max_env_steps"],
                    max_time_s=c["max_time_s"],
                    eval_every_steps=c["eval_every_steps"],
                    eval_episodes=c["eval_episodes"],
                    hyperparams=hp,
                    pass_min_seeds=c.get("pass_min_seeds"),
                )
            )
    return PpoSuite(path.stem, path, str(data.get("description", "")), run, tuple(cases), tuple(skipped))


ACTIVATIONS = ("tanh", "relu", "elu")


def check_sb3_values(hp: dict, where: str) -> None:
    """Values an SB3 worker would otherwise reject one seed at a time."""
    for k in ("learning_rate", "clip_range"):
        v = hp.get(k)
        if isinstance(v, str):
            try:
                ok = v.startswith("lin_") and float(v[4:]) > 0
            except ValueError:
                ok = False
            if not ok:
                raise UserError(f"{where}: {k} = {v!r}: use a number or 'lin_<start>' (linear decay to 0)")
    act = hp.get("policy_kwargs", {}).get("activation_fn") if isinstance(hp.get("policy_kwargs"), dict) else None
    if act is not None and act not in ACTIVATIONS:
        raise UserError(f"{where}: policy_kwargs.activation_fn = {act!r}: use one of {', '.join(ACTIVATIONS)}")


def filter_cases(suite: PpoSuite, registry: Registry, backends: list[str] | None, tasks: list[str] | None) -> list[PpoCase]:
    """The CLI's --backend / --task filters (a bare backend name matches all its variants)."""
    for b in backends or []:
        registry.parse(b)
    for t in tasks or []:
        get_task(t)
    out = []
    for c in suite.cases:
        if backends and not any(b in (c.backend, f"{c.backend}:{c.variant}") for b in backends):
            continue
        if tasks and c.task not in tasks:
            continue
        out.append(c)
    if not out:
        raise UserError(f"suite '{suite.name}' has no cases for the given --backend/--task filters")
    return out


@dataclass(frozen=True)
class TtrItem(CaseItem):
    """One time-to-reward case and its run settings (the runner's Item: one process per seed)."""

    case: PpoCase
    run: RunSpec

    @property
    def processes(self) -> int:
        return self.run.seeds

    @property
    def timeout_s(self) -> float:
        return self.run.timeout_s


def plan(suite: PpoSuite, registry: Registry, *, backends: list[str] | None, tasks: list[str] | None,
         num_envs: list[int] | None) -> Plan:
    if num_envs:
        raise UserError("--num-envs does not apply to time-to-reward suites (each case sets its own num_envs)")
    cases = filter_cases(suite, registry, backends, tasks)
    return Plan(suite.name, [TtrItem(c, c.run_of(suite.run)) for c in cases], list(suite.skipped), f"{suite.run.seeds} seeds each")

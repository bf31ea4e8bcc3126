"""Time-to-reward suites: TOML files with `kind = "time-to-reward"`, validated before any training.

    description = "..."
    kind = "time-to-reward"
    [run]
    seeds = 3               # independent training runs per case, one worker process each
    pass_min_seeds = 2      # the case passes when at least this many runs reach the threshold
    timeout_s = 1800        # per run (worker process); a run past it is recorded as failed
    [[case]]
    task = "cartpole"
    backends = ["gymnasium:dummy", "envpool:sync"]
    trainer = "sb3"         # sb3 | brax_ppo (see TRAINERS)
    num_envs = 8            # training envs
    threshold = 475.0       # mean deterministic eval return that counts as solved
    max_env_steps = 200000  # budget: a run that has not reached the threshold by then is censored
    max_time_s = 900        # wall-clock budget (censored likewise)
    eval_every_steps = 10000
    eval_episodes = 10      # on separate eval envs, deterministic policy
    [case.hyperparams]      # passed to the trainer; keys checked against TRAINERS[trainer].keys

Thresholds live here, not in the libraries: registered reward_thresholds disagree (envpool registers
Hopper at 6000, Gymnasium at 3800) and Isaac Lab scales rewards by dt.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuenv.errors import UserError
from gpuenv.registry import Registry
from gpuenv.tasks import get_task

KIND = "time-to-reward"


@dataclass(frozen=True)
class Trainer:
    name: str
    description: str
    backends: dict[str, tuple[str, ...] | None]  # backend -> variants it can train on (None = all)
    keys: frozenset[str]  # accepted hyperparameter keys
    needs: tuple[str, ...] = ()  # modules the trainer imports
    extra: str = "ppo"

    def unavailable_reason(self) -> str | None:
        import importlib.util

        missing = [m for m in self.needs if importlib.util.find_spec(m) is None]
        if missing:
            return f"trainer {self.name} is not installed ({', '.join(missing)} missing): pip install 'gpuenv[{self.extra}]'"
        return None


_SB3_KEYS = frozenset(
    "learning_rate n_steps batch_size n_epochs gamma gae_lambda clip_range clip_range_vf normalize_advantage "
    "ent_coef vf_coef max_grad_norm use_sde sde_sample_freq target_kl policy_kwargs normalize".split()
)
_BRAX_KEYS = frozenset(
    "learning_rate entropy_cost discounting unroll_length batch_size num_minibatches num_updates_per_batch "
    "reward_scaling normalize_observations clipping_epsilon gae_lambda max_grad_norm action_repeat "
    "num_resets_per_eval".split()
)

TRAINERS: dict[str, Trainer] = {
    t.name: t
    for t in [
        Trainer(
            "sb3",
            "Stable-Baselines3 PPO (torch, CPU): the native trainer of gymnasium and envpool, and the "
            "shared PPO definition run on every backend (same network, same hyperparameters)",
            {"gymnasium": ("dummy", "subproc"), "envpool": ("sync",), "brax": None, "mjx": None},
            _SB3_KEYS,
            ("stable_baselines3", "torch"),
        ),
        Trainer(
            "brax_ppo",
            "brax.training.agents.ppo (JAX): Brax's native trainer",
            {"brax": None},
            _BRAX_KEYS,
            ("brax", "jax"),
            "brax",
        ),
        Trainer("fake", "test-only trainer with a scripted learning curve", {"fake": None}, frozenset(
            "reach_at_eval diverge_at_eval sleep_s returns".split()
        )),
    ]
}


@dataclass(frozen=True)
class RunSpec:
    seeds: int = 3
    pass_min_seeds: int = 2
    timeout_s: float = 1800.0


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

    @property
    def key(self) -> str:
        return f"ppo-{self.trainer}-{self.backend}-{self.variant}-{self.task}-n{self.num_envs}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PpoSuite:
    name: str
    path: Path
    description: str
    run: RunSpec
    cases: tuple[PpoCase, ...]
    skipped: tuple[tuple[str, str, str], ...]  # (backend selector, task, reason)


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
}


def suite_kind(data: dict) -> str:
    return data.get("kind", "throughput")


def _typed(table: dict, spec: dict[str, type], where: str, required: bool) -> dict:
    bad = sorted(set(table) - set(spec))
    if bad:
        raise UserError(f"{where}: unknown key '{bad[0]}' (allowed: {', '.join(sorted(spec))})")
    out = {}
    for k, typ in spec.items():
        if k not in table:
            if required and k != "hyperparams":
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
    bad = sorted(set(data) - _TOP)
    if bad:
        raise UserError(f"{where}: unknown key '{bad[0]}' (allowed: {', '.join(sorted(_TOP))})")
    run_table = data.get("run", {})
    if not isinstance(run_table, dict):
        raise UserError(f"{where}: [run] must be a table")
    run = RunSpec(**_typed(run_table, _RUN, f"{where} [run]", required=False))
    if seeds is not None:
        run = RunSpec(seeds, min(run.pass_min_seeds, seeds), run.timeout_s)
    if run.seeds < 1:
        raise UserError(f"{where}: seeds must be >= 1 (got {run.seeds})")
    if not 1 <= run.pass_min_seeds <= run.seeds:
        raise UserError(f"{where}: pass_min_seeds must be between 1 and seeds ({run.seeds})")
    if run.timeout_s <= 0:
        raise UserError(f"{where}: timeout_s must be > 0")
    tables = data.get("case")
    if not isinstance(tables, list) or not tables:
        raise UserError(f"{where}: needs at least one [[case]] table")
    cases: list[PpoCase] = []
    skipped: list[tuple[str, str, str]] = []
    for i, t in enumerate(tables, 1):
        w = f"{where} [[case]] #{i}"
        if not isinstance(t, dict):
            raise UserError(f"{w}: must be a table")
        c = _typed(t, _CASE, w, required=True)
        trainer = TRAINERS.get(c["trainer"])
        if trainer is None:
            raise UserError(f"{w}: unknown trainer '{c['trainer']}' (known: {', '.join(k for k in TRAINERS if k != 'fake')})")
        task = get_task(c["task"])
        hp = c.get("hyperparams", {})
        unknown = sorted(set(hp) - trainer.keys)
        if unknown:
            raise UserError(f"{w}: trainer '{trainer.name}' has no hyperparameter '{unknown[0]}' (allowed: {', '.join(sorted(trainer.keys))})")
        for k in ("num_envs", "max_env_steps", "eval_every_steps", "eval_episodes"):
            if c[k] < 1:
                raise UserError(f"{w}: {k} must be >= 1 (got {c[k]})")
        if c["max_time_s"] <= 0:
            raise UserError(f"{w}: max_time_s must be > 0")
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
        _check_values(trainer.name, hp, w)
        if not c["backends"] or not all(isinstance(b, str) for b in c["backends"]):
            raise UserError(f"{w}: key 'backends' must be a non-empty list of str")
        for sel in c["backends"]:
            info, variant = registry.parse(sel)
            variant = variant or info.variants[0]
            allowed = trainer.backends.get(info.name, ())
            if allowed is not None and variant not in allowed:
                raise UserError(
                    f"{w}: trainer '{trainer.name}' cannot train on {info.name}:{variant} "
                    f"(it trains on: {', '.join(_selectors(trainer))})"
                )
            if not task.runnable_on(info.name):
                nt = task.offers.get(info.name)
                skipped.append((sel, task.name, nt.unsupported if nt else "not offered by this backend"))
                continue
            native = task.native(info.name)
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
                )
            )
    return PpoSuite(path.stem, path, str(data.get("description", "")), run, tuple(cases), tuple(skipped))


ACTIVATIONS = ("tanh", "relu", "elu")


def _check_values(trainer: str, hp: dict, where: str) -> None:
    """Values a worker would otherwise reject one seed at a time."""
    if trainer != "sb3":
        return
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


def _selectors(trainer: Trainer) -> list[str]:
    return [b if v is None else f"{b}:{x}" for b, v in trainer.backends.items() for x in (v or [None])]


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

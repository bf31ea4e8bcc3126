"""Peer checks: gpuenv's physics steps/s beside the framework's own benchmark at matched settings,
interleaved round by round in one process, as ratios (1.00: gpuenv measures what the framework's
own tool measures).

A backend declares its peer (Backend.peer: the module, and the rows to run by default and in
make gpu-check); the module defines `peer(variant, env_id, num_envs)` -> a function of a step
count returning the peer's physics steps/s, and `name()`: MJX beside
`mujoco.mjx.benchmark` (what mjx-testspeed runs), Brax's pipelines beside `brax.test_utils.benchmark`.
The peer steps physics only, from an idle state; gpuenv also sets random actions and computes the
observation, the reward and auto-resets. So each row measures gpuenv three ways: as it runs, with
zero actions (the peer's workload: a solver that iterates until it converges needs fewer iterations
on an idle rollout), and without resets where the adapter has that mode; the differences say what
the env layer and the workload cost.
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpuenv.backends.base import Case, action_pool
from gpuenv.errors import UserError
from gpuenv.measure.timing import MeasureSettings, measure_throughput
from gpuenv.registry import default_registry

SIDES = ("gpuenv", "gpuenv_zero_actions", "gpuenv_no_resets")
SOLVER_KEYS = ("solver", "iterations", "ls_iterations", "eulerdamp", "integrator", "physics_timestep_s", "precision", "solver_settings")


@dataclass
class PeerRow:
    selector: str
    task: str
    num_envs: int
    peer: str  # the peer benchmark and its version
    peer_steps: int  # steps per env of each peer call
    physics_steps_per_env_step: int
    solver: dict
    device: str
    physics_steps_per_s: dict[str, list[float]] = field(default_factory=dict)  # per side and "peer"

    def median(self, side: str) -> float:
        return statistics.median(self.physics_steps_per_s[side])

    def ratio(self, side: str) -> float:
        """The side's median physics steps/s over the peer's."""
        return self.median(side) / self.median("peer")

    def line(self) -> str:
        parts = [f"{label} {self.median(side):,.0f} ({self.ratio(side):.2f}x)"
                 for side, label in zip(SIDES, ("gpuenv", "zero actions", "without resets"), strict=True) if side in self.physics_steps_per_s]
        s = self.solver
        return (f"{self.selector} {self.task} n={self.num_envs} on {self.device}: physics steps/s " + ", ".join(parts)
                + f"; peer {self.median('peer'):,.0f} [{self.peer}; {s.get('solver')}, {s.get('iterations')} iterations, "
                f"{s.get('ls_iterations')} line-search, x{self.physics_steps_per_env_step} per env step]")


def rows(which: str = "variants") -> list[str]:
    """backend:variant rows from the backends' declarations (Backend.peer): `variants` (gpuenv peers'
    default), `gpu_check` or `cpu_check` (make gpu-check's), in the registry's order."""
    return [f"{b.name}:{v}" for b in default_registry().backends.values() if b.peer for v in getattr(b.peer, which)]


def peer_module(backend: str):
    peer = default_registry().get(backend).peer
    if peer is None:
        with_peer = sorted(b.name for b in default_registry().backends.values() if b.peer)
        raise UserError(f"{backend} has no peer benchmark in gpuenv (backends with one: {', '.join(with_peer)})")
    return importlib.import_module(peer.module)


def measure_row(selector: str, task: str, num_envs: int, rounds: int, settings: MeasureSettings, sides: tuple[str, ...] = SIDES) -> PeerRow:
    """One row: every side and the peer, interleaved round by round (drift hits them alike)."""
    reg = default_registry()
    info, variant = reg.parse(selector)
    variant = variant or info.variants[0]
    why = reg.why_not(task, info.name)
    if why:
        raise UserError(f"{selector} / {task}: {why}")
    native = reg.native(task, info.name)
    mod = peer_module(info.name)
    adapter = info.load()
    run_peer = mod.peer(variant, native.env_id, num_envs)
    case = Case(info.name, variant, task, num_envs, chunk_steps=50)
    steppers = {}
    for side in sides:
        if side == "gpuenv_no_resets" and not hasattr(adapter, "open_without_resets"):
            continue
        st = (adapter.open_without_resets if side == "gpuenv_no_resets" else adapter.open)(case, native)
        pool = action_pool(st.facts.action_space, num_envs, case.action_pool_steps, case.seed)
        st.load_actions(pool * 0 if side == "gpuenv_zero_actions" else pool)
        steppers[side] = st
    facts = steppers["gpuenv"].facts
    if not facts.physics_steps:
        raise UserError(f"{selector} does not report the physics steps it runs per env step: no ratio in physics steps/s")
    values: dict[str, list[float]] = {k: [] for k in [*steppers, "peer"]}
    length = 0
    for _ in range(rounds):
        for side, st in steppers.items():
            m = measure_throughput(st, num_envs=num_envs, chunk_steps=case.chunk_steps, settings=settings, clock=time.perf_counter)
            values[side] += [v * st.facts.physics_steps for v in m.env_steps_per_s]
        if not length:  # one size for every round: the peer compiles once (JAX's persistent cache after)
            per_step_s = num_envs / statistics.median(values["gpuenv"])
            length = max(20, min(5000, int(settings.min_time_s / per_step_s)))
        values["peer"] += [run_peer(length) for _ in range(settings.values)]
    for st in steppers.values():
        st.close()
    return PeerRow(f"{info.name}:{variant}", task, num_envs, mod.name(), length, int(facts.physics_steps),
                   {k: facts.details.get(k) for k in SOLVER_KEYS}, facts.device, values)


def write(rows: list[PeerRow], where: dict, path: Path) -> Path:
    """JSON Lines (not *.json: record readers skip it): the machine, then one row per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"where": where})] + [json.dumps({**asdict(r), "ratio": {s: r.ratio(s) for s in r.physics_steps_per_s if s != "peer"}})
                                               for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class PeerReport:
    rows: list[PeerRow]
    where: dict
    path: Path  # the JSON Lines file written


def measure(selectors: list[str], task: str, sizes: list[int], rounds: int, min_time_s: float, out: Path,
            sides: tuple[str, ...] = SIDES, say=lambda row: None) -> PeerReport:
    """Every row (selector x size) in turn, each interleaved within itself; the file is rewritten
    after each row, so a run stopped part-way keeps the rows it finished."""
    from gpuenv.run.provenance import provenance

    if rounds < 1 or min_time_s <= 0 or any(n < 1 for n in sizes):
        raise UserError("peers: --rounds, --num-envs and --min-time must be positive")
    for s in selectors:  # every selector checked before the first row runs (and before JAX is imported)
        info, _ = default_registry().parse(s)
        peer_module(info.name)
        for k, v in info.worker_environ().items():  # what its bench workers get: JAX's cache, MJX's XLA flag
            os.environ.setdefault(k, v)
    settings = MeasureSettings(min_time_s=min_time_s, values=3, warmups=1)
    where = provenance()
    path = out / time.strftime("peers-%Y%m%dT%H%M%SZ.jsonl", time.gmtime())
    rows: list[PeerRow] = []
    for n in sizes:
        for s in selectors:
            rows.append(measure_row(s, task, n, rounds, settings, sides))
            write(rows, where, path)
            say(rows[-1])
    return PeerReport(rows, where, path)

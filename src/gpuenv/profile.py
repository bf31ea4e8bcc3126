"""`gpuenv profile ENV`: your own Gymnasium env, or your own godot-rl game, through the same
harness as the catalogue's.

1. The env is made and checked in a process of its own (gpuenv.backends.own.check: the Gymnasium API
   as gymnasium's env_checker checks it, spaces gpuenv's random actions can drive); a bad one is one
   line, exit 2, before anything is measured.
2. A sweep: every vectoriser that applies (SB3 DummyVecEnv and SubprocVecEnv, Gymnasium's Sync and
   AsyncVectorEnv) at num_envs sized to the machine (1, its cores, 4x and 16x), smallest sizes first,
   each an ordinary throughput case of the hidden `own` backend, recorded as usual.
3. At the fastest setting the shared PPO trainer can run (Dummy or Subproc), the phases: through
   SB3's VecEnv, +policy inference, SB3's whole rollout (collect) and the learning alone, SB3 PPO's
   defaults with 64-step rollouts.
4. From those records: the best setting, where a PPO iteration's time goes there (stepping,
   inference, rollout bookkeeping, learning: the largest is the bottleneck), what the simulator
   costs alone and what a process round trip adds, and the training time for the user's budget
   (gpuenv.decide's parts model: collect + learn).

A godot-rl game (ENV a Godot project folder or an exported binary, gpuenv.backends.own.godot) is
checked by starting it once (it must connect; its agents, spaces and an episode's length are read),
swept over Godot processes (1, the cores, 4x them, each of the game's agents) uncapped and realtime
(godot-rl's --speedup and --action_repeat), and phased at its fastest uncapped setting through the godot backend's VecEnv.

The budget is kept by not starting a case after it is spent: cases already measured stand; what was
not run is said. Records go to OUT/<run id>/ with the generated suite beside them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuenv.errors import UserError
from gpuenv.results.schema import Record

BACKEND = "own"  # gpuenv.backends.own
SWEEP_VARIANTS = ("dummy", "subproc", "sync", "async")
POLICY_VARIANTS = ("dummy", "subproc")  # the shared PPO trainer's vectorisers (Backend.ppo_env)
PORT_HOURS = 40.0  # the default porting effort the "pays off above" answer assumes (--port-hours)
PHASES = ("vecenv", "inference", "collect", "learn")
# the parts of a PPO iteration those phases tell apart, stepping first
PARTS = ("stepping the env (simulator + vectoriser)", "policy inference", "SB3's rollout bookkeeping", "learning (PPO's update)")
CHECK_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class GamePacing:
    """A Godot game's pacing flags, as godot-rl passes them: --speedup (realtime), --action_repeat (both)."""

    speedup: int | None = None  # None: the godot backend's default
    action_repeat: int | None = None

    def variants(self) -> list[str]:
        ar = f"-ar{self.action_repeat}" if self.action_repeat else ""
        return ["uncapped" + ar, (f"realtime-x{self.speedup}" if self.speedup else "realtime") + ar]


class BudgetSpent(Exception):
    """Raised at the start of a case once the profile's time budget is spent (the case does not run)."""


def is_game(own: dict) -> bool:
    from gpuenv.backends.own import GAME_KIND

    return own.get("kind") == GAME_KIND


def sweep_variants(own: dict) -> tuple[str, ...]:
    return tuple(own["variants"]) if is_game(own) else SWEEP_VARIANTS


def policy_variants(own: dict) -> tuple[str, ...]:
    """The variants the shared PPO trainer runs (the own backend's ppo_env)."""
    return tuple(v for v in own["variants"] if v.startswith("uncapped")) if is_game(own) else POLICY_VARIANTS


def task_name(spec: str) -> str:
    """The env's task name in records and case keys (file names): the spec (a game's name) with ':'
    and the like as '-', prefixed `own-` where it would otherwise be a catalogue task's name."""
    from gpuenv.tasks import TASKS

    slug = (re.sub(r"[^A-Za-z0-9_.-]+", "-", spec).strip("-._") or "env")[:100]
    return f"own-{slug}" if slug.lower() in TASKS else slug


def check_spec(spec: str) -> None:
    if not spec.strip():
        raise UserError("ENV is empty: give a Gymnasium id (CartPole-v1; --import PKG registers yours) or module:factory")
    if ":" in spec:
        module, _, attr = spec.partition(":")
        if not re.fullmatch(r"[A-Za-z_][\w.]*", module) or not re.fullmatch(r"[A-Za-z_][\w.]*", attr):
            raise UserError(f"ENV {spec!r}: an entry point is module:factory (e.g. mypkg.envs:make_env), a callable that returns a gymnasium.Env")


def identify(spec: str, imports: list[str], timeout_s: float = CHECK_TIMEOUT_S, pacing: GamePacing = GamePacing(),
             work: Path | None = None) -> dict:
    """Make and check the env in a process of its own (a game: its project copied into `work` and
    imported here, then started once by the check); its description for GPUENV_OWN_ENV, or UserError."""
    from gpuenv.backends.own.check import MARK
    from gpuenv.backends.own.godot import names_a_game

    game = names_a_game(spec)
    if game and imports:
        raise UserError(f"--import is for Gymnasium envs; {spec} is a Godot game (a path): leave --import out")
    if not game:
        check_spec(spec)
        if pacing != GamePacing():
            raise UserError("--speedup and --action-repeat are godot-rl's pacing of a Godot game: give ENV as a game's path, "
                            "or leave them out")
    for name in imports:
        if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
            raise UserError(f"--import {name!r}: a module name (e.g. mypkg or mypkg.envs), imported before the env is made")
    flags = [f"--connect-timeout={max(1.0, timeout_s * 0.8):g}"]  # the game's own line before the kill below
    if game:
        from gpuenv.backends.own.godot import describe, prepare

        if work is None:
            raise ValueError("identify: a game needs a work folder")
        try:
            prepare(describe(Path(spec)), work, timeout_s)
        except ValueError as e:
            raise UserError(str(e)) from None
        flags.append(f"--work={work}")
    cmd = [sys.executable, "-m", "gpuenv.backends.own.check", *flags, spec, *imports]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise UserError(f"{spec}: making it, resetting it and stepping it did not finish within {timeout_s:g} s "
                        "(it hangs, or waits for something): fix the env, then run gpuenv profile again") from None
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = [ln[len(MARK):] for ln in out.splitlines() if ln.startswith(MARK)]
    if not lines:
        last = (err.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise UserError(f"{spec}: the check of the env ended without an answer ({last[:200]})")
    found = json.loads(lines[-1])
    if not found.get("ok"):
        if game:
            raise UserError(found["error"])
        raise UserError(f"{found['error']}; give a Gymnasium id (with --import PKG to register it) or module:factory")
    own = {"task": task_name(found["game"]["name"] if game else spec), "spec": spec, "imports": imports,
           **{k: v for k, v in found.items() if k != "ok"}}
    if game:
        own["variants"] = pacing.variants()
    return own


def sizes_for(cores: int, own: dict | None = None) -> list[int]:
    """num_envs of the sweep: 1, the machine's cores, 4x and 16x them; for a game, its agents in 1,
    the cores and 4x them Godot processes (the course's n_parallel=8 on 2 cores)."""
    if own is not None and is_game(own):
        return sorted({own["agents_per_process"] * n for n in (1, cores, 4 * cores)})
    return sorted({1, cores, 4 * cores, 16 * cores})


def _toml_list(items: list[Any]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


MEASURE = """[measure]
processes = 2
values = 3
warmups = 1
min_time_s = 0.1
chunk_steps = 10
timeout_s = {timeout}
"""


def sweep_suite(task: str, sizes: list[int], timeout_s: float, variants: tuple[str, ...] = SWEEP_VARIANTS) -> str:
    """The sweep as a suite file: one [[matrix]] per size, so the smallest sizes run first."""
    body = f'description = "gpuenv profile: {task}, every vectoriser at {", ".join(map(str, sizes))} envs"\n\n'
    body += MEASURE.format(timeout=int(timeout_s))
    for n in sizes:
        body += (f"\n[[matrix]]\nbackends = {_toml_list([f'{BACKEND}:{v}' for v in variants])}\n"
                 f"tasks = {_toml_list([task])}\nnum_envs = [{n}]\n")
    return body


def phase_suite(task: str, variant: str, n: int, timeout_s: float) -> str:
    return (f'description = "gpuenv profile: where the time goes at {BACKEND}:{variant}, {n} envs"\n\n'
            + MEASURE.format(timeout=int(timeout_s))
            + f"\n[[matrix]]\nbackends = [\"{BACKEND}:{variant}\"]\ntasks = {_toml_list([task])}\nnum_envs = [{n}]\n"
            + f"phases = {_toml_list(list(PHASES))}\nphase_ppo = {{ n_steps = 64 }}\n")


@dataclass
class Share:
    name: str
    us_per_step: float  # microseconds of one env step's share of a PPO iteration


@dataclass
class Profile:
    """What `gpuenv profile` found, from its records."""

    own: dict
    run_id: str
    run_dir: Path
    records: list[Record]
    phases_run_id: str | None = None  # the phases' run (the best Dummy/Subproc setting measured again)
    not_run: list[str] = field(default_factory=list)  # case keys the budget left out
    best: Record | None = None
    phases: Record | None = None
    shares: list[Share] = field(default_factory=list)
    bottleneck: str = ""
    alone_us: float | None = None  # one env stepped in-process (DummyVecEnv, 1 env): the simulator's own cost
    round_trip_us: float | None = None  # what SubprocVecEnv's process round trip adds per step (1 env)
    port_hours: float = PORT_HOURS  # the porting effort the "pays off above" answer is for
    train: tuple[float, float, float] | None = None  # seconds for the budget: median, low, high
    budget_steps: int = 0
    notes: list[str] = field(default_factory=list)


def shares_of(vecenv: float, inference: float, collect: float, learn: float) -> list[Share]:
    """A PPO iteration's time per env step in its parts, from the phases' env steps/s: each phase adds one
    part to the one before it (+inference, SB3's whole rollout), so a part is the difference of their
    times, never below 0 (two phases' noise); learning is its own phase."""
    t_vec, t_inf, t_col, t_learn = (1e6 / x for x in (vecenv, inference, collect, learn))
    return [Share(PARTS[0], t_vec), Share(PARTS[1], max(t_inf - t_vec, 0.0)),
            Share(PARTS[2], max(t_col - t_inf, 0.0)), Share(PARTS[3], t_learn)]


def bottleneck_of(shares: list[Share]) -> str:
    """The part with the largest time per env step."""
    return max(shares, key=lambda s: s.us_per_step).name


def bottleneck_line(shares: list[Share]) -> str:
    """`bottleneck: ...`, with what a faster simulator would save: all of it where stepping is the largest
    share, else at most the stepping share."""
    name, total = bottleneck_of(shares), sum(s.us_per_step for s in shares)
    if name == PARTS[0]:
        return f"bottleneck: {name} (a faster simulator or vectoriser pays off here: stepping is the largest share)"
    return (f"bottleneck: {name} (a simulator infinitely faster would save at most {100 * shares[0].us_per_step / total:.0f}% "
            "of training time: the stepping share)")


def _rate(r: Record) -> float | None:
    from gpuenv.modes import of

    return of(r).headline(r).value if r.status == "ok" else None


def analyse(p: Profile) -> Profile:
    """Best setting, shares of a PPO iteration, the bottleneck and the training time, from the records."""
    from gpuenv.decide import parts_of
    from gpuenv.modes import of

    sweep = [r for r in p.records if r.status == "ok"]
    if sweep:
        p.best = max(sweep, key=lambda r: _rate(r) or 0.0)
    by = {(r.case.variant, r.case.num_envs): _rate(r) for r in sweep}
    dummy1, subproc1 = (None, None) if is_game(p.own) else (by.get(("dummy", 1)), by.get(("subproc", 1)))
    if dummy1:
        p.alone_us = 1e6 / dummy1
        if subproc1:
            p.round_trip_us = 1e6 / subproc1 - 1e6 / dummy1
    if p.phases is None or p.phases.status != "ok":
        return p
    rates = of(p.phases).phase_rates(p.phases)
    vec, inf, col, learn = (rates.get(k) for k in PHASES)
    if vec and inf and col and learn:
        p.shares = shares_of(vec.median, inf.median, col.median, learn.median)
        p.bottleneck = bottleneck_of(p.shares)
    parts = parts_of(p.phases)
    if parts is not None and p.budget_steps:
        p.train = parts.train_s(p.budget_steps)
    return p


def run(spec: str, imports: list[str], *, budget_s: float, budget_steps: int, out: Path, num_envs: list[int] | None = None,
        progress: Any = None, on_start: Any = lambda prof, keys: None, pacing: GamePacing = GamePacing(),
        port_hours: float = PORT_HOURS) -> Profile:
    """Check the env, run the sweep and the phases within budget_s seconds, analyse. `progress(mode,
    keys)`: a context manager giving each plan's event handler (the CLI's progress bar); `on_start(profile,
    keys)` once the sweep is planned. KeyboardInterrupt propagates after the interrupted case's record
    is written."""
    import tempfile

    # a game's project is copied (and imported) here once, every process of the profile runs that copy
    with tempfile.TemporaryDirectory(prefix="gpuenv-game-") as work:
        return _run(spec, imports, budget_s=budget_s, budget_steps=budget_steps, out=out, num_envs=num_envs, progress=progress,
                    on_start=on_start, pacing=pacing, port_hours=port_hours, work=Path(work))


def _run(spec: str, imports: list[str], *, budget_s: float, budget_steps: int, out: Path, num_envs: list[int] | None,
         progress: Any, on_start: Any, pacing: GamePacing, port_hours: float, work: Path) -> Profile:
    import contextlib

    def quiet(_mode: Any, _keys: list[str]) -> Any:
        return contextlib.nullcontext(lambda e: None)

    progress = progress or quiet
    from gpuenv.results.store import new_run_id, prepare_dir
    from gpuenv.run.plan import bench_plan
    from gpuenv.run.runner import CaseDone, CaseStart, run_plan
    from gpuenv.tasks import OWN_ENV

    deadline = time.monotonic() + budget_s
    own = identify(spec, imports, min(CHECK_TIMEOUT_S, budget_s / 2), pacing, work)  # the check is part of the time given
    os.environ[OWN_ENV] = json.dumps(own)  # the own backend, the task and every worker read it from here
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    sizes = sorted(set(num_envs)) if num_envs else sizes_for(cores, own)
    per = own.get("agents_per_process") if is_game(own) else None
    if per and any(n % per for n in sizes):
        raise UserError(f"--num-envs {', '.join(str(n) for n in sizes if n % per)}: {spec} has {per} agents per Godot process; "
                        f"give multiples of {per} (num_envs = agents x processes)")
    timeout_s = max(60.0, budget_s)
    run_id = new_run_id()
    run_dir = prepare_dir(out) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "profile-sweep.toml").write_text(sweep_suite(own["task"], sizes, timeout_s, sweep_variants(own)))
    prof = Profile(own, run_id, run_dir, [], budget_steps=budget_steps, port_hours=port_hours)

    bp = bench_plan(str(run_dir / "profile-sweep.toml"))
    keys = [item.key for item in bp.plan.items]
    on_start(prof, keys)
    try:
        with progress(bp.mode, keys) as on_event:
            def watch(e: Any) -> None:
                if isinstance(e, CaseStart) and time.monotonic() > deadline:
                    raise BudgetSpent
                if isinstance(e, CaseDone):
                    prof.records.append(e.record)
                on_event(e)

            run_plan(bp.mode, bp.plan, run_id=run_id, out_dir=run_dir, on_event=watch)
    except BudgetSpent:
        done = {r.case_key for r in prof.records}
        prof.not_run = [item.key for item in bp.plan.items if item.key not in done]
    ok = [r for r in prof.records if r.status == "ok" and r.case.variant in policy_variants(own)]
    if ok and time.monotonic() < deadline:
        best = max(ok, key=lambda r: _rate(r) or 0.0)
        prof.phases_run_id = new_run_id()  # the same case again, with its phases: a run of its own
        phase_dir = run_dir.parent / prof.phases_run_id
        phase_dir.mkdir()
        (phase_dir / "profile-phases.toml").write_text(phase_suite(own["task"], best.case.variant, best.case.num_envs, timeout_s))
        pp = bench_plan(str(phase_dir / "profile-phases.toml"))
        with progress(pp.mode, [item.key for item in pp.plan.items]) as on_event:
            for rec, _path in run_plan(pp.mode, pp.plan, run_id=prof.phases_run_id, out_dir=phase_dir, on_event=on_event):
                prof.phases = rec
    elif ok:
        prof.notes.append(f"no phases: the budget ({budget_s:g} s) was spent by the sweep; --time {int(budget_s * 2)} leaves time for them")
    elif is_game(own):
        prof.notes.append("no phases: no uncapped case ran ok (the shared PPO trainer runs the game uncapped)")
    else:
        prof.notes.append("no phases: no DummyVecEnv or SubprocVecEnv case ran ok (the shared PPO trainer runs those)")
    return analyse(prof)


def _cell(r: Record | None) -> str:
    from gpuenv.format import fmt_rate
    from gpuenv.modes import of

    if r is None:
        return "-"
    if r.status != "ok":
        return r.status
    h = of(r).headline(r)
    return f"{fmt_rate(h.value)} ({fmt_rate(h.ci_low)}-{fmt_rate(h.ci_high)})"


def _span(mid: float, lo: float, hi: float) -> str:
    """7.1 min (6.9-7.3 min): one unit for the three, one decimal."""
    unit, div = ("s", 1.0) if hi < 120 else ("min", 60.0) if hi < 7200 else ("h", 3600.0)
    return f"{mid / div:.1f} {unit} ({lo / div:.1f}-{hi / div:.1f} {unit})"


def report_lines(p: Profile) -> list[str]:
    """What `gpuenv profile` prints: the sweep's table, the best setting, where the time goes, the answer."""
    from gpuenv.format import fmt_rate
    from gpuenv.measure.fingerprint import runs_machine

    lines: list[str] = []
    sizes = sorted({r.case.num_envs for r in p.records})
    if p.records:
        lines.append(f"env steps/s, median (95% interval), {p.own['spec']}: run {p.run_id} on {runs_machine(p.records)}")
        variants = sweep_variants(p.own)
        width = max(len(v) for v in variants) + 2
        lines.append(("pacing" if is_game(p.own) else "vectoriser").ljust(width) + " | " + " | ".join(f"{n} envs" for n in sizes))
        by = {(r.case.variant, r.case.num_envs): r for r in p.records}
        for v in variants:
            lines.append(v.ljust(width) + " | " + " | ".join(_cell(by.get((v, n))) for n in sizes))
        if is_game(p.own):
            per = p.own["agents_per_process"]
            from gpuenv.backends.godot.adapter import flags

            realtime = flags(variants[1])
            lines.append(f"(envs = {per} agents per Godot process x processes; uncapped: frames back to back, --fixed-fps 60; "
                         f"realtime: godot-rl's pacing, --speedup {realtime.speedup}; --action_repeat {realtime.action_repeat})")
        else:
            lines.append("(dummy, subproc: SB3's DummyVecEnv, SubprocVecEnv; sync, async: Gymnasium's SyncVectorEnv, AsyncVectorEnv)")
    if p.not_run:
        lines.append(f"not run within the time given: {len(p.not_run)} case(s) ({', '.join(p.not_run[:4])}{' ...' if len(p.not_run) > 4 else ''}); --time longer runs them")
    if p.best is not None:
        procs = f" ({p.best.case.num_envs // p.own['agents_per_process']} Godot processes)" if is_game(p.own) else ""
        lines.append(f"best setting: {p.best.case.variant} at {p.best.case.num_envs} envs{procs}, {_cell(p.best)} env steps/s")
        from gpuenv.modes.throughput.record import ThroughputRecord

        if isinstance(p.best, ThroughputRecord) and p.best.summary is not None and p.best.summary.bottleneck:
            lines.append(f"there, stepping is limited by: {p.best.summary.bottleneck}")
    if p.alone_us is not None:
        text = f"the env alone (DummyVecEnv, 1 env): {p.alone_us:,.1f} us per step"
        if p.round_trip_us is not None:
            text += f"; a process round trip (SubprocVecEnv, 1 env) adds {p.round_trip_us:,.1f} us per step"
        lines.append(text)
    if p.shares:
        total = sum(s.us_per_step for s in p.shares)
        assert p.phases is not None
        where = ", ".join(f"{s.name} {100 * s.us_per_step / total:.0f}% ({s.us_per_step:,.1f} us)" for s in p.shares)
        from gpuenv.modes.throughput.record import ThroughputRecord

        inference = p.phases.summary.phases.get("inference") if isinstance(p.phases, ThroughputRecord) and p.phases.summary else None
        threads = inference.details.get("torch_threads") if inference is not None else None
        cores = p.phases.where.machine.cpu_logical
        if p.phases.case.variant == "subproc" and isinstance(threads, int) and cores and threads + p.phases.case.num_envs > cores:
            where += (f"; policy inference ran with torch's {threads} threads beside {p.phases.case.num_envs} env processes "
                      f"on {cores} cores (torch.set_num_threads(1) in your trainer is the usual cure for that contention)")
        lines.append(f"where a PPO iteration's time goes per env step at {p.phases.case.variant}, {p.phases.case.num_envs} envs "
                     f"(the fastest setting SB3's trainer runs; SB3 PPO's defaults, 64-step rollouts; run {p.phases_run_id}): {where}")
        lines.append(bottleneck_line(p.shares))
    if p.shares:
        step_us = p.shares[0].us_per_step
        saved_per_m = step_us  # us per step x 1M steps = seconds per 1M steps
        above = p.port_hours * 3600 / (step_us * 1e-6) if step_us > 0 else None
        if above is not None:
            verdict = ("your budget is above it" if p.budget_steps >= above else "your budget is below it: not worth a port for that alone")
            lines.append(f"a port to a batched simulator (stepping at no cost) would save at most {saved_per_m:,.0f} s per 1M env steps "
                         f"of training here (run {p.phases_run_id}'s stepping share); at {p.port_hours:g} hours of porting "
                         f"(--port-hours) it pays off above {fmt_rate(above)} env steps ({fmt_rate(p.budget_steps)}: {verdict})")
    if p.train is not None:
        assert p.phases is not None
        lines.append(f"training {fmt_rate(p.budget_steps)} env steps with SB3 PPO at {p.phases.case.variant}, {p.phases.case.num_envs} envs: "
                     f"{_span(*p.train)} on this machine (gpuenv decide's model: collect + learn, startup apart)")
    lines += p.notes
    lines.append(f"records: {p.run_dir}" + (f" and {p.run_dir.parent / p.phases_run_id}" if p.phases_run_id else "")
                 + f"; `gpuenv show {p.run_dir}` shows them")
    return lines

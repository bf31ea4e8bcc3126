"""How much does the harness itself cost? Two checks, interleaved in one process, as ratios:

1. hand loops: gpuenv's env steps/s against a minimal hand-written loop over the same env object and
   the same pre-generated actions (EnvPool, Brax);
2. peers: gpuenv's physics steps/s (env steps/s x the physics steps the backend ran per env step)
   against the framework's own benchmark at matched settings (same model, batch, solver settings):
   MJX against `mujoco.mjx.benchmark` (what mjx-testspeed runs), Brax's pipelines against
   `brax.test_utils.benchmark`. The peer steps physics only; gpuenv's env layer (actions,
   observation, reward, auto-reset) is the difference, and gpuenv without resets (where the
   adapter has that mode) splits it.

    python bench/overhead.py [--backend envpool --backend brax] [--peer mjx:jax-brax ...] [--num-envs 8] [--rounds 5]

Prints one line per row: the median ratio (1.00 = no overhead) and writes a JSON file with the raw
values next to the machine description.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import time
from pathlib import Path

from gpuenv.backends.base import Case, action_pool
from gpuenv.measure.timing import MeasureSettings, measure_throughput
from gpuenv.registry import default_registry
from gpuenv.run.provenance import provenance


def hand_loop_envpool(env, pool, steps: int) -> float:
    t0 = time.perf_counter()
    for i in range(steps):
        env.step(pool[i % len(pool)])
    return steps * pool.shape[1] / (time.perf_counter() - t0)


def make_hand_brax(case: Case, stepper):
    """The same Brax env (rebuilt the same way), the same actions and start state, stepped by a scan
    written here from scratch."""
    import jax
    import jax.numpy as jnp
    from brax import envs
    from brax.envs.wrappers import training

    native = default_registry().native(case.task, "brax")
    env = training.wrap(envs.get_environment(native.env_id, backend=case.variant), episode_length=native.episode_steps)
    actions = stepper._actions

    @jax.jit
    def chunk(state, i):
        def body(c, _):
            s, k = c
            return (env.step(s, actions[k % actions.shape[0]]), k + 1), None

        return jax.lax.scan(body, (state, i), None, length=case.chunk_steps)[0]

    carry = jax.block_until_ready(chunk(stepper.state, jnp.asarray(0, dtype=jnp.int32)))  # compile untimed

    def run(loops: int) -> float:
        nonlocal carry
        t0 = time.perf_counter()
        c = carry
        for _ in range(loops):
            c = chunk(*c)
        jax.block_until_ready(c)
        carry = c
        return loops * case.chunk_steps * case.num_envs / (time.perf_counter() - t0)

    return run


# The peer rows `make bench-overhead` runs: every MJX settings set, every Brax pipeline with MuJoCo physics
PEERS = ("mjx:jax", "mjx:jax-brax", "brax:generalized", "brax:positional", "brax:mjx")


def _physics_rate(stepper, env_steps_per_s: list[float]) -> list[float]:
    return [v * stepper.facts.physics_steps for v in env_steps_per_s]


def peer_row(selector: str, task: str, num_envs: int, rounds: int, settings: MeasureSettings) -> dict:
    """gpuenv (step+reset, and without resets where the adapter has it) against the framework's own
    benchmark, interleaved round by round; physics steps/s throughout."""
    reg = default_registry()
    info, variant = reg.parse(selector)
    variant = variant or info.variants[0]
    native = reg.native(task, info.name)
    adapter = info.load()
    peer_mod = importlib.import_module(f"gpuenv.backends.{info.name}.peer")
    run_peer = peer_mod.peer(variant, native.env_id, num_envs)
    case = Case(info.name, variant, task, num_envs, chunk_steps=50)
    # gpuenv as it runs (random actions); with zero actions, the peer's workload (an idle rollout: a
    # solver that iterates to convergence needs fewer iterations there); without resets, where it can
    sides = {"gpuenv": adapter.open(case, native), "gpuenv_zero_actions": adapter.open(case, native)}
    if hasattr(adapter, "open_without_resets"):
        sides["gpuenv_no_resets"] = adapter.open_without_resets(case, native)
    for key, st in sides.items():
        pool = action_pool(st.facts.action_space, num_envs, case.action_pool_steps, case.seed)
        st.load_actions(pool * 0 if key == "gpuenv_zero_actions" else pool)
    values: dict[str, list[float]] = {k: [] for k in [*sides, "peer"]}
    length = 0
    for _ in range(rounds):  # interleaved, so drift hits every side alike
        for key, st in sides.items():
            m = measure_throughput(st, num_envs=num_envs, chunk_steps=case.chunk_steps, settings=settings, clock=time.perf_counter)
            values[key] += _physics_rate(st, m.env_steps_per_s)
        if not length:  # one size for every round: the peer compiles once (JAX's persistent cache after)
            per_env_s = num_envs / statistics.median(values["gpuenv"])
            length = max(20, min(5000, int(settings.min_time_s / per_env_s)))
        values["peer"] += [run_peer(length) for _ in range(settings.values)]
    facts = sides["gpuenv"].facts
    for st in sides.values():
        st.close()
    peer_med = statistics.median(values["peer"])
    row = {"selector": f"{info.name}:{variant}", "task": task, "num_envs": num_envs, "peer": peer_mod.name(), "peer_steps": length,
           "physics_steps_per_env_step": facts.physics_steps,
           "solver": {k: facts.details.get(k) for k in ("solver", "iterations", "ls_iterations", "eulerdamp", "integrator",
                                                        "physics_timestep_s", "precision", "solver_settings")},
           "physics_steps_per_s": values,
           "ratio": {k: statistics.median(v) / peer_med for k, v in values.items() if k != "peer"}}
    return row


def peer_line(row: dict) -> str:
    med = {k: statistics.median(v) for k, v in row["physics_steps_per_s"].items()}
    parts = [f"gpuenv {med['gpuenv']:,.0f} ({row['ratio']['gpuenv']:.2f}x)",
             f"zero actions {med['gpuenv_zero_actions']:,.0f} ({row['ratio']['gpuenv_zero_actions']:.2f}x)"]
    if "gpuenv_no_resets" in med:
        parts.append(f"without resets {med['gpuenv_no_resets']:,.0f} ({row['ratio']['gpuenv_no_resets']:.2f}x)")
    s = row["solver"]
    return (f"{row['selector']:18s} {row['task']} n={row['num_envs']}: physics steps/s " + ", ".join(parts)
            + f" vs peer {med['peer']:,.0f} [{s.get('solver')}, {s.get('iterations')} it, {s.get('ls_iterations')} ls, "
            f"x{row['physics_steps_per_env_step']}/env step]")


def main() -> None:
    from gpuenv.backends.jax_cache import worker_env

    for k, v in worker_env().items():  # JAX's persistent cache and MJX's XLA flag, as the workers get them
        os.environ.setdefault(k, v)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", default=None, help="hand-loop rows (envpool, brax)")
    ap.add_argument("--peer", action="append", default=None, help=f"peer rows (default: {', '.join(PEERS)})")
    ap.add_argument("--task", default="halfcheetah")
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--out", type=Path, default=Path("results/local/overhead"))
    args = ap.parse_args()
    settings = MeasureSettings(min_time_s=args.min_time, values=3, warmups=1)
    report = {"where": provenance(), "task": args.task, "num_envs": args.num_envs, "backends": {}, "peers": []}
    only_peers = args.peer is not None and args.backend is None
    for name in [] if only_peers else (args.backend or ["envpool", "brax"]):
        info = default_registry().get(name)
        case = Case(name, info.variants[0], args.task, args.num_envs, chunk_steps=50)
        stepper = info.load().open(case, default_registry().native(args.task, name))
        pool = action_pool(stepper.facts.action_space, case.num_envs, case.action_pool_steps, case.seed)
        stepper.load_actions(pool)
        harness, hand = [], []
        if name == "brax":
            hand_run = make_hand_brax(case, stepper)
        for _ in range(args.rounds):  # interleaved, so drift hits both sides alike
            m = measure_throughput(
                stepper, num_envs=case.num_envs, chunk_steps=case.chunk_steps, settings=settings, clock=time.perf_counter
            )
            harness += m.env_steps_per_s
            if name == "brax":
                hand += [hand_run(m.loops) for _ in range(3)]
            else:
                hand += [hand_loop_envpool(stepper.env, stepper._actions, m.loops * case.chunk_steps) for _ in range(3)]
        stepper.close()
        ratio = statistics.median(harness) / statistics.median(hand)
        report["backends"][name] = {"harness_env_steps_per_s": harness, "hand_env_steps_per_s": hand, "ratio": ratio}
        print(
            f"{name:8s} {args.task} n={args.num_envs}: harness {statistics.median(harness):,.0f} "
            f"vs hand loop {statistics.median(hand):,.0f} env steps/s -> ratio {ratio:.3f}"
        )
    for selector in [] if args.backend is not None and args.peer is None else (args.peer or PEERS):
        row = peer_row(selector, args.task, args.num_envs, args.rounds, settings)
        report["peers"].append(row)
        print(peer_line(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / time.strftime("overhead-%Y%m%dT%H%M%S.json")
    path.write_text(json.dumps(report, indent=1))
    print(f"written {path}")


if __name__ == "__main__":
    main()

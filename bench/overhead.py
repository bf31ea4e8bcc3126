"""How much does the harness itself cost? gpuenv's steps/s against a minimal hand-written loop over
the same env object and the same pre-generated actions, interleaved in one process.

    python bench/overhead.py [--backend envpool --backend brax] [--num-envs 8] [--rounds 5]

Prints one line per backend: harness / hand-loop median ratio (1.00 = no overhead) and writes a JSON
record with the raw values next to the machine description. `make bench-overhead` runs this, then
`gpuenv peers` (gpuenv.run.peers): physics steps/s against the frameworks' own benchmarks.
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", default=None)
    ap.add_argument("--task", default="halfcheetah")
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--out", type=Path, default=Path("results/local/overhead"))
    args = ap.parse_args()
    settings = MeasureSettings(min_time_s=args.min_time, values=3, warmups=1)
    report = {"where": provenance(), "task": args.task, "num_envs": args.num_envs, "backends": {}}
    for name in args.backend or ["envpool", "brax"]:
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
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / time.strftime("overhead-%Y%m%dT%H%M%S.json")
    path.write_text(json.dumps(report, indent=1))
    print(f"written {path}")


if __name__ == "__main__":
    main()

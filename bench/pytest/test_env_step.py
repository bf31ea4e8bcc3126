"""pytest-benchmark over gpuenv's synchronised unit (run loops chunks + one sync), compile kept out.

    make bench-pytest        # writes results/local/pytest-benchmark.json and the
                             # github-action-benchmark file results/local/gab-bench.json

Each benchmark round is one call of gpuenv.measure.timing.run_unit, the same call `gpuenv bench`
times; the first chunk (JIT compile, first-touch allocation) runs before pedantic timing starts.
env steps/s go into extra_info, from which `gpuenv export-gab` writes customBiggerIsBetter JSON.
"""

from __future__ import annotations

import pytest

from gpuenv.backends.base import Case, action_pool
from gpuenv.measure.timing import run_unit
from gpuenv.registry import default_registry

CASES = [
    ("gymnasium", "dummy", "cartpole", 8),
    ("envpool", "sync", "cartpole", 8),
    ("envpool", "sync", "halfcheetah", 8),
    ("brax", "generalized", "halfcheetah", 64),
    ("mjx", "jax", "halfcheetah", 64),
]
CHUNK, LOOPS, ROUNDS = 10, 5, 5


@pytest.mark.parametrize(("backend", "variant", "task", "num_envs"), CASES, ids=lambda v: str(v))
def test_env_steps(benchmark, backend, variant, task, num_envs):
    info = default_registry().get(backend)
    reason = info.unavailable_reason()
    if reason:
        pytest.skip(reason)
    case = Case(backend, variant, task, num_envs, chunk_steps=CHUNK)
    stepper = info.load().open(case, default_registry().native(task, backend))
    stepper.load_actions(action_pool(stepper.facts.action_space, num_envs, case.action_pool_steps, case.seed))
    run_unit(stepper, 1)  # compile and first touch: not part of any round
    steps = LOOPS * CHUNK * num_envs
    benchmark.extra_info.update(case=case.key, env_steps_per_round=steps, device=stepper.facts.device)
    benchmark.pedantic(run_unit, args=(stepper, LOOPS), rounds=ROUNDS, warmup_rounds=1, iterations=1)
    benchmark.extra_info["env_steps_per_s"] = steps / benchmark.stats.stats.median

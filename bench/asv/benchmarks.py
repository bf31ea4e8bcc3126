"""asv benchmarks that run gpuenv (`asv run --environment existing:python`).

asv treats smaller as better for every benchmark, so throughput is tracked as seconds per million
env steps. Imports stay cheap (asv imports this file to discover benchmarks): gpuenv's registry
imports no simulator, and a backend that is absent raises NotImplementedError in setup, which asv
reports as skipped. Each value is one gpuenv worker process measuring one tiny case, the same timing
loop `gpuenv bench` uses.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gpuenv.backends.base import Case
from gpuenv.modes import known_modes
from gpuenv.registry import default_registry
from gpuenv.run.runner import run_process


class EnvStepThroughput:
    params = (["gymnasium:dummy", "envpool:sync", "brax:generalized", "mjx:jax"], ["cartpole", "halfcheetah"], [8])
    param_names = ["backend", "task", "num_envs"]
    timeout = 600
    unit = "seconds per million env steps"

    def setup(self, backend, task, num_envs):
        info, variant = default_registry().parse(backend)
        if info.unavailable_reason() or default_registry().why_not(task, info.name):
            raise NotImplementedError(f"{backend} / {task} cannot run here")
        self.case = Case(info.name, variant, task, num_envs, chunk_steps=10)

    def track_seconds_per_million_env_steps(self, backend, task, num_envs):
        spec = {"mode": known_modes()[0], "case": self.case.to_dict(), "settings": {"min_time_s": 0.2, "values": 3, "warmups": 1}}
        with tempfile.TemporaryDirectory() as tmp:
            o = run_process(spec, 0, self.timeout, Path(tmp))
        if o.failure:
            raise RuntimeError(o.failure["reason"])
        values = sorted(o.result["env_steps_per_s"])
        return 1e6 / values[len(values) // 2]

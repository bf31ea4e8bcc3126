"""The fake backend's native trainer: a scripted learning curve."""

from __future__ import annotations

import os
import time

from gpuenv.errors import Diverged


def train(case, prog) -> dict:
    """Scripted curve: returns[k] at evaluation k (k from 1), or the threshold from reach_at_eval on."""
    hp = case.hyperparams
    prog.phase("import", prog.clock())
    returns = hp.get("returns", [])
    k, steps = 0, 0
    while steps < case.max_env_steps:
        steps += case.eval_every_steps
        k += 1
        time.sleep(hp.get("sleep_s", 0.0))
        if hp.get("diverge_at_eval") == k or os.environ.get("GPUENV_FAKE_DIVERGE_SEED") == f"{prog.seed}":
            raise Diverged(f"loss is nan at {steps} env steps")
        value = returns[k - 1] if k - 1 < len(returns) else 0.0
        if hp.get("reach_at_eval") is not None and k >= hp["reach_at_eval"]:
            value = case.threshold
        start = prog.clock()
        end = prog.clock()
        if not prog.record(steps, value, end, end - start):
            break
    return {"trainer": "fake"}



"""What a backend's native trainer works with (its `Trainer` declaration's function gets a case and a
progress object from gpuenv.modes.ttr.train): the exception that ends training, the eval envs' seed
offset, one evaluation timed and recorded, and the clock of JAX's compile time. Like
gpuenv.backends.base for steppers, the contract lives below the modes that use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

EVAL_SEED_OFFSET = 1_000_003  # eval envs never share a seed with training envs


class Stop(Exception):
    """Raised inside a trainer's callback to end training (threshold reached or budget spent)."""


def evaluate_and_record(prog: Any, env_steps: int, parameters: Iterable[Any], evaluate: Callable[[], float],
                        compile_within: Callable[[float, float], float] | None = None) -> bool:
    """One evaluation of a torch policy after `env_steps` env steps: its parameters checked for non-finite
    values (Diverged), `evaluate()` timed, compile inside it (JAX's, where `compile_within` counts it) left
    out of its time, and the result recorded; returns prog.record's answer (True: keep training)."""
    import torch

    from gpuenv.errors import Diverged

    if not all(torch.isfinite(p).all() for p in parameters):
        raise Diverged(f"non-finite policy parameters at {env_steps} env steps")
    start = prog.clock()
    value = evaluate()
    end = prog.clock()
    inside = compile_within(start, end) if compile_within else 0.0
    return bool(prog.record(env_steps, value, end, end - start - inside))


class CompileClock:
    """Seconds JAX spent tracing, lowering and compiling, from JAX's own duration events."""

    def __init__(self, jax, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.events: list[tuple[float, float]] = []  # (when it ended, seconds)
        jax.monitoring.register_event_duration_secs_listener(self._on)

    # Lowering and XLA compile, one event each per compiled computation. Tracing is left out: a jit
    # inside a traced function is traced inside the outer trace, so its events nest.
    EVENTS = ("/jax/core/compile/jaxpr_to_mlir_module_duration", "/jax/core/compile/backend_compile_duration")

    def _on(self, event: str, duration: float, **_kw) -> None:
        if event in self.EVENTS:
            self.events.append((self.clock(), duration))

    def total(self) -> float:
        return sum(d for _, d in self.events)

    def within(self, start: float, end: float) -> float:
        return sum(d for t, d in self.events if start <= t <= end)

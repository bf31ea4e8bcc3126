"""Helpers shared by the JAX adapters (brax, mjx): device facts, the GPU guard, the scan chunk."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from gpuenv.gpu import gpu_guard


def device_facts() -> tuple[str, dict]:
    """Where JAX will run, refusing a silent CPU fallback when a GPU was asked for.

    JAX falls back to CPU with only a warning when its CUDA libraries fail to load; a "GPU" number
    measured that way is a CPU number. GPUENV_REQUIRE_GPU=1 (set by the GPU images) makes it an error.
    """
    backend = jax.default_backend()
    dev = jax.devices()[0]
    fallback = gpu_guard(backend == "gpu", f"JAX is running on '{backend}', not the GPU this case asks for "
                         "(no GPU, or CUDA libraries failed to load)")
    label = "cpu" if backend == "cpu" else f"{backend}:{dev.device_kind}"
    details = {
        "jax_backend": backend,
        "jax_device_kind": dev.device_kind,
        "jax_device_count": jax.device_count(),
        "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision),  # type: ignore[attr-defined]
        "jax_enable_x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]
        "jax_xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    return label, {**details, **fallback}  # a GPU image measured on the CPU, as asked: the record says so


_CACHE_EVENTS = {"hit": 0, "miss": 0}


def _on_event(event: str, **_kwargs) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _CACHE_EVENTS["hit"] += 1
    elif event == "/jax/compilation_cache/cache_misses":  # JAX records this when it writes an entry
        _CACHE_EVENTS["miss"] += 1


jax.monitoring.register_event_listener(_on_event)


def make_chunk(step_fn, chunk_steps: int):
    """jit(state, actions, i) -> (state, i): `chunk_steps` batched steps in one lax.scan, the action
    for step i taken from the pre-generated pool at i mod pool length."""

    def chunk(state, actions, i):
        pool = actions.shape[0]

        def body(carry, _):
            s, k = carry
            return (step_fn(s, actions[k % pool]), k + 1), None

        (state, i), _ = jax.lax.scan(body, (state, i), None, length=chunk_steps)
        return state, i

    return jax.jit(chunk)


def brax_style_stepper(env, state, action_size: int, native_env_id: str, chunk_steps: int, reset_mode: str, device: str, details: dict,
                       physics_steps: int | None = None):
    """A ScanStepper over a vmapped Brax-style env (Brax, Playground): actions in [-1, 1] on every
    dimension, the observation shape read from the reset state (not env.observation_size: Brax
    computes it by running reset eagerly, 13 s on CPU)."""
    from gpuenv.backends.base import ActionSpace, StepperFacts

    facts = StepperFacts(
        native_env_id=native_env_id,
        obs_shape=tuple(int(x) for x in state.obs.shape[1:]),
        action_space=ActionSpace("box", low=(-1.0,) * action_size, high=(1.0,) * action_size),
        reset_mode=reset_mode,
        device=device,
        details=details,
        physics_steps=physics_steps,
    )
    return ScanStepper(make_chunk(env.step, chunk_steps), state, facts)


class ScanStepper:
    """Runs a jitted chunk `loops` times without blocking; sync() waits for the device."""

    def __init__(self, chunk, state, facts) -> None:
        self._chunk = chunk
        self.state = state
        self.facts = facts
        self._i = jnp.asarray(0, dtype=jnp.int32)
        self._actions = None

    def load_actions(self, pool: np.ndarray) -> None:
        self._actions = jax.device_put(pool)

    def run(self, loops: int) -> None:
        first = "compile_cache" not in self.facts.details
        before = dict(_CACHE_EVENTS)
        state, i = self.state, self._i
        for _ in range(loops):
            state, i = self._chunk(state, self._actions, i)
        self.state, self._i = state, i
        if first:  # the chunk compiled in this call: did it come from the persistent cache?
            if _CACHE_EVENTS["hit"] > before["hit"]:
                self.facts.details["compile_cache"] = "hit"
            elif _CACHE_EVENTS["miss"] > before["miss"]:
                self.facts.details["compile_cache"] = "miss"
            else:
                self.facts.details["compile_cache"] = "not cached"

    def sync(self) -> None:
        jax.block_until_ready((self.state, self._i))

    def close(self) -> None:
        self.state = None

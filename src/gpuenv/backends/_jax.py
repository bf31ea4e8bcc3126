"""Helpers shared by the JAX adapters (brax, mjx): device facts, the GPU guard, the scan chunk."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from gpuenv.errors import UserError


def device_facts() -> tuple[str, dict]:
    """Where JAX will run, refusing a silent CPU fallback when a GPU was asked for.

    JAX falls back to CPU with only a warning when its CUDA libraries fail to load; a "GPU" number
    measured that way is a CPU number. GPUENV_REQUIRE_GPU=1 (set by the GPU images) makes it an error.
    """
    backend = jax.default_backend()
    dev = jax.devices()[0]
    if os.environ.get("GPUENV_REQUIRE_GPU") == "1" and backend != "gpu":
        raise UserError(
            f"JAX is running on '{backend}', not the GPU this case asks for (CUDA libraries failed to load?); "
            "run `gpuenv doctor`, or unset GPUENV_REQUIRE_GPU to measure on CPU"
        )
    label = "cpu" if backend == "cpu" else f"{backend}:{dev.device_kind}"
    details = {
        "jax_backend": backend,
        "jax_device_kind": dev.device_kind,
        "jax_device_count": jax.device_count(),
        "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision),
        "jax_enable_x64": bool(jax.config.jax_enable_x64),
    }
    return label, details


def strong(tree):
    """Drop weak types so the state returned by reset has exactly the types the scan returns;
    otherwise the second call of the jitted chunk retraces and recompiles inside the timed region."""
    return jax.tree.map(lambda x: jnp.asarray(x, dtype=jnp.asarray(x).dtype) if hasattr(x, "dtype") else x, tree)


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
        state, i = self.state, self._i
        for _ in range(loops):
            state, i = self._chunk(state, self._actions, i)
        self.state, self._i = state, i

    def sync(self) -> None:
        jax.block_until_ready((self.state, self._i))

    def close(self) -> None:
        self.state = None

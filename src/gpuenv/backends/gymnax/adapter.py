"""gymnax envs: vmapped, auto-reset inside gymnax's step, stepped in a jit-compiled lax.scan chunk.

gymnax's Environment.step resets an env whose episode ended (a fresh reset state selected where
done), so auto-resets are inside the timed scan, as for every backend. Each step draws its keys from
the carried PRNG key (gymnax's step takes one per env)."""

from __future__ import annotations

import gymnax
import jax

from gpuenv.backends._jax import ScanStepper, device_facts, make_chunk
from gpuenv.backends.base import ActionSpace, Case, StepperFacts
from gpuenv.backends.spec import NativeTask

RESET_MODE = "auto-reset inside gymnax's Environment.step (a fresh reset state selected where done), inside the scan"


def vmapped(native: NativeTask):
    """(env, params, reset(keys) -> (obs, states), step(keys, states, actions) -> (obs, states, reward, terminated,
    truncated, info)): gymnax 1.0's API, vmapped over the envs with the env's default parameters but for
    the time limit, which is the catalogue's (native.episode_steps; gymnax's own default is the same for
    both tasks). info["final_observation"] is the observation before an auto-reset."""
    env, params = gymnax.make(native.env_id)
    params = params.replace(max_steps_in_episode=native.episode_steps)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    return env, params, (lambda keys: reset(keys, params)), (lambda keys, states, actions: step(keys, states, actions, params))


def open(case: Case, native: NativeTask) -> ScanStepper:  # noqa: A001 - the adapter contract
    device, details = device_facts()
    env, params, reset, step = vmapped(native)
    key, sub = jax.random.split(jax.random.PRNGKey(case.seed))
    _obs, states = jax.block_until_ready(jax.jit(reset)(jax.random.split(sub, case.num_envs)))

    def step_fn(carry, actions):
        k, s = carry
        k, sub = jax.random.split(k)
        _o, s, _r, _term, _trunc, _i = step(jax.random.split(sub, case.num_envs), s, actions)
        return k, s

    details.update(gymnax=gymnax.__version__ if hasattr(gymnax, "__version__") else _version(),
                   params={k: (float(v) if isinstance(v, float) else v) for k, v in _params(params).items()})
    facts = StepperFacts(
        native_env_id=native.env_id,
        obs_shape=tuple(int(x) for x in env.observation_space(params).shape),
        action_space=ActionSpace("discrete", n=int(env.num_actions)),
        reset_mode=RESET_MODE,
        device=device,
        details=details,
        # CartPole: one Euler step per env step, as Gymnasium's; MinAtar: a game tick, no physics
        physics_steps=1 if native.physics_dt_s is not None else None,
    )
    return ScanStepper(make_chunk(step_fn, case.chunk_steps), (key, states), facts)


def _version() -> str:
    from importlib.metadata import version

    return version("gymnax")


def _params(params) -> dict:
    """The env's parameters (physics constants, episode limit) as plain values for the record."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(params):
        v = getattr(params, f.name)
        try:
            out[f.name] = v.item() if hasattr(v, "item") else v
        except (TypeError, ValueError):
            out[f.name] = str(v)
    return out

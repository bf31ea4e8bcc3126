"""What the Brax and MuJoCo Playground backends share for PPO: a Brax-style env (reset(keys) ->
state, step(state, action) -> state, with .obs .reward .done .info and its simulator state in one
field) as an SB3 VecEnv for the shared trainer, and Brax's own PPO as the native trainer. Imported
only in training workers."""

from __future__ import annotations

import math

import numpy as np

from gpuenv.backends.training import CompileClock, Stop
from gpuenv.errors import Diverged

VECTORISER = "gpuenv JaxVecEnv (jit step + auto-reset to first state on device; arrays copied to numpy)"


def episode_vecenv(base, episode_steps: int, num_envs: int, seed: int, obs_size: int, sim_field: str):
    """SB3 VecEnv (its record's "vectoriser": VECTORISER) over `base` (one env, vmapped here) with a time limit and Brax's auto-reset semantics
    (an env that ends restarts from its own first state, as Brax's training does), written out so that
    the final observation is kept for SB3. `sim_field` names the state's simulator field (Brax:
    pipeline_state, Playground: data)."""
    import gymnasium
    import jax
    import jax.numpy as jnp
    from brax.envs.wrappers import training

    from gpuenv.backends.vecenv import JaxVecEnv

    inner = training.VmapWrapper(training.EpisodeWrapper(base, episode_steps, action_repeat=1))

    def reset():
        state = inner.reset(jax.random.split(jax.random.PRNGKey(seed), num_envs))
        return (state, state), state.obs

    def step(carry, action):
        state, first = carry
        steps = jnp.where(state.done, jnp.zeros_like(state.info["steps"]), state.info["steps"])
        state.info.update(steps=steps)
        state = inner.step(state.replace(done=jnp.zeros_like(state.done)), action)
        done = state.done.astype(bool)
        trunc = state.info["truncation"].astype(bool) & done

        def where_done(x, y):
            d = jnp.reshape(done, (x.shape[0],) + (1,) * (x.ndim - 1)) if x.ndim else done
            return jnp.where(d, x, y)

        sim = jax.tree.map(where_done, getattr(first, sim_field), getattr(state, sim_field))
        obs = where_done(first.obs, state.obs)
        new = state.replace(**{sim_field: sim, "obs": obs})
        return (new, first), obs, state.reward, done & ~trunc, trunc, state.obs

    obs_space = gymnasium.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32)
    act_space = gymnasium.spaces.Box(-1.0, 1.0, (base.action_size,), np.float32)
    return JaxVecEnv(jax.jit(reset), jax.jit(step), num_envs, obs_space, act_space)


def jax_shims(jax) -> list[str]:
    """Brax 0.14.2 (latest release) calls jax.device_put_replicated, which recent jax removed.
    Re-provide it with the documented meaning (stack the value along a new leading device axis, one
    copy per device) and say so in the record."""
    if hasattr(jax, "device_put_replicated"):
        return []
    import jax.numpy as jnp

    def device_put_replicated(x, devices):
        return jax.tree.map(lambda a: jax.device_put(jnp.stack([jnp.asarray(a)] * len(devices))), x)

    jax.device_put_replicated = device_put_replicated
    return [f"jax.device_put_replicated re-provided by gpuenv (absent in jax {jax.__version__}; brax PPO calls it)"]


def train(case, prog, make_env, **train_kwargs) -> dict:
    """Brax PPO (brax.training.agents.ppo) on `make_env()` -> (env, details for the record), with
    the case's hyperparameters, budget and evaluation; compile time counted apart. prog:
    gpuenv.modes.ttr.train.Progress. Extra keyword arguments go to Brax's train (Playground's
    wrap_env_fn)."""
    t = prog.clock()
    import brax
    import jax

    shims = jax_shims(jax)
    from brax.training.agents.ppo import train as ppo

    from gpuenv.backends._jax import device_facts

    device, jax_details = device_facts()
    t = prog.phase("import", t)
    native = prog.native
    env, env_details = make_env()
    prog.phase("build", t)
    # From here on: compile during startup is startup, and is not subtracted twice.
    clock = CompileClock(jax, prog.clock)
    prog.compile_total = clock.total

    hp = {k: tuple(v) if isinstance(v, list) else v for k, v in case.hyperparams.items()}

    def progress(step, metrics) -> None:
        now = prog.clock()
        values = {k: float(np.asarray(v)) for k, v in metrics.items() if np.ndim(v) == 0}
        bad = sorted(k for k, v in values.items() if not math.isfinite(v))
        if bad:
            raise Diverged(f"{bad[0]} is {values[bad[0]]} at {int(step)} env steps")
        # Brax times its own evaluation; compile inside that window is already counted as compile.
        took = values.get("eval/epoch_eval_time", 0.0)
        eval_s = max(0.0, took - clock.within(now - took, now))
        if not prog.record(int(step), values["eval/episode_reward"], now, eval_s):
            raise Stop

    try:
        ppo.train(
            environment=env,
            num_timesteps=case.max_env_steps,
            num_evals=case.max_env_steps // case.eval_every_steps + 1,
            episode_length=native.episode_steps,
            num_envs=case.num_envs,
            num_eval_envs=case.eval_episodes,
            deterministic_eval=True,
            seed=prog.seed,
            progress_fn=progress,
            **train_kwargs,
            **hp,
        )
    except Stop:
        pass
    prog.end_s = prog.clock()
    return {
        "trainer": "brax.training.agents.ppo",
        "brax": brax.__version__,
        "jax": jax.__version__,
        "device": device,
        **jax_details,
        **env_details,
        "shims": shims,
        "eval_policy": "deterministic",
        # Brax evaluates at whole training epochs: the interval it used, as opposed to the one asked for.
        "eval_interval_env_steps": prog.curve[1]["env_steps"] - prog.curve[0]["env_steps"] if len(prog.curve) > 1 else None,
    }

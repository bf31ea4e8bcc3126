"""Brax's PPO support: its batched env for the shared SB3 trainer, and its native trainer (Brax PPO).
Imported only in training workers."""

from __future__ import annotations

import math

import numpy as np

from gpuenv.backends.spec import NativeTask
from gpuenv.backends.training import CompileClock, Stop
from gpuenv.errors import Diverged


def make_vecenv(pipeline: str, native: NativeTask, num_envs: int, seed: int):
    """(SB3 VecEnv, details for the record)."""
    import gymnasium
    import jax
    import jax.numpy as jnp
    from brax import envs
    from brax.envs.wrappers import training

    from gpuenv.backends.vecenv import JaxVecEnv

    base = envs.get_environment(native.env_id, backend=pipeline)
    inner = training.VmapWrapper(training.EpisodeWrapper(base, native.episode_steps, action_repeat=1))

    def reset():
        state = inner.reset(jax.random.split(jax.random.PRNGKey(seed), num_envs))
        return (state, state), state.obs

    # Brax's AutoResetWrapper semantics (reset to each env's first state, as Brax's own training
    # does), written out so that the final observation is kept for SB3.
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

        pipeline_state = jax.tree.map(where_done, first.pipeline_state, state.pipeline_state)
        obs = where_done(first.obs, state.obs)
        new = state.replace(pipeline_state=pipeline_state, obs=obs)
        return (new, first), obs, state.reward, done & ~trunc, trunc, state.obs

    reset_j, step_j = jax.jit(reset), jax.jit(step)
    obs_size = int(native.obs_shape[0])
    obs_space = gymnasium.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32)
    act_space = gymnasium.spaces.Box(-1.0, 1.0, (base.action_size,), np.float32)
    details = {
        "vectoriser": "gpuenv JaxVecEnv (jit step + auto-reset to first state on device; arrays copied to numpy)",
        "pipeline": pipeline,
        "physics_timestep_s": float(base.sys.opt.timestep),
        "n_frames": int(getattr(base, "_n_frames", 1)),
        "control_dt_s": float(base.dt),
    }
    return JaxVecEnv(reset_j, step_j, num_envs, obs_space, act_space), details



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



def train(case, prog) -> dict:  # prog: gpuenv.modes.ttr.train.Progress
    t = prog.clock()
    import brax
    import jax

    shims = jax_shims(jax)
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    from gpuenv.backends._jax import device_facts

    device, jax_details = device_facts()
    t = prog.phase("import", t)
    native = prog.native
    env = envs.get_environment(native.env_id, backend=case.variant)
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
        "pipeline": case.variant,
        "physics_timestep_s": float(env.sys.opt.timestep),
        "control_dt_s": float(env.dt),
        "shims": shims,
        "eval_policy": "deterministic",
        # Brax evaluates at whole training epochs: the interval it used, as opposed to the one asked for.
        "eval_interval_env_steps": prog.curve[1]["env_steps"] - prog.curve[0]["env_steps"] if len(prog.curve) > 1 else None,
    }



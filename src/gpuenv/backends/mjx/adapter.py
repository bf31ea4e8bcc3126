"""MuJoCo MJX on standard MJCF models: Gymnasium's own v5 model files, so the physics matches the
gymnasium and envpool backends step for step (same XML, timestep and frame_skip).

MJX ships no RL envs, so this file adds the thin env layer Gymnasium v5 defines: observation
(qpos without the root x/y, qvel), forward-velocity reward minus control cost, Ant's healthy-height
termination and the time limit. Episodes auto-reset to the cached initial state inside the scan, as
Brax does. Chosen over MuJoCo Playground because Playground's locomotion tasks are different robots
and its default implementation on GPU is Warp, which needs a GPU; this is recorded in every result.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium
import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

from gpuenv.backends import _mujoco
from gpuenv.backends._jax import ScanStepper, device_facts, make_chunk
from gpuenv.backends.base import ActionSpace, Case, StepperFacts
from gpuenv.backends.spec import NativeTask

IMPL = "jax"
# The solver settings each variant runs: jax, Gymnasium's model file as shipped (MuJoCo's defaults:
# Newton, 100 iterations, 50 line-search, Euler damping on; the like-for-like row beside Gymnasium's
# and EnvPool's MuJoCo); jax-brax, the settings Brax and Playground train MJX with on accelerators.
SETTINGS: dict[str, _mujoco.SolverSettings | None] = {"jax": None, "jax-brax": _mujoco.BRAX_MJX}
AS_SHIPPED = "Gymnasium's model file as shipped (MuJoCo's defaults)"
RESET_MODE = "auto-reset to the cached initial state (no reset noise), inside the scan"
ASSETS = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"

# Gymnasium v5 facts per model: (root coordinates excluded from obs, healthy z range or None,
# forward reward weight, control cost weight, healthy reward)
TASK_RULES = {
    "half_cheetah.xml": (1, None, 1.0, 0.1, 0.0),
    "ant.xml": (2, (0.2, 1.0), 1.0, 0.5, 1.0),
}


class MjxEnv:
    """The batched env: `init()` -> carry, `step(carry, actions)` -> carry, where the carry is
    (data, t, obs, reward, done, truncated) and obs/reward/done are those of the step just taken
    (obs before the auto-reset; `reset_obs` is what a reset env observes next)."""

    def __init__(self, native: NativeTask, num_envs: int, variant: str = "jax") -> None:
        if native.env_id not in TASK_RULES:
            raise ValueError(f"mjx adapter has no env rules for {native.env_id}")
        skip, healthy_z, fwd_w, ctrl_w, healthy_r = TASK_RULES[native.env_id]
        m = mujoco.MjModel.from_xml_path(str(ASSETS / native.env_id))
        self.settings = SETTINGS[variant]
        if self.settings is not None:
            self.settings.apply(m)
        mx = mjx.put_model(m, impl=IMPL)
        frame_skip, limit = native.frame_skip, native.episode_steps
        self.physics_steps = frame_skip  # mjx.step calls per env step (the fori_loop below)
        dt = float(m.opt.timestep) * frame_skip
        # One jitted call: run eagerly, forward() dispatches hundreds of tiny kernels (a minute on CPU).
        init = jax.jit(lambda: mjx.forward(mx, mjx.make_data(mx, impl=IMPL)))()
        self.model, self.num_envs = m, num_envs
        self.obs_size = int(m.nq - skip + m.nv)
        self.reset_obs = jnp.concatenate([init.qpos[skip:], init.qvel])

        # The carry holds obs, reward and done like a Brax State does: outputs nobody reads would be
        # removed by XLA, and the benchmark would time less work than an RL loop gets.
        def one_step(carry, action):
            d, t = carry[0], carry[1]
            x0 = d.qpos[0]
            d = d.replace(ctrl=action)
            d = jax.lax.fori_loop(0, frame_skip, lambda _, dd: mjx.step(mx, dd), d)
            t = t + 1
            obs = jnp.concatenate([d.qpos[skip:], d.qvel])
            reward = fwd_w * (d.qpos[0] - x0) / dt - ctrl_w * jnp.sum(action**2)
            truncated = t >= limit
            done = truncated
            if healthy_z is not None:
                z = d.qpos[2]
                healthy = (z >= healthy_z[0]) & (z <= healthy_z[1]) & jnp.all(jnp.isfinite(d.qpos))
                reward = reward + healthy_r * healthy
                done = done | ~healthy
                truncated = truncated & healthy
            d = jax.tree.map(lambda a, b: jnp.where(done, a, b), init, d)
            t = jnp.where(done, 0, t)
            return (d, t, obs, reward.astype(jnp.float32), done, truncated)

        self.step = jax.vmap(one_step)
        n, size = num_envs, self.obs_size
        # Built inside one jit: eager ops would each compile on their own (seconds on CPU).
        self.init = jax.jit(
            lambda: (
                jax.tree.map(lambda x: jnp.broadcast_to(x, (n, *x.shape)), init),
                jnp.zeros(n, jnp.int32),
                jnp.broadcast_to(self.reset_obs, (n, size)),
                jnp.zeros(n, jnp.float32),
                jnp.zeros(n, bool),
                jnp.zeros(n, bool),
            )
        )

    def details(self) -> dict:
        return {
            "mjx_impl": IMPL,
            **_mujoco.options(self.model.opt, _mujoco.jax_precision()),
            "solver_settings": AS_SHIPPED if self.settings is None else self.settings.name,
            "solver_settings_source": "gymnasium/envs/mujoco/assets" if self.settings is None else self.settings.source,
            "env_layer": "gpuenv minimal Gymnasium-v5 rules (obs, reward, termination, time limit)",
        }

    def action_space(self) -> ActionSpace:
        low, high = self.model.actuator_ctrlrange[:, 0], self.model.actuator_ctrlrange[:, 1]
        return ActionSpace("box", low=tuple(map(float, low)), high=tuple(map(float, high)))


def open(case: Case, native: NativeTask) -> ScanStepper:  # noqa: A001 - the adapter contract
    device, details = device_facts()
    env = MjxEnv(native, case.num_envs, case.variant)
    state = env.init()
    details.update(
        env.details(),
        model_file=f"gymnasium/envs/mujoco/assets/{native.env_id}",
        frame_skip=native.frame_skip,
    )
    facts = StepperFacts(
        native_env_id=native.env_id,
        obs_shape=(env.obs_size,),
        action_space=env.action_space(),
        reset_mode=RESET_MODE,
        device=device,
        details=details,
        physics_steps=env.physics_steps,
    )
    return ScanStepper(make_chunk(env.step, case.chunk_steps), state, facts)

"""Which physics a Playground variant runs: the MJX implementation, and for `jax-dmc` dm_control's
solver settings restored on Playground's model. Playground's xmls/README.md lists what it changed;
dm_control's own models (EnvPool ships them: envpool_assets/mujoco/assets_dmc) give the settings
restored here, and tests/test_playground.py checks the two agree."""

from __future__ import annotations

import mujoco

from gpuenv.backends import _mujoco

# dm_control's <option> for the suite's models Playground ports (MuJoCo's defaults where dm_control
# sets nothing): Playground lowered iterations and ls_iterations, disabled Euler damping, moved
# cartpole from RK4 to Euler, and gave cheetah MJX's contact culling (max_contact_points 6,
# max_geom_pairs 4: dm_control has none, so every contact MuJoCo finds is kept).
_DEFAULTS = {"iterations": 100, "ls_iterations": 50, "eulerdamp": True, "integrator": mujoco.mjtIntegrator.mjINT_EULER}
DMC_OPTIONS: dict[str, dict] = {
    "CartpoleBalance": {**_DEFAULTS, "integrator": mujoco.mjtIntegrator.mjINT_RK4},
    "CheetahRun": dict(_DEFAULTS),
}
IMPL = {"jax": "jax", "jax-dmc": "jax", "warp": "warp"}
CULLING = ("max_contact_points", "max_geom_pairs")  # MJX's contact culling (custom numerics); MuJoCo's C engine ignores them


def restore_dmc(model: mujoco.MjModel, env_id: str) -> None:
    """Set dm_control's solver settings for this task on `model`, in place."""
    opts = DMC_OPTIONS[env_id]
    model.opt.iterations = opts["iterations"]
    model.opt.ls_iterations = opts["ls_iterations"]
    model.opt.integrator = opts["integrator"]
    _mujoco.set_eulerdamp(model, opts["eulerdamp"])
    for i in range(model.nnumeric):  # MJX reads -1 as "no culling", as if the numeric were absent
        if model.numeric(i).name in CULLING:
            model.numeric_data[model.numeric_adr[i]] = -1


def load(env_id: str, variant: str):
    """Playground's env for this variant (one env; the adapter vmaps it)."""
    from mujoco import mjx
    from mujoco_playground import registry

    env = registry.load(env_id, config_overrides={"impl": IMPL[variant]})
    if variant == "jax-dmc":
        # Playground's envs keep the MjModel and the MJX model put from it (playground 0.2.0); if a
        # release renames them, say so instead of running Playground's settings under this name
        if not (hasattr(env, "_mj_model") and hasattr(env, "_mjx_model")):
            from gpuenv.errors import Unsupported

            raise Unsupported(f"playground {_version()} keeps its models elsewhere: jax-dmc cannot restore dm_control's settings")
        restore_dmc(env._mj_model, env_id)
        env._mjx_model = mjx.put_model(env._mj_model, impl=IMPL[variant])
        if env.mjx_model.opt.iterations != DMC_OPTIONS[env_id]["iterations"]:
            from gpuenv.errors import Unsupported

            raise Unsupported(f"playground {_version()} does not step the model gpuenv restored: jax-dmc not run")
    return env


def _version() -> str:
    from importlib.metadata import version

    return version("playground")


def options(model: mujoco.MjModel) -> dict:
    """The model's solver options as they ran (the names every MuJoCo-based record shares), with MJX's
    contact culling."""
    numeric = {model.numeric(i).name: int(model.numeric(i).data[0]) for i in range(model.nnumeric)}
    return {
        **_mujoco.options(model.opt, _mujoco.jax_precision()),
        # MJX's contact culling (Playground sets it on cheetah; MuJoCo's C engine ignores it); None: none
        **{k: numeric[k] if numeric.get(k, -1) > -1 else None for k in CULLING},
    }


def facts(env, variant: str) -> dict:
    """The record's physics facts for one Playground env."""
    out = {
        "playground": _version(),
        "mjx_impl": IMPL[variant],
        "solver_settings": "dm_control's (restored by gpuenv)" if variant == "jax-dmc" else "Playground's as shipped",
        **options(env.mj_model),
        "n_substeps": int(env.n_substeps),
        "control_dt_s": float(env.dt),
        "action_repeat": 1,
    }
    if variant == "warp":
        import warp

        out["warp"] = warp.__version__
        out["warp_device"] = str(warp.get_device())  # "cpu" where there is no CUDA GPU
    return out

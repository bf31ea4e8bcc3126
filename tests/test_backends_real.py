"""Every real CPU backend, run for real on a tiny case through the worker process, plus contract
checks (the env we open matches the catalogue). Marked `backend`: slower, CI still runs them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuenv.backends.base import Case, action_pool
from gpuenv.modes.base import RecordContext
from gpuenv.modes.throughput.build import build_record
from gpuenv.modes.throughput.suite import MeasureSpec, PlannedCase
from gpuenv.registry import default_registry
from gpuenv.results.schema import seal
from gpuenv.run.provenance import provenance
from gpuenv.run.runner import run_process
from gpuenv.tasks import TASKS

pytestmark = pytest.mark.backend

TINY = MeasureSpec(processes=1, values=2, warmups=1, min_time_s=0.02, chunk_steps=5, timeout_s=420)


def need(backend: str) -> None:
    reason = default_registry().get(backend).unavailable_reason()
    if reason:
        pytest.skip(reason)


def run_case(tmp_path, case: Case, processes: int = 1) -> dict:
    spec = {"mode": "env-step-throughput", "case": case.to_dict(), "settings": {"min_time_s": TINY.min_time_s, "values": 2, "warmups": 1}}
    outcomes = [run_process(spec, i, TINY.timeout_s, tmp_path) for i in range(processes)]
    for o in outcomes:
        assert o.failure is None, f"{o.failure}\n{o.stderr_tail}"
    ctx = RecordContext(suite="t", run_id="r", where=provenance())
    return seal(build_record(PlannedCase(case, replace(TINY, processes=processes)), outcomes, ctx))


def check_record(rec: dict, case: Case) -> None:
    native = default_registry().native(case.task, case.backend)
    assert rec["status"] == "ok"
    assert rec["summary"]["env_steps_per_s"]["median"] > 0
    assert rec["what"]["obs_shape"] == list(native.obs_shape), "catalogue obs shape differs from the real env"
    space = rec["what"]["action_space"]
    size = space["n"] if space["kind"] == "discrete" else len(space["low"])
    assert (space["kind"], size) == (native.action_kind, native.action_size)
    p = rec["processes"][0]
    assert p["steps_per_value"] == p["loops"] * case.chunk_steps * case.num_envs
    assert p["resources"]["samples"] >= 1
    check_physics(rec, case)


@pytest.mark.parametrize("variant", ["subproc", "dummy", "sync", "async", "async-noshm"])
def test_gymnasium_variants(tmp_path, variant):
    need("gymnasium")
    case = Case("gymnasium", variant, "cartpole", 2, chunk_steps=5)
    rec = run_case(tmp_path, case)
    check_record(rec, case)
    details = rec["what"]["details"]
    assert details["vectoriser"].endswith(
        {"subproc": "SubprocVecEnv", "dummy": "DummyVecEnv", "sync": "SyncVectorEnv", "async": "AsyncVectorEnv",
         "async-noshm": "AsyncVectorEnv"}[variant]
    )
    if variant.startswith("async"):
        assert details["shared_memory"] is (variant == "async") and details["start_method"] == "fork"


def test_gymnasium_async_steps_pong_frames_through_shared_memory(tmp_path):
    """Pong's stacked 4x84x84 frames: the observation AsyncVectorEnv's shared memory exists for."""
    need("gymnasium")
    case = Case("gymnasium", "async", "pong", 2, chunk_steps=5)
    check_record(run_case(tmp_path, case), case)


@pytest.mark.parametrize("variant", ["sync", "async"])
def test_envpool_modes(tmp_path, variant):
    need("envpool")
    case = Case("envpool", variant, "halfcheetah", 4, chunk_steps=5)
    rec = run_case(tmp_path, case)
    check_record(rec, case)
    d = rec["what"]["details"]
    assert d["batch_size"] == (4 if variant == "sync" else 2)
    assert d["num_threads"] >= 1


@pytest.mark.parametrize("variant, task", [("sync-pinned", "pong"), ("sync-pinned", "halfcheetah"), ("async-pinned", "pong")])
def test_envpool_pinned_variants_run_with_envpools_own_benchmark_settings(tmp_path, variant, task):
    """The protocol of EnvPool's published table (benchmark/test_envpool.py), for the claims page:
    threads pinned from core 0 and, for Atari only, the plain resize; recorded in the details."""
    need("envpool")
    case = Case("envpool", variant, task, 2, chunk_steps=5)
    rec = run_case(tmp_path, case)
    check_record(rec, case)
    d = rec["what"]["details"]
    assert d["batch_size"] == (2 if variant == "sync-pinned" else 1) and d["thread_affinity_offset"] == 0
    assert ("use_inter_area_resize" in d) == (task == "pong") and d.get("use_inter_area_resize") in (None, False)


def test_envpool_async_refuses_a_chunk_it_cannot_count_exactly(tmp_path):
    need("envpool")
    spec = {"mode": "env-step-throughput", "case": Case("envpool", "async", "cartpole", 5, chunk_steps=5).to_dict(), "settings": {"min_time_s": 0.02}}
    o = run_process(spec, 0, 120, tmp_path)
    assert o.result is None and "not a multiple of batch_size 2" in o.failure["reason"]


def _open(backend: str, task: str, num_envs: int = 2):
    info = default_registry().get(backend)
    return info.load().open(Case(backend, info.variants[-1 if backend == "gymnasium" else 0], task, num_envs, 3), default_registry().native(task, backend))


@pytest.mark.parametrize("backend", ["gymnasium", "envpool", "pufferlib"])
def test_host_catalogue_matches_real_envs(backend):
    """Every task the catalogue says a host backend offers opens with the declared sizes."""
    need(backend)
    registry = default_registry()
    for name in TASKS:
        if registry.why_not(name, backend):
            continue
        st = _open(backend, name)
        try:
            nt = registry.native(name, backend)
            assert st.facts.obs_shape == nt.obs_shape, name
            a = st.facts.action_space
            assert (a.kind, a.n if a.kind == "discrete" else len(a.low)) == (nt.action_kind, nt.action_size), name
            st.load_actions(action_pool(a, 2, 4, 0))
            st.run(1)  # auto-reset paths run too: 3 steps each
            st.sync()
        finally:
            st.close()


def test_brax_runs_and_second_process_hits_the_compile_cache(tmp_path, monkeypatch):
    need("brax")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax-cache"))
    (tmp_path / "jax-cache").mkdir()
    case = Case("brax", "generalized", "halfcheetah", 2, chunk_steps=5)
    rec = run_case(tmp_path, case, processes=2)
    check_record(rec, case)
    assert [p["compile_cache"] for p in rec["processes"]] == ["miss", "hit"]
    assert rec["summary"]["compile_s_cold"] and rec["summary"]["compile_s_warm"]
    assert rec["what"]["details"]["pipeline"] == "generalized"
    import jax

    assert rec["what"]["device"].split(":")[0] == jax.default_backend()


def test_mjx_runs_on_gymnasium_mjcf(tmp_path):
    need("mjx")
    case = Case("mjx", "jax", "halfcheetah", 2, chunk_steps=5)
    rec = run_case(tmp_path, case)
    check_record(rec, case)
    d = rec["what"]["details"]
    assert d["mjx_impl"] == "jax" and d["model_file"].endswith("half_cheetah.xml")
    assert d["physics_timestep_s"] == pytest.approx(0.01) and d["frame_skip"] == 5
    # Gymnasium's model file as shipped: MuJoCo's defaults
    assert (d["solver"], d["iterations"], d["ls_iterations"], d["eulerdamp"]) == ("newton", 100, 50, True)


# Physics (sub)steps per env step as each backend family runs them, checked in every record check_record
# sees: Brax's positional pipeline steps its halfcheetah 16 times (the catalogue's frame_skip is 5: physics
# steps/s was once computed with that), generalized and MJX 5, Gymnasium's and EnvPool's MuJoCo 5,
# CartPole 1, Playground n_substeps, Atari none; and whether MuJoCo's solver settings apply (then the
# record names them with the shared keys). Keyed (backend, variant, task), variant None: any.
PHYSICS = {
    ("brax", "positional", "halfcheetah"): (16, False),
    ("brax", "generalized", "halfcheetah"): (5, False),
    ("brax", "mjx", "halfcheetah"): (5, True),
    ("mjx", None, "halfcheetah"): (5, True),
    ("gymnasium", None, "halfcheetah"): (5, True),
    ("gymnasium", None, "cartpole"): (1, False),
    ("gymnasium", None, "pong"): (None, False),
    ("envpool", None, "halfcheetah"): (5, True),
    ("envpool", None, "cheetah_run"): (1, True),
    ("envpool", None, "pong"): (None, False),
    ("playground", None, "cartpole_balance"): (1, True),
}


def check_physics(rec: dict, case: Case) -> None:
    from gpuenv.backends import _mujoco

    want = PHYSICS.get((case.backend, case.variant, case.task)) or PHYSICS.get((case.backend, None, case.task))
    if want is None:
        return
    steps, mujoco_solver = want
    assert rec["what"]["physics"]["physics_steps_per_env_step"] == steps
    s = rec["summary"]
    assert s["physics_steps_per_s_median"] == (None if steps is None else pytest.approx(s["env_steps_per_s"]["median"] * steps))
    d = rec["what"]["details"]
    if mujoco_solver:  # every MuJoCo-based record names its solver settings with the shared keys
        assert {k: d.get(k) is not None for k in _mujoco.KEYS} == dict.fromkeys(_mujoco.KEYS, True), d
        assert d["precision"] == ("float64" if case.backend in ("gymnasium", "envpool") else "float32")


# the families no other test here runs
@pytest.mark.parametrize(("backend", "variant", "task"), [("brax", "positional", "halfcheetah"), ("brax", "mjx", "halfcheetah"),
                                                          ("mjx", "jax-brax", "halfcheetah"), ("gymnasium", "dummy", "halfcheetah"),
                                                          ("envpool", "sync", "cheetah_run"), ("playground", "jax", "cartpole_balance")])
def test_physics_steps_are_what_the_backend_ran_and_mujoco_records_state_their_solver(tmp_path, backend, variant, task):
    need(backend)
    case = Case(backend, variant, task, 2, chunk_steps=5)
    rec = run_case(tmp_path, case)
    check_record(rec, case)
    d = rec["what"]["details"]
    if (backend, variant) == ("mjx", "jax-brax"):  # Brax's MJX settings (brax/envs/ant.py, backend="mjx")
        assert (d["solver"], d["iterations"], d["ls_iterations"], d["eulerdamp"]) == ("newton", 1, 4, False)


def test_gpu_required_but_absent_is_a_clear_failure(tmp_path, monkeypatch):
    need("brax")
    import jax

    if jax.default_backend() == "gpu":
        pytest.skip("a GPU is present")
    monkeypatch.setenv("GPUENV_REQUIRE_GPU", "1")
    spec = {"mode": "env-step-throughput", "case": Case("brax", "generalized", "halfcheetah", 2, 5).to_dict(), "settings": {"min_time_s": 0.02}}
    o = run_process(spec, 0, 300, tmp_path)
    assert o.result is None
    assert o.failure["reason"].startswith("JAX is running on 'cpu', not the GPU")


def test_a_model_file_this_mujoco_cannot_compile_is_read_as_xml_over_mujocos_defaults():
    """EnvPool's hopper.xml uses global coordinates (dropped in MuJoCo 2.3.4; EnvPool runs its own
    MuJoCo build): its solver settings come from its <option> over MuJoCo's defaults, and say so."""
    need("envpool")
    from pathlib import Path

    import envpool_assets

    from gpuenv.backends._mujoco import file_options

    d = file_options(str(Path(envpool_assets.__file__).parent / "mujoco/assets_gym/hopper.xml"))
    assert (d["integrator"], d["physics_timestep_s"], d["solver"], d["iterations"], d["ls_iterations"]) == ("rk4", 0.002, "newton", 100, 50)
    assert "not compiled here" in d["options_read"]
    assert "options_read" not in file_options(str(Path(envpool_assets.__file__).parent / "mujoco/assets_gym/half_cheetah.xml"))

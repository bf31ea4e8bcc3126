"""PufferLib Ocean (PufferAI's pufferlib 3.0.0, its C envs) in its own Python environment: the lock
(numpy<2, gymnasium 0.29.1, gym 0.23.0) and pufferlib built from its hash-checked sdist by the
backend's build step (gcc: .ci/run installs it), then Ocean's Breakout through `gpuenv bench` for real.
Where the package index cannot be reached (the venv, the lock or the sdist's download fails) the real
test skips and says why; any other failure of the build fails it."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile

import pytest
from conftest import ROOT, TINY_TTR, served_training, write_suite

from gpuenv.backends.ocean import build
from gpuenv.registry import default_registry

INFO = default_registry().get("ocean")


def test_declared_in_its_own_environment_with_the_versions_oceans_runtime_needs():
    env = INFO.environment
    assert env is not None and env.python == "3.11" and env.build_step == "gpuenv.backends.ocean.build:install"
    lock = (ROOT / env.lock).read_text()
    assert "\nnumpy==1." in lock and "\ngymnasium==0.29.1 \\\n" in lock and "\ngym==0.23.0 \\\n" in lock
    assert "\nsetuptools==" in lock and "\nwheel==" in lock  # the build runs without isolation
    assert not re.search(r"^pufferlib==", lock, re.M)  # built by the step, not installed from an index
    assert set(default_registry().offers("ocean_breakout")) == {"ocean"}
    # the main install's `pufferlib` module is Metta's pufferlib-core: Ocean's needs gym besides
    assert "gym" in INFO.requires


def _sdist(tmp_path, names):
    path = tmp_path / "pufferlib-3.0.0.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        for n in names:
            info = tarfile.TarInfo(f"pufferlib-3.0.0/{n}")
            info.size = 1
            t.addfile(info, io.BytesIO(b"x"))
    return path


def test_the_source_is_prepared_without_githubs_downloads_and_a_changed_sdist_is_refused(tmp_path, monkeypatch):
    sdist = _sdist(tmp_path, ["setup.py", "pufferlib/ocean/impulse_wars/binding.c", "pufferlib/ocean/breakout/binding.c"])
    src, stub = build.prepare(sdist, tmp_path / "work")
    for d in build.EMPTY:  # what setup.py would download from GitHub when missing; nothing on Linux reads them
        assert (src / d).is_dir() and not any((src / d).iterdir())
    assert not (src / "pufferlib/ocean/impulse_wars/binding.c").exists()  # Box2D's one user: left out
    assert (src / "pufferlib/ocean/breakout/binding.c").exists()
    assert "BuildExtension" in (stub / "torch/utils/cpp_extension.py").read_text()
    # a download whose sha256 differs is refused and leaves nothing behind; the right one is kept under its name
    monkeypatch.setattr(build, "SDIST_URL", sdist.as_uri())
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    monkeypatch.setattr(build, "SDIST_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="expected 0000"):
        build.fetch(downloads)
    assert not any(downloads.iterdir())
    monkeypatch.setattr(build, "SDIST_SHA256", hashlib.sha256(sdist.read_bytes()).hexdigest())
    assert build.fetch(downloads).read_bytes() == sdist.read_bytes() and len(list(downloads.iterdir())) == 1


def test_a_sweep_of_pufferlib_is_refused_in_one_line(cli):
    r = cli("sweep", "pufferlib==3.0.0,2.0.6")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "ocean cannot be swept: its environment builds pufferlib with a build step" in r.stderr


@pytest.mark.backend
def test_ocean_breakout_builds_and_steps_for_real_and_records_its_settings(cli, tmp_path):
    r = cli("bench", "--suite", "smoke", "--backend", "ocean", "--task", "ocean_breakout", "--num-envs", "2",
            "--processes", "1", "--out", str(tmp_path), timeout=1200)
    if any(f"could not {w}" in r.stderr for w in ("create the venv", "install the lock")) or "URLError" in r.stderr:
        pytest.skip(f"Ocean's environment could not be built here (no package index): {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    (rec,) = (json.loads(p.read_text()) for p in tmp_path.rglob("*.json"))
    assert rec["status"] == "ok" and rec["summary"]["env_steps_per_s"]["median"] > 0
    d = rec["what"]["details"]
    assert d["pufferlib"] == build.VERSION and d["env_kwargs"]["frameskip"] == 4 and d["env_kwargs"]["brick_rows"] == 6
    assert rec["what"]["obs_shape"] == [118] and rec["where"]["machine"]["python"].startswith("3.11.")
    e = rec["where"]["environment"]
    assert e["name"] == "ocean" and e["build_step"].startswith("gpuenv.backends.ocean.build:install ")
    assert e["lock_sha256"] == hashlib.sha256((ROOT / INFO.environment.lock).read_bytes()).hexdigest()


def test_the_main_installs_pufferlib_is_not_oceans_and_telling_them_apart_imports_neither(tmp_path):
    """Metta's pufferlib-core (the main install's `pufferlib`) has no Ocean: the ocean backend is never run in
    the main interpreter, and finding that out imports no pufferlib (its __init__ imports torch)."""
    import subprocess
    import sys

    code = ("import sys; from gpuenv.registry import default_registry; b = default_registry().get('ocean'); "
            "print(b.missing(), b.in_own_image(), 'pufferlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "['pufferlib.ocean', 'gym'] False False", out


OCEAN_PPO = """
[[case]]
task = "ocean_breakout"
backends = ["ocean:native"]
trainer = "sb3"
num_envs = 4
threshold = 864.0
max_env_steps = 2048
max_time_s = 300
eval_every_steps = 1024
eval_episodes = 2
[case.hyperparams]
n_steps = 128
batch_size = 256
n_epochs = 1
"""


@pytest.mark.backend
def test_the_shared_ppo_trainer_trains_on_ocean_served_from_its_environment(cli, tmp_path):
    """torch and SB3 are not in Ocean's environment: the trainer runs in the main install, and Breakout
    steps in a process of Ocean's environment (gpuenv.backends.served); the record names both."""
    rec, run = served_training(cli, tmp_path, "ocean", "--suite", str(write_suite(tmp_path / "ocean-ppo.toml", TINY_TTR + OCEAN_PPO)))
    assert [p["env_steps"] for p in run["curve"]] == [1024, 2048] and all(0 <= p["eval_return"] <= 864 for p in run["curve"])
    d = run["details"]
    assert d["pufferlib"] == build.VERSION and d["env_kwargs"]["frameskip"] == 4
    w = rec["where"]
    # the trainer's process (numpy 2 here), its simulator from Ocean's environment, whose own versions are beside
    assert w["packages"]["pufferlib"] == build.VERSION and w["packages"]["torch"] and w["packages"]["numpy"].startswith("2.")
    assert w["environment"]["packages"]["numpy"].startswith("1.") and w["environment"]["packages"]["torch"] is None

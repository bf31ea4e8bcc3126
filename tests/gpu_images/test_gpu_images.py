"""The GPU images (brax, mjx, and Isaac Lab's kit-less one) built and run for real on a machine
without a GPU: `make test-images-gpu`, or `make test` with GPUENV_TEST_GPU_IMAGES=1 (as CI runs it; 7-9 GB
of CUDA and torch wheels per image, so a plain `make test` leaves them out). Without a GPU each image must refuse in one line naming the one override,
and, overridden, run the smoke suite on the CPU with records marked as CPU fallback. What a GPU
would show (JAX and torch on CUDA in one process) is not checked here."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from conftest import ROOT, build_images

from gpuenv.images import get_image, locked_versions
from gpuenv.results.schema import load

DOCKER = shutil.which("docker")
if not DOCKER or subprocess.run([DOCKER, "info"], capture_output=True).returncode != 0:
    pytest.skip("no Docker engine running here: .ci/run starts Debian's dockerd", allow_module_level=True)

GPU_IMAGES = ("brax", "mjx", "isaaclab")
# Each image's smallest suite: the smoke suite, or Isaac Lab's own at one small case (Newton on the CPU).
# One process per case: the test asks whether each backend runs in the image on the CPU, not how its
# rate varies between processes (each extra process imports and compiles again: the mjx image took 199 s with three).
SMOKE = {
    "brax": ["--suite", "smoke", "--backend", "brax", "--backend", "gymnax", "--processes", "1"],  # gpuenv/brax carries gymnax
    "mjx": ["--suite", "smoke", "--backend", "mjx", "--backend", "playground", "--processes", "1"],  # it carries MuJoCo Playground
    "isaaclab": ["--suite", "isaaclab", "--task", "cartpole", "--num-envs", "16", "--processes", "1"],
}


@pytest.fixture(scope="module")
def built(request) -> Iterator[tuple[str, str]]:
    """(backend, image id) of gpuenv/<backend>:latest, built here, and removed (with its build cache)
    once its tests are done: one GPU image at a time holds disk (7-9 GB each, more while pip installs
    it), so a CI machine with room for one builds all three. The tests take it by indirect parameter:
    pytest runs each image's tests together."""
    backend = request.param
    ids = build_images((backend,), timeout=5400)
    yield backend, ids[backend]
    subprocess.run([DOCKER, "rmi", "-f", f"gpuenv/{backend}:latest"], capture_output=True)
    subprocess.run([DOCKER, "builder", "prune", "-f"], capture_output=True)


def run(image: str, *args: str, env: dict | None = None, volume: str | None = None, timeout: int = 1800):
    e = [a for k, v in (env or {}).items() for a in ("-e", f"{k}={v}")]
    v = ["-v", volume] if volume else []
    return subprocess.run([DOCKER, "run", "--rm", "--network", "none", "--user", "1234:1234", *e, *v, image, *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("built", GPU_IMAGES, indirect=True)
def test_without_a_gpu_the_image_refuses_in_one_line_naming_the_override(built):
    backend, _ = built
    for args in (["bench", *SMOKE[backend]], ["doctor"]):
        r = run(f"gpuenv/{backend}:latest", *args, timeout=600)
        assert r.returncode == 2, r.stdout + r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stdout + r.stderr, r.stderr  # no JAX CUDA-plugin traceback first
        assert "no NVIDIA GPU visible" in lines[0] and "GPUENV_CPU_OK=1" in lines[0] and "GPUENV_REQUIRE_GPU=1" in lines[0]


@pytest.mark.parametrize("built", GPU_IMAGES, indirect=True)
def test_overridden_the_image_runs_the_smoke_suite_on_the_cpu_marked_as_fallback(built, tmp_path):
    backend, image_id = built
    results = tmp_path / "results"
    results.mkdir()
    os.chmod(results, 0o777)
    r = run(f"gpuenv/{backend}:latest", "bench", *SMOKE[backend], "--out", "results/local",
            env={"GPUENV_CPU_OK": "1", "GPUENV_IMAGE_ID": image_id}, volume=f"{results}:/home/gpuenv/results")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stdout + r.stderr
    records = [load(p) for p in results.rglob("*.json")]
    assert records and all(rec["status"] == "ok" for rec in records), [rec["failure"] for rec in records]
    named = {SMOKE[backend][i + 1] for i, a in enumerate(SMOKE[backend]) if a == "--backend"}
    assert not named or {rec["case"]["backend"] for rec in records} == named  # the backends it carries ran too
    lock_sha = hashlib.sha256((ROOT / "docker" / "locks" / f"{backend}.txt").read_bytes()).hexdigest()
    for rec in records:
        assert rec["what"]["device"] == "cpu" and rec["what"]["details"]["cpu_fallback"].startswith("GPUENV_CPU_OK=1")
        c = rec["where"]["machine"]["container"]
        assert c["image"] == backend and c["id"] == image_id and c["lock_sha256"] == lock_sha
        assert rec["where"]["env"]["GPUENV_REQUIRE_GPU"] == "1"
        assert rec["where"]["packages"]["torch"] == locked_versions(get_image(backend))["torch"]  # 2.13.0; Isaac Lab pins 2.11.0
    if backend == "isaaclab":  # in its image, the image's interpreter is the backend's environment
        assert {r["case"]["task"] for r in records} == {"cartpole"}
        assert all(r["where"]["machine"]["python"].startswith("3.12.") and r["what"]["details"]["physics_preset"] == "newton_mjwarp"
                   for r in records)


@pytest.mark.parametrize("built", GPU_IMAGES[:1], indirect=True)  # brax, tested with brax's own
def test_torch_and_jax_share_one_cuda_13_stack_in_the_image(built):
    code = ("import importlib.metadata as m, torch, jax; "
            "print(m.version('torch'), torch.version.cuda, jax.__version__, m.version('nvidia-cudnn-cu13'), "
            "sorted(d.metadata['Name'] for d in m.distributions() if d.metadata['Name'].endswith('-cu12')))")
    r = subprocess.run([DOCKER, "run", "--rm", "--network", "none", "-e", "JAX_PLATFORMS=cpu", "--entrypoint", "python",
                        "gpuenv/brax:latest", "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    torch_v, cuda, jax_v, cudnn, cu12 = r.stdout.split(" ", 4)
    assert torch_v == "2.13.0" and cuda.startswith("13.") and jax_v == "0.10.2" and cudnn == "9.20.0.48"
    assert cu12.strip() == "[]"  # no CUDA 12 wheel beside the CUDA 13 set

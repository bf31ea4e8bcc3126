"""Images built and run for real with the Docker engine of this machine (.ci/run installs Debian's
docker.io and debootstrap and starts dockerd): `gpuenv images build` with plain `docker build`, then
the smoke suite in each CPU image offline, as a uid that is neither 0 nor 1000, records checked on
the host. Without an engine these tests skip and say why."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

import pytest
from conftest import ROOT, build_images

from gpuenv.measure.system import git_sha
from gpuenv.results.schema import load

pytestmark = pytest.mark.backend

DOCKER = shutil.which("docker")
ENGINE = bool(DOCKER) and subprocess.run([DOCKER or "docker", "info"], capture_output=True).returncode == 0
if not ENGINE:
    pytest.skip("no Docker engine running here (client only, or none): .ci/run starts Debian's dockerd", allow_module_level=True)

CPU_IMAGES = ("gymnasium", "envpool", "godot")


@pytest.fixture(scope="module")
def built() -> dict[str, str]:
    """gpuenv/<b>:latest for the CPU images, built here; image ids by backend."""
    return build_images(CPU_IMAGES)


@pytest.mark.parametrize("backend", CPU_IMAGES)
def test_smoke_suite_runs_in_the_image_offline_as_another_uid(built, backend, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    os.chmod(results, 0o777)
    r = subprocess.run(
        [DOCKER, "run", "--rm", "--network", "none", "--user", "1234:1234", "-e", f"GPUENV_IMAGE_ID={built[backend]}",
         "-v", f"{results}:/home/gpuenv/results", f"gpuenv/{backend}:latest", "bench", "--suite", "smoke",
         "--backend", backend, "--out", "results/local"],
        capture_output=True, text=True, timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    records = [load(p) for p in results.rglob("*.json")]
    assert records and all(rec["status"] == "ok" for rec in records), [rec["failure"] for rec in records]
    assert {rec["case"]["backend"] for rec in records} == {backend}
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lock_sha = hashlib.sha256((ROOT / "docker" / "locks" / f"{backend}.txt").read_bytes()).hexdigest()
    for rec in records:
        c = rec["where"]["machine"]["container"]
        assert c["image"] == backend and c["id"] == built[backend]
        assert c["lock"] == f"docker/locks/{backend}.txt" and c["lock_sha256"] == lock_sha
        assert c["git_sha"] == head and rec["where"]["git"]["sha"] == head
        assert c["git_dirty"] is rec["where"]["git"]["dirty"] is git_sha(ROOT)["dirty"]  # uncommitted changes are said
        assert c["gpuenv_version"] == rec["where"]["packages"]["gpuenv"] == "0.1.0"
        assert c["base"]  # the pinned python base, or the local debootstrap one where it could not be pulled
        assert rec["where"]["machine"]["in_container"] is True


def test_doctor_in_a_cpu_image(built):
    r = subprocess.run([DOCKER, "run", "--rm", "--network", "none", "gpuenv/envpool:latest", "doctor", "--cpu-ok"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_bench_image_runs_the_suite_in_the_image_and_the_records_land_on_the_host(built, tmp_path, cli):
    """What `make bench-envpool` does (gpuenv bench-image envpool), with the smoke suite."""
    r = cli("bench-image", "envpool", "--suite", "smoke", cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "docker run --rm --user" in r.stdout and "GPUENV_IMAGE_ID=" + built["envpool"] in r.stdout
    records = [load(p) for p in (tmp_path / "results").rglob("*.json")]
    assert records and all(rec["status"] == "ok" for rec in records)
    assert all(rec["where"]["machine"]["container"]["ref"] == "gpuenv/envpool:latest" for rec in records)
    assert all(rec["where"]["machine"]["container"]["id"] == built["envpool"] for rec in records)


def test_dispatch_runs_its_tasks_in_the_image_and_records_say_so(built, tmp_path, cli):
    """`gpuenv dispatch --container docker`: each array task's bench runs in gpuenv/<backend>, offline,
    on Slurm where this machine runs one (tools/slurm-local.sh), else on submitit's local executor."""
    up = shutil.which("sinfo") and subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0
    out = tmp_path / "o"
    r = cli("dispatch", "--executor", "slurm" if up else "local", "--container", "docker", "--suite", "smoke",
            "--backend", "envpool:sync", "--out", str(out), timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    records = [load(p) for p in out.rglob("*.json")]
    assert len(records) == 1 and records[0]["status"] == "ok"
    rec = records[0]
    assert rec["where"]["scheduler"]["container"] == "docker" and rec["where"]["scheduler"]["image"] == "gpuenv/envpool:latest"
    assert rec["where"]["machine"]["in_container"] is True and rec["where"]["machine"]["container"]["id"] == built["envpool"]

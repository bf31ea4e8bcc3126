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

CPU_IMAGES = ("gymnasium", "envpool", "godot", "genesis", "ocean")
# the backends each image's smoke run covers: gpuenv/godot carries Godot 4.6 (godot4) and Godot 3.2 (godot),
# gpuenv/gymnasium PufferLib's vectoriser; gpuenv/genesis runs Genesis's CPU backend (its image's
# interpreter is its own environment), gpuenv/ocean PufferLib Ocean (pufferlib built in the image)
RUNS = {"gymnasium": ("gymnasium", "pufferlib"), "envpool": ("envpool",), "godot": ("godot4", "godot"), "genesis": ("genesis",), "ocean": ("ocean",)}
# A fresh container has no kernel cache: Genesis's first process compiles its kernels (50-80 s here), so its
# image runs the smoke case in one process, not three
ARGS = {"genesis": ("--processes", "1")}


@pytest.fixture(scope="module")
def built() -> dict[str, str]:
    """gpuenv/<b>:latest for the CPU images, built here; image ids by backend."""
    return build_images(CPU_IMAGES)


@pytest.mark.parametrize("backend", CPU_IMAGES)
def test_smoke_suite_runs_in_the_image_offline_as_another_uid(built, backend, tmp_path):
    backends = [a for b in RUNS[backend] for a in ("--backend", b)]
    results = tmp_path / "results"
    results.mkdir()
    os.chmod(results, 0o777)
    r = subprocess.run(
        [DOCKER, "run", "--rm", "--network", "none", "--user", "1234:1234", "-e", f"GPUENV_IMAGE_ID={built[backend]}",
         "-v", f"{results}:/home/gpuenv/results", f"gpuenv/{backend}:latest", "bench", "--suite", "smoke",
         *backends, *ARGS.get(backend, ()), "--out", "results/local"],
        capture_output=True, text=True, timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    records = [load(p) for p in results.rglob("*.json")]
    assert records and all(rec["status"] == "ok" for rec in records), [rec["failure"] for rec in records]
    assert {rec["case"]["backend"] for rec in records} == set(RUNS[backend])
    godot4 = [rec["what"]["details"] for rec in records if rec["case"]["backend"] == "godot4"]
    assert all(d["engine"].startswith("Godot 4.") for d in godot4)  # the image's Godot 4 runs, as uid 1234
    assert {d["physics_engine"] for d in godot4} == ({"GodotPhysics3D", "Jolt Physics"} if godot4 else set())
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


def test_pufferlibs_trainer_learns_in_the_ocean_image_offline(built, tmp_path):
    """The ppo-smoke suite's pufferl case, one seed, in gpuenv/ocean: its C++ kernel, built in the image
    against torch's CPU wheel, trains Ocean's CartPole to the threshold without a network, as uid 1234."""
    results = tmp_path / "results"
    results.mkdir()
    os.chmod(results, 0o777)
    r = subprocess.run(
        [DOCKER, "run", "--rm", "--network", "none", "--user", "1234:1234", "-v", f"{results}:/home/gpuenv/results",
         "gpuenv/ocean:latest", "bench", "--suite", "ppo-smoke", "--case", "ppo-pufferl-ocean-native-ocean_cartpole-n1024",
         "--seeds", "1", "--out", "results/local"],
        capture_output=True, text=True, timeout=900,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    (rec,) = (load(p) for p in results.rglob("*.json"))
    assert rec["status"] == "ok" and rec["runs"][0]["status"] == "reached"
    assert rec["runs"][0]["details"]["trainer"].startswith("pufferlib.pufferl") and rec["where"]["machine"]["container"]["image"] == "ocean"


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


def _containers_left() -> list[str]:
    r = subprocess.run([DOCKER, "ps", "-a", "--filter", "name=gpuenv-ab-", "--format", "{{.Names}}"], capture_output=True, text=True)
    return r.stdout.split()


def test_ab_runs_an_image_side_in_its_containers_against_this_checkout(built, tmp_path, cli):
    """`gpuenv ab image:REF .`: side A's workers are containers of the image, B's run here, interleaved;
    the records say which ran where (container, its commit), and no container is left."""
    import json

    from conftest import fake_suite

    suite = fake_suite(tmp_path / "s.toml", backends='"envpool:sync", "gymnasium:dummy"', num_envs="[2]")
    r = cli("ab", "image:gpuenv/envpool:latest", ".", "--suite", str(suite), "--blocks", "3", "--out", str(tmp_path / "out"),
            "--json", cwd=ROOT, timeout=900)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["sides"]["A"]["kind"] == "image" and doc["sides"]["A"]["label"].startswith("image gpuenv/envpool:latest (")
    assert [v["case_key"] for v in doc["verdicts"]] == ["envpool-sync-cartpole-n2"]  # an image runs only its backend
    assert doc["verdicts"][0]["pairs"] == 3 and doc["failed"] == []
    recs = {p.parent.parent.name: load(p) for p in (tmp_path / "out").rglob("*.json")}
    a, b = recs["A"], recs["B"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    c = a["where"]["machine"]["container"]
    assert c["ref"] == "gpuenv/envpool:latest" and c["id"] == built["envpool"] and a["where"]["machine"]["in_container"] is True
    assert a["where"]["git"]["sha"] == head and a["where"]["environment"]["name"] == "image gpuenv/envpool:latest"
    assert a["where"]["packages"]["envpool"] == b["where"]["packages"]["envpool"]
    assert "container" not in b["where"]["machine"] or b["where"]["machine"]["container"] is None
    assert len(a["processes"]) == len(b["processes"]) == 3 and a["tags"]["side_spec"] == "image:gpuenv/envpool:latest"
    assert _containers_left() == []


def test_an_image_side_whose_worker_times_out_leaves_no_container(built, tmp_path, cli):
    from conftest import fake_suite

    suite = fake_suite(tmp_path / "s.toml", backends='"envpool:sync"', timeout=1)  # a container alone takes longer
    r = cli("ab", "image:gpuenv/envpool:latest", "image:gpuenv/envpool:latest", "--suite", str(suite), "--blocks", "3",
            "--out", str(tmp_path / "out"), cwd=ROOT, timeout=600)
    assert "Traceback" not in r.stderr and "timed out after 1 s" in " ".join((r.stdout + r.stderr).split()), r.stdout + r.stderr
    assert _containers_left() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["image:gpuenv/no-such-image:x", "."], "no image 'gpuenv/no-such-image:x' in this Docker engine"),
        (["image:gpuenv/envpool:latest", ".", "--backend", "gymnasium:dummy"], "runs only backend envpool"),
        (["image:gpuenv/envpool:latest", "image:gpuenv/gymnasium:latest"], "belong to different backends"),
    ],
)
def test_bad_image_sides_are_one_line_exit_2(built, cli, args, message):
    r = cli("ab", *args, cwd=ROOT)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr

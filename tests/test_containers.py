"""Docker images without a Docker engine: hadolint, structure (dockerfile-parse), lock files, the bake
file, `gpuenv doctor` and the bench-image path. Tests that need an engine skip with the reason."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from dockerfile_parse import DockerfileParser

from gpuenv.images import BASE_TAG, CUDA_MIN_DRIVER, bake, bake_text, base_of, images, locked_versions, pinned_base
from gpuenv.images.build import COMMIT_ARGS
from gpuenv.images.catalogue import froms as catalogue_froms
from gpuenv.results.schema import load

IMAGES = images()

DOCKERFILES = sorted((ROOT / "docker").glob("*.Dockerfile"))
DIGEST = re.compile(r"^[\w.\-/:]+:[\w.\-]+@sha256:[0-9a-f]{64}$")


def parsed(path: Path) -> DockerfileParser:
    d = DockerfileParser(fileobj=open(path, "rb"))  # noqa: SIM115 - parser keeps it
    return d


def test_every_image_has_a_dockerfile_and_every_dockerfile_is_used():
    used = {IMAGES[b].dockerfile for b in IMAGES} | {"docker/base.Dockerfile"}
    assert {str(p.relative_to(ROOT)) for p in DOCKERFILES} == used


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_clean(path):
    hadolint = shutil.which("hadolint") or str(Path(os.sys.executable).parent / "hadolint")
    r = subprocess.run([hadolint, "--no-color", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", [p for p in DOCKERFILES if p.name != "base.Dockerfile"], ids=lambda p: p.name)
def test_a_new_commit_reuses_every_install_layer(path):
    """The per-commit build args (git sha, dirty flag, gpuenv's version) are declared after the last RUN,
    and used: an ARG is in the environment of every RUN after it, so one declared earlier makes a commit
    that only changed src/ reinstall every package (the CPU images took 413 s more in CI)."""
    steps = [(i["instruction"], i["value"]) for i in parsed(path).structure]
    last_run = max(n for n, (ins, _) in enumerate(steps) if ins == "RUN")
    declared = {v.split("=")[0]: n for n, (ins, v) in enumerate(steps) if ins == "ARG"}
    for arg in COMMIT_ARGS:
        assert declared.get(arg, -1) > last_run, f"{path.name}: ARG {arg} must come after the last RUN"
        assert any(ins == "ENV" and f"${{{arg}}}" in v for ins, v in steps[declared[arg]:]), f"{path.name}: {arg} unused"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned_by_tag_and_digest(path):
    froms = [i["value"].split()[0] for i in parsed(path).structure if i["instruction"] == "FROM"]
    assert froms, path
    # An earlier stage's base is pinned by digest too, or made by gpuenv before the build (Image.stages:
    # the godot image's debootstrapped Debian sid with Godot 4), its build arg passed by `images build`.
    made = {arg for img in IMAGES.values() if img.dockerfile == str(path.relative_to(ROOT)) for arg, _ in img.stages}
    for ref, line in zip(catalogue_froms(path)[:-1], froms[:-1]):
        assert DIGEST.match(ref) or line.strip("${}") in made, f"{path.name}: stage FROM {ref} is neither pinned nor made by gpuenv"
    image = base_of(path)  # the final stage's FROM ${ARG}: the ARG's default
    if image == BASE_TAG:  # gpuenv/base, built first from docker/base.Dockerfile (checked itself)
        target = bake()["target"][path.name.removesuffix(".Dockerfile")]
        assert target["contexts"] == {"base": "target:base"} and target["args"]["BASE"] == "base"
        assert bake()["target"]["base"]["dockerfile"] == "docker/base.Dockerfile"
        return
    assert DIGEST.match(image), f"{path.name}: FROM {image} is not pinned by tag and sha256 digest"
    assert "syntax=" not in path.read_text().splitlines()[0]  # no frontend pulled from Docker Hub


def test_build_commands_need_no_buildx_and_build_the_base_first(cli):
    r = cli("images", "build", "gymnasium", "envpool", "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("docker ")]
    assert [line.split(" -t ")[1].split()[0] for line in lines] == [BASE_TAG, "gpuenv/gymnasium:latest", "gpuenv/envpool:latest"]
    assert all(line.startswith("docker build -f ") and "buildx" not in line for line in lines)
    assert "--build-arg BASE=gpuenv/base:latest" in lines[1] and "--build-arg GIT_SHA=" in lines[1]
    assert f"--build-arg PYTHON_BASE={pinned_base()}" in lines[0]


@pytest.mark.parametrize("backend", list(IMAGES))
def test_images_install_only_from_their_hash_locked_file_and_run_gpuenv_as_non_root(backend):
    img = IMAGES[backend]
    d = parsed(ROOT / img.dockerfile)
    runs = [i["value"] for i in d.structure if i["instruction"] == "RUN"]
    pip = [r for r in runs if "pip install" in r]
    assert pip, f"{backend}: installs nothing"
    for r in pip:
        assert "--require-hashes" in r and "-r /opt/gpuenv/lock.txt" in r, r
    copies = [i["value"] for i in d.structure if i["instruction"] == "COPY"]
    lock_arg = next((i["value"] for i in d.structure if i["instruction"] == "ARG" and i["value"].startswith("LOCK=")), None)
    if lock_arg:  # the default lock, replaceable by a version lock (make image-<b> <PKG>_VERSION=...)
        assert lock_arg == f"LOCK=docker/locks/{backend}.txt" and "${LOCK} /opt/gpuenv/lock.txt" in copies
    else:
        assert f"docker/locks/{backend}.txt /opt/gpuenv/lock.txt" in copies
    entry = [i["value"] for i in d.structure if i["instruction"] == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1]) == ["gpuenv"]
    users = [i["value"] for i in d.structure if i["instruction"] == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), f"{backend}: runs as root"
    assert d.labels.get("org.gpuenv.backend") == img.backend
    env = d.envs
    assert env.get("GPUENV_IMAGE") == backend
    if img.cuda:
        assert env.get("NVIDIA_REQUIRE_CUDA", "").startswith("cuda>=")
        assert "GPUENV_MIN_DRIVER" in env and env.get("GPUENV_REQUIRE_GPU") == "1"


def _names(reqs: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def _extra_requirements(extras: tuple[str, ...]) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = _names(project["dependencies"])
    todo = list(extras)
    while todo:
        for req in project["optional-dependencies"][todo.pop()]:
            if req.startswith("gpuenv["):
                todo += req[len("gpuenv[") : req.index("]")].split(",")
            else:
                names |= _names([req])
    return names


@pytest.mark.parametrize("backend", list(IMAGES))
def test_lock_files_cover_the_extras_they_claim_with_hashes(backend):
    img = IMAGES[backend]
    text = img.lock.read_text()
    assert f"pyproject extras {', '.join(img.extras) or '(none'}" in text.splitlines()[0]
    pinned = locked_versions(img)
    missing = _extra_requirements(img.extras) - set(pinned) - set(img.not_locked)
    assert not missing, f"{img.lock.name} lacks {sorted(missing)}: run `make locks`"
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    for block in blocks:
        if "==" in block:
            assert "--hash=sha256:" in block, f"{img.lock.name}: no hash for {block.splitlines()[0]}"
    if img.torch_cpu:
        assert pinned["torch"].endswith("+cpu")
    assert not set(img.not_locked) & set(pinned)  # left to the base image, never overwritten
    if img.cuda == "12" and "cuda12" in img.extras:
        assert "jax-cuda12-plugin" in pinned and pinned["jax-cuda12-plugin"] == pinned["jax"]


def test_bake_file_is_generated_from_the_image_table():
    committed = (ROOT / "docker" / "docker-bake.json").read_text()
    assert committed == bake_text(), "docker/docker-bake.json is stale: run `make locks`"
    targets = json.loads(committed)["target"]
    for backend, img in IMAGES.items():
        t = targets[backend]
        assert t["dockerfile"] == img.dockerfile
        assert t["labels"]["org.gpuenv.min-driver"] == (img.min_driver or "none (CPU image)")
        if img.cuda:
            assert t["args"]["CUDA_REQUIRE"] == f"{img.cuda}.0"
            assert t["args"]["MIN_DRIVER"] == img.min_driver
        for pkg, version in locked_versions(img).items():
            if f"org.gpuenv.version.{pkg}" in t["labels"]:
                assert t["labels"][f"org.gpuenv.version.{pkg}"] == version
    assert IMAGES["brax"].min_driver == CUDA_MIN_DRIVER["13"]  # CUDA 13: JAX and torch on one nvidia-* set


def test_workflow_lints_on_pull_requests_and_pushes_images_on_main_and_tags():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "images.yml").read_text())
    on = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as True
    assert "pull_request" in on and on["push"]["branches"] == ["main"] and on["push"]["tags"]
    assert "tests/test_containers.py" in wf["jobs"]["lint"]["steps"][-1]["run"]
    build = wf["jobs"]["build"]
    assert build["if"] == "github.event_name != 'pull_request'"
    assert set(build["strategy"]["matrix"]["image"]) == set(IMAGES)
    assert build["permissions"]["packages"] == "write"
    bake_step = next(s for s in build["steps"] if s.get("with", {}).get("files") == "docker/docker-bake.json")
    assert ".tags=${{ env.REGISTRY }}" in bake_step["with"]["set"]  # never the Docker Hub-looking local tag


# --- doctor and the image path ------------------------------------------------------------------


def fake_smi(tmp_path: Path, driver: str) -> dict:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!/bin/sh\necho 'NVIDIA H200, {driver}'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{smi.parent}:{os.environ['PATH']}"}


def no_gpu_env(tmp_path: Path) -> dict:
    """A PATH without nvidia-smi (whatever this machine has)."""
    keep = [p for p in os.environ["PATH"].split(":") if not (Path(p) / "nvidia-smi").exists()]
    return {"PATH": ":".join(keep)}


def test_doctor_without_gpu_is_one_clear_line_and_nonzero(cli, tmp_path):
    r = cli("doctor", env=no_gpu_env(tmp_path))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no NVIDIA GPU visible" in lines[0]
    # outside a container no Docker advice (the user may have no Docker); the driver the images need
    if not Path("/.dockerenv").exists():
        assert "--gpus all" not in lines[0] and "install its driver (>= 580.65.06 for the gpuenv GPU images)" in lines[0]
        assert "--cpu-ok" in lines[0]
    assert re.search(r"skip driver  no GPU: minimum for JAX/torch CUDA 1[23] wheels would be (525\.60\.13|580\.65\.06)", r.stdout)
    # the table says what was found, the error line once what to do: the fix is not printed twice
    assert "install its driver" not in r.stdout and r.stdout.count("no NVIDIA GPU visible") == 1
    inside = cli("doctor", env={**no_gpu_env(tmp_path), "GPUENV_IMAGE": "gymnasium"})
    assert inside.returncode == 2 and "--gpus all" in inside.stderr  # in a container: how to give it the GPU
    ok = cli("doctor", "--cpu-ok", env=no_gpu_env(tmp_path))
    assert ok.returncode == 0, ok.stderr
    assert "fine for the CPU backends" in ok.stdout


def test_doctor_names_the_driver_to_upgrade_to(cli, tmp_path):
    r = cli("doctor", env={**fake_smi(tmp_path, "470.82.01"), "GPUENV_IMAGE": "brax"})
    assert r.returncode == 2
    assert "driver 470.82.01 is older than 580.65.06, the minimum for image gpuenv/brax" in r.stderr
    assert "upgrade the host driver to >= 580.65.06" in r.stderr


def test_doctor_catches_jax_falling_back_to_cpu(cli, tmp_path):
    # A GPU is visible with a recent driver, but this JAX has no CUDA plugin: it runs on the CPU.
    jax = pytest.importorskip("jax", reason="needs jax installed (the check is about JAX)")
    if jax.default_backend() != "cpu":
        pytest.skip("this JAX runs on a GPU: the fallback cannot be shown here")
    r = cli("doctor", env={**fake_smi(tmp_path, "580.65.06"), "GPUENV_IMAGE": "isaaclab-isaacsim"})
    assert "ok   driver  driver 580.65.06 >= 535.129.03" in r.stdout
    assert r.returncode == 2 and "fell back to 'cpu' although a GPU is visible" in r.stderr


def test_bench_in_a_gpu_image_runs_doctor_first(cli, tmp_path):
    r = cli("bench", "--suite", "smoke", "--out", str(tmp_path), env={**no_gpu_env(tmp_path), "GPUENV_IMAGE": "mjx"})
    assert r.returncode == 2 and "no NVIDIA GPU visible" in r.stderr and "Traceback" not in r.stderr
    assert not list(tmp_path.iterdir())  # nothing measured, nothing written


def test_bench_image_without_docker_says_so_in_one_line(cli, tmp_path):
    # An engine that is not there, whether or not this machine runs one.
    no_engine = {"DOCKER_HOST": f"unix://{tmp_path}/no-such-docker.sock"}
    r = cli("bench-image", "brax", env=no_engine)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot run gpuenv/brax here" in lines[0] and "LOCAL=1 make bench-brax" in lines[0]
    assert cli("bench-image", "nosuch", env=no_engine).returncode == 2
    r = cli("images", "build", "gymnasium", env=no_engine)
    assert r.returncode == 2 and r.stderr.startswith("error: cannot build images here: no Docker engine reachable"), r.stderr


def test_images_table_shows_base_cuda_and_min_driver(cli):
    r = cli("images")
    assert r.returncode == 0
    assert "python:3.12-slim-bookworm" in r.stdout and "580.65.06" in r.stdout and "535.129.03" in r.stdout
    row = next(ln for ln in r.stdout.splitlines() if "gpuenv/isaaclab-isaacsim" in ln)
    assert "nvcr.io/nvidia/isaac" in row and "NOT VERIFIED" in row  # never built here: said where it is listed


def test_image_with_pinned_library_version_gets_its_own_lock_and_tag(cli):
    r = cli("images", "--build", "brax", "--pin", "brax==0.13.0", "--dry-run", timeout=300)
    assert r.returncode == 0, r.stderr
    lock = ROOT / "docker" / "locks" / "versions" / "brax@brax-0.13.0.txt"
    text = lock.read_text()
    assert "pinned brax==0.13.0" in text.splitlines()[0]
    assert re.search(r"^brax==0\.13\.0 \\\n\s+--hash=sha256:", text, re.M)
    assert "--build-arg LOCK=docker/locks/versions/brax@brax-0.13.0.txt" in r.stdout
    assert "--build-arg VERSION_SET=brax==0.13.0" in r.stdout and "-t gpuenv/brax:brax-0.13.0" in r.stdout
    bad = cli("images", "--build", "brax", "--pin", "brax>=0.13")
    assert bad.returncode == 2 and "write PACKAGE==VERSION" in bad.stderr


def test_a_gpu_image_without_a_gpu_refuses_in_one_line_naming_the_override(cli, tmp_path):
    """What `docker run gpuenv/brax bench` does on a machine without a GPU (the image's environment,
    without the image): one line, no traceback, and the one variable that overrides it."""
    env = {**no_gpu_env(tmp_path), "GPUENV_IMAGE": "brax", "GPUENV_REQUIRE_GPU": "1"}
    for args in (["bench", "--suite", "smoke", "--backend", "brax"], ["doctor"]):
        r = cli(*args, env=env)
        assert r.returncode == 2, r.stdout + r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stdout + r.stderr, r.stderr
        assert "no NVIDIA GPU visible" in lines[0] and "GPUENV_CPU_OK=1" in lines[0] and "GPUENV_REQUIRE_GPU=1" in lines[0]


def test_a_gpu_image_with_the_override_measures_on_the_cpu_and_says_so(cli, tmp_path):
    pytest.importorskip("brax", reason="needs brax (the cpu extra)")
    env = {**no_gpu_env(tmp_path), "GPUENV_IMAGE": "brax", "GPUENV_REQUIRE_GPU": "1", "GPUENV_CPU_OK": "1"}
    r = cli("bench", "--suite", "smoke", "--backend", "brax", "--out", str(tmp_path / "o"), env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    (rec,) = [load(p) for p in (tmp_path / "o").rglob("*.json")]
    assert rec["status"] == "ok" and rec["what"]["device"] == "cpu"
    assert rec["what"]["details"]["cpu_fallback"] == "GPUENV_CPU_OK=1: a GPU image run on the CPU"
    assert rec["where"]["env"]["GPUENV_CPU_OK"] == "1" and rec["where"]["env"]["GPUENV_REQUIRE_GPU"] == "1"


@pytest.mark.parametrize("backend", ["brax", "mjx"])
def test_gpu_image_locks_hold_one_cuda_stack_for_jax_and_torch(backend):
    """JAX's CUDA plugin and a CUDA torch in one environment: one set of nvidia-* wheels (one cuDNN
    that both were resolved against), never a CUDA 12 set beside a CUDA 13 one."""
    text = (ROOT / "docker" / "locks" / f"{backend}.txt").read_text()
    pins = dict(line.split(" ")[0].split("==") for line in text.splitlines() if "==" in line and not line.startswith((" ", "#")))
    assert pins["torch"] == "2.13.0" and pins["jax-cuda13-plugin"] == pins["jax"]
    assert not [p for p in pins if p.endswith("-cu12") or p.startswith("jax-cuda12")], "a CUDA 12 wheel beside CUDA 13"
    lines = text.split("nvidia-cudnn-cu13==", 1)[1].splitlines()[1:]
    via = " ".join(ln for ln in lines[: next(i for i, ln in enumerate(lines) if not ln.startswith(" "))] if "#" in ln)
    assert "jax-cuda13-plugin" in via and "torch" in via, via  # both resolved against the same cuDNN
    assert IMAGES[backend].torch_constraint == ["torch==2.13.0"] and IMAGES["envpool"].torch_constraint == ["torch==2.13.0+cpu"]


def test_a_build_docker_has_no_room_for_is_not_started_and_says_how_to_make_room(monkeypatch):
    """Each image's build is checked against the free space where Docker keeps images, before it
    starts (CI's disk once filled three builds in): the images before it are built and reported, the
    refused one is not started, and the command's one line names the need, the free space and the fix."""
    from gpuenv.cli.machine import build_images
    from gpuenv.errors import UserError
    b = importlib.import_module("gpuenv.images.build")  # the module (the package exports its function by that name)
    started: list[str] = []
    gb = {"envpool": 1.0, "brax": 100.0}
    monkeypatch.setattr(b, "docker_status", lambda gpu: None)
    monkeypatch.setattr(b, "build_client", lambda: "docker")
    monkeypatch.setattr(b, "base_image", lambda docker, pinned, python: (pinned, "pinned"))
    monkeypatch.setattr(b, "local_image_id", lambda ref, docker: None)
    monkeypatch.setattr(b, "docker_free", lambda docker: ("/var/lib/docker", int(12.5e9)))
    monkeypatch.setattr(b, "image_size", lambda docker, ref: int(2e9))
    monkeypatch.setattr(b, "get_image", lambda n: __import__("dataclasses").replace(IMAGES[n], build_gb=gb.get(n)))
    monkeypatch.setattr(b, "docker_build", lambda cmd, env: (started.append(cmd[cmd.index("-t") + 1]) or 0, ()))
    monkeypatch.setattr(b, "remove_replaced", lambda old, ref, docker: None)
    out = b.build(["envpool", "brax"], [], False, say=lambda line: None)
    assert [(x.name, x.returncode, x.refused is None) for x in out] == [("base", 0, True), ("envpool", 0, True), ("brax", 2, False)]
    assert started == [f"{BASE_TAG}", "gpuenv/envpool:latest"]  # brax never started
    assert out[-1].refused == ("building brax needs about 100 GB free where Docker keeps its images (/var/lib/docker), and 12.5 GB "
                               "is free there: make room (`docker system prune` removes unused images and build cache) and build again")
    # an image that is here already is rebuilt with REBUILD_GB free (its layers are mostly reused), not its whole figure
    monkeypatch.setattr(b, "local_image_id", lambda ref, docker: "sha256:x")
    assert [x.returncode for x in b.build(["brax"], [], False, say=lambda line: None)] == [0, 0]
    monkeypatch.setattr(b, "local_image_id", lambda ref, docker: None)
    import gpuenv.images as im

    monkeypatch.setattr(im, "build", b.build)
    with pytest.raises(UserError, match=r"^building brax needs about 100 GB free"):
        build_images(["brax"], [], False)


def test_a_failed_build_ends_with_its_own_last_lines_and_names_its_cause(monkeypatch, capsys, tmp_path):
    """A failed `docker build` among several images (CI's log, a test's assertion holding the last 4000
    characters) ends with that build's last lines and a one-line error naming the line its failing step
    printed last: CI once failed with only BuildKit's summary, the cause pages above."""
    import gpuenv.images as im
    from gpuenv.cli.machine import build_images
    from gpuenv.errors import UserError
    b = importlib.import_module("gpuenv.images.build")
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\n" + "".join(f"echo '#5 0.{i} noise {i}'\n" for i in range(40))
                    + "echo '#5 3.2 E: Failed to fetch http://deb.debian.org/x.deb  Connection reset'\n"
                    + "echo '#5 ERROR: executor failed running [/bin/sh -c apt-get ...]: exit code: 100'\n"
                    + "echo '------'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(b, "docker_status", lambda gpu: None)
    monkeypatch.setattr(b, "build_client", lambda: str(fake))
    monkeypatch.setattr(b, "base_image", lambda docker, pinned, python: (pinned, "pinned"))
    monkeypatch.setattr(b, "local_image_id", lambda ref, docker: "sha256:x")
    monkeypatch.setattr(im, "build", b.build)
    with pytest.raises(UserError) as e:
        build_images(["gymnasium"], [], False)
    assert str(e.value) == ("building base failed (docker build exited 1): "
                            "#5 3.2 E: Failed to fetch http://deb.debian.org/x.deb  Connection reset")
    out = capsys.readouterr().out
    summary = out[out.index("the last 30 lines of base's build:"):]
    assert "#5 0.39 noise 39" in summary and "#5 0.10 noise 10" not in summary and summary.rstrip().endswith("------")
    assert out.count("#5 0.0 noise 0") == 1  # streamed as it came, once


def test_a_rebuild_removes_the_image_it_replaced_unless_something_holds_it(monkeypatch):
    """Every rebuild of gpuenv/<b>:latest left its predecessor untagged, and CI's builds, session after
    session, filled the machine's disk (44 GB of them here; CI's ocean build then failed): the replaced
    image is removed after a successful build, never forced (another tag or a container keeps it)."""
    import subprocess as sp

    from gpuenv.images import engine

    calls: list[list[str]] = []
    ids = {"gpuenv/x:latest": "sha256:new"}
    held = {"sha256:held"}

    def run(cmd):
        calls.append(cmd)
        if cmd[1:3] == ["image", "inspect"]:
            return sp.CompletedProcess(cmd, 0, ids.get(cmd[-1], "") + "\n", "")
        return sp.CompletedProcess(cmd, 1 if cmd[-1] in held else 0, "", "")

    monkeypatch.setattr(engine, "_run", run)
    assert engine.remove_replaced("sha256:old", "gpuenv/x:latest") == "sha256:old"
    assert calls[-1] == ["docker", "image", "rm", "sha256:old"]  # no -f
    assert engine.remove_replaced("sha256:held", "gpuenv/x:latest") is None  # the engine kept it
    n = len(calls)
    assert engine.remove_replaced("sha256:new", "gpuenv/x:latest") is None and calls[n:] == [calls[n]]  # unchanged: nothing removed
    assert engine.remove_replaced(None, "gpuenv/x:latest") is None

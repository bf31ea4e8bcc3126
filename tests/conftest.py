from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "plugins"

# The test-only backend is a plug-in registered here, never in gpuenv's own tables: this process and
# every worker process it starts (they inherit the environment) find it by name.
os.environ["GPUENV_PLUGINS"] = ",".join(filter(None, [os.environ.get("GPUENV_PLUGINS", ""), "gpuenv_fake"]))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGINS), os.environ.get("PYTHONPATH", "")]))
sys.path.insert(0, str(PLUGINS))


# The GPU images' tests build about 9 GB per image: `make test-images-gpu` runs them (CI does, after
# `make test`); plain pytest does not collect them.
collect_ignore = [] if os.environ.get("GPUENV_TEST_GPU_IMAGES") == "1" else ["gpu_images"]


def run_cli(*args: str, timeout: float = 600, env: dict | None = None, cwd: Path | None = None):
    """Run `python -m gpuenv ARGS` as a user would; returns CompletedProcess (text)."""
    return subprocess.run(
        [sys.executable, "-m", "gpuenv", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd or ROOT,
    )


@pytest.fixture
def cli():
    return run_cli


def write_suite(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


# A fake-backend suite of one [[matrix]] on cartpole, for tests that need a quick real run.
FAST = """
[measure]
processes = 1
values = 1
warmups = 0
min_time_s = 0.01
chunk_steps = 5
timeout_s = {timeout}
"""


def fake_suite(path: Path, backends: str = '"fake:ok"', num_envs: str = "[1]", timeout: int = 60, extra: str = "",
               task: str = "cartpole", matrix_extra: str = "") -> Path:
    return write_suite(path, FAST.format(timeout=timeout) + extra + f"""
[[matrix]]
backends = [{backends}]
tasks = ["{task}"]
num_envs = {num_envs}
""" + matrix_extra)


def build_images(names: tuple[str, ...], timeout: float = 3600) -> dict[str, str]:
    """`gpuenv images build NAMES` for real; the image id of each gpuenv/<name>:latest."""
    r = run_cli("images", "build", *names, timeout=timeout)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    ids = {}
    for b in names:
        out = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", f"gpuenv/{b}:latest"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        ids[b] = out.stdout.strip()
    return ids

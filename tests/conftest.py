from __future__ import annotations

import os
import re
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


# The GPU images' tests build about 9 GB per image: `make test-images-gpu` runs them, and CI's
# `make test` with GPUENV_TEST_GPU_IMAGES=1; plain pytest does not collect them.
collect_ignore = [] if os.environ.get("GPUENV_TEST_GPU_IMAGES") == "1" else ["gpu_images"]

# `make test` runs the tests in two pytest-xdist workers (the 2-core machines spend much of a test
# waiting: on docker builds, subprocesses, sockets). Test files that share something outside their
# tmp_path run in one worker, one after another:
#   machine   the Docker engine and its images (gpuenv/<name>:latest), and every test that counts the
#             machine's Godot servers (a container's Godot is one of them)
#   isaaclab  Isaac Lab's environment (built once into the shared cache), its assets and kernel cache
#   slurm     the one-node Slurm cluster of tools/slurm-local.sh
# Every other test goes to whichever worker is free. No test compares two timings of this machine (a
# busy neighbour would decide it): speed is measured by benchmarks, never asserted here (issue 48).
XDIST_GROUPS = {
    "test_gpu_images.py": "machine",
    "test_images_real.py": "machine",
    "test_godot.py": "machine",
    "test_godot4.py": "machine",
    "test_profile_godot.py": "machine",
    "test_isaaclab.py": "isaaclab",
    "test_dispatch.py": "slurm",
}


@pytest.hookimpl(optionalhook=True)  # a plain pytest run (no xdist) has no such hook
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling with the groups above as scopes (each other test its own scope).
    (xdist's own `xdist_group` marker does nothing under pytest 9: it renames a node id pytest no
    longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return XDIST_GROUPS.get(nodeid.split("::", 1)[0].rsplit("/", 1)[-1]) or nodeid

    return Groups(config, log)


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


# The head of a one-seed time-to-reward suite for the tests' tiny trainings: its cases follow.
TINY_TTR = """
kind = "time-to-reward"
[run]
seeds = 1
pass_min_seeds = 1
timeout_s = 600
"""


def served_training(cli, tmp_path: Path, name: str, *bench: str, status: str = "censored") -> tuple[dict, dict]:
    """One seed of the shared trainer on a backend served from its own environment, through `gpuenv bench
    BENCH...`: (record, its run), after what every served record must say; `status` is the run's, and a
    censored run's bench exits 1 (its threshold missed). Skips, saying why, where the environment cannot
    be built here."""
    import json

    import pytest

    r = cli("bench", *bench, "--out", str(tmp_path / "out"), timeout=1200)
    if any(f"could not {w}" in r.stderr for w in ("create the venv", "install the lock")) or (
            "could not run its build step" in r.stderr and "URLError" in r.stderr):
        pytest.skip(f"{name}'s environment could not be built here (no package index): {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == (1 if status == "censored" else 0) and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    (rec,) = (json.loads(p.read_text()) for p in (tmp_path / "out").glob("*/*.json"))
    assert rec["status"] == "ok", rec["failure"]
    (run,) = rec["runs"]
    assert run["status"] == status and run["details"]["env_process"].startswith("served")
    assert run["details"]["trainer"] == "stable_baselines3.PPO" and rec["where"]["packages"]["stable-baselines3"]
    assert rec["where"]["environment"]["name"] == name
    assert "served to the trainer in the main install" in rec["where"]["environment"]["served"]
    return rec, run


def own_python(name: str) -> str:
    """The interpreter of backend `name`'s own environment, built on first use; skips, saying why, where
    it cannot be built here (no package index)."""
    from gpuenv.backends.served import interpreter
    from gpuenv.errors import UserError
    from gpuenv.registry import default_registry

    try:
        return interpreter(default_registry().get(name))
    except UserError as e:
        if "could not create the venv" in str(e) or "could not install the lock" in str(e):
            pytest.skip(f"{name}'s environment could not be built here: {e}")
        raise


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


@pytest.fixture
def tmpfs(tmp_path):
    """mount(name, options) -> a tmpfs at tmp_path/name (a small disk, a read-only one): needs root,
    as CI has (.ci/run runs as root); elsewhere the test skips and says so. Unmounted afterwards."""
    mounted: list[Path] = []

    def mount(name: str, options: str) -> Path:
        mnt = tmp_path / name
        mnt.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs ({options}) here ({r.stderr.strip() or 'not root'}); CI runs as root")
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in mounted:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


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


def godot_processes() -> set[int]:
    """Live Godot processes of either engine: godot3-server by name, Godot 4 by the binary in its
    command line (the godot4 launcher execs sid's loader, whose name the process takes)."""
    import psutil

    out = set()
    for p in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if "godot" in (p.info["name"] or "") or any(a.endswith("/usr/bin/godot") for a in p.info["cmdline"] or []):
                out.add(p.pid)
        except psutil.Error:
            continue
    return out


def kill_gpuenv_mid_case(tmp_path: Path, backend: str) -> tuple[set[int], set[int]]:
    """Start `gpuenv bench` on BACKEND at 32 envs (two Godot processes), kill -9 gpuenv once both run;
    (the Godot processes it started, those of them still alive 10 s later)."""
    import time

    suite = write_suite(tmp_path / "g.toml", f"""
[measure]
processes = 1
values = 50
warmups = 1
min_time_s = 2.0
chunk_steps = 10
timeout_s = 600
[[matrix]]
backends = ["{backend}"]
tasks = ["ballchase"]
num_envs = [32]
""")
    before = godot_processes()
    with open(tmp_path / "log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gpuenv", "bench", "--suite", str(suite), "--out", str(tmp_path / "out")],
                                cwd=ROOT, stdout=log, stderr=log)
        deadline = time.time() + 120
        while len(godot_processes() - before) < 2 and time.time() < deadline:
            time.sleep(0.1)
        started = godot_processes() - before
        proc.kill()
        proc.wait(timeout=30)
    assert len(started) == 2, (tmp_path / "log").read_text()
    deadline = time.time() + 30  # gone soon after gpuenv (the case's timeout is far longer); a busy VM tears down slower
    while godot_processes() & started and time.time() < deadline:
        time.sleep(0.1)
    return started, godot_processes() & started


# --- what `gpuenv profile` prints, read back (tests/test_profile.py, test_profile_godot.py): the decisions it
# names are checked against the figures it printed beside them, which hold at any speed of this machine


def _median(cell: str) -> float | None:
    m = re.match(r"\s*([\d,.]+)(k|M)? \(", cell)
    return None if m is None else float(m.group(1).replace(",", "")) * {"k": 1e3, "M": 1e6, "B": 1e9, None: 1}[m.group(2)]


def printed_table(stdout: str) -> dict[tuple[str, int], float]:
    """The sweep's table as printed: (vectoriser, num_envs) -> median env steps/s."""
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(("vectoriser", "pacing")))
    sizes = [int(c.split()[0]) for c in lines[head].split(" | ")[1:]]
    out = {}
    for line in lines[head + 1:]:
        if " | " not in line:
            break
        name, *cells = line.split(" | ")
        for n, cell in zip(sizes, cells, strict=True):
            if _median(cell) is not None:
                out[(name.strip(), n)] = _median(cell)
    return out


def named_best_is_the_fastest_printed(stdout: str, said: str) -> tuple[str, int]:
    table = printed_table(stdout)
    best = said.split("best setting: ")[1].split(" env steps/s")[0]
    variant, n = best.split(" at ")[0], int(best.split(" at ")[1].split(" envs")[0])
    assert table[(variant, n)] == max(table.values()), (best, table)
    return variant, n


def named_bottleneck_is_the_largest_share(said: str) -> dict[str, float]:
    shares = said.split("where a PPO iteration's time goes")[1].split("bottleneck:")[0]
    from gpuenv.profile import PARTS

    us = {part: float(re.search(re.escape(part) + r" \d+% \(([\d,.]+) us\)", shares).group(1).replace(",", "")) for part in PARTS}
    assert said.split("bottleneck: ")[1].startswith(max(us, key=us.__getitem__)), said
    return us

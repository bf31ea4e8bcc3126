"""Backends are plug-ins: a complete backend declared in one module outside gpuenv runs through both
modes; no module outside the backends and the registry names a backend; the read-only commands run
clean over the published records."""

from __future__ import annotations

import os
import re

from conftest import PLUGINS, ROOT, run_cli, write_suite

from gpuenv.results import schema

MYBACKEND = '''
"""A complete third-party backend in one module: declaration, adapter and native trainer."""

import numpy as np

from gpuenv.backends.base import ActionSpace, StepperFacts
from gpuenv.backends.spec import Backend, NativeTask, Trainer

BACKEND = Backend(
    name="mine",
    adapter="mybackend",
    requires=("numpy",),
    extra="mine",
    variants=("plain",),
    description="a plug-in backend declared outside gpuenv",
    tasks={"cartpole": NativeTask("mine-cartpole", 0.02, 1, 0.02, 500, (4,), "discrete", 2, max_return=500.0)},
    trainers=(Trainer("mine_ppo", "the plug-in's native trainer", frozenset({"reach_at_eval"}), "mybackend:train"),),
)


class Stepper:
    def __init__(self, case, native):
        self.case = case
        self.facts = StepperFacts(
            native_env_id=native.env_id,
            obs_shape=native.obs_shape,
            action_space=ActionSpace("discrete", n=native.action_size),
            reset_mode="none (mine)",
            details={"variant": case.variant},
        )
        self.state = np.zeros((case.num_envs, 4))

    def load_actions(self, pool):
        self.pool = pool

    def run(self, loops):
        for _ in range(loops * self.case.chunk_steps):
            self.state += 0.01

    def sync(self):
        pass

    def close(self):
        pass


def open(case, native):  # noqa: A001 - the adapter contract
    return Stepper(case, native)


def train(case, prog):
    prog.phase("import", prog.clock())
    k, steps = 0, 0
    while steps < case.max_env_steps:
        steps += case.eval_every_steps
        k += 1
        value = case.threshold if k >= case.hyperparams.get("reach_at_eval", 1) else 0.0
        t = prog.clock()
        if not prog.record(steps, value, t, 0.0):
            break
    return {"trainer": "mine_ppo"}
'''

THROUGHPUT = """
kind = "throughput"
[measure]
processes = 1
values = 2
warmups = 0
min_time_s = 0.01
chunk_steps = 5
timeout_s = 120
[[matrix]]
backends = ["mine"]
tasks = ["cartpole"]
num_envs = [2]
"""

TTR = """
kind = "time-to-reward"
[run]
seeds = 1
pass_min_seeds = 1
timeout_s = 120

[[case]]
task = "cartpole"
backends = ["mine:plain"]
trainer = "mine_ppo"
num_envs = 2
threshold = 100.0
max_env_steps = 400
max_time_s = 60
eval_every_steps = 100
eval_episodes = 1
[case.hyperparams]
reach_at_eval = 2
"""


def test_a_backend_declared_in_one_outside_module_runs_in_both_modes(tmp_path):
    (tmp_path / "mybackend.py").write_text(MYBACKEND)
    env = {
        "GPUENV_PLUGINS": "gpuenv_fake,mybackend",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PLUGINS), os.environ.get("PYTHONPATH", "")]),
    }
    for name, body in (("tp", THROUGHPUT), ("ttr", TTR)):
        suite = write_suite(tmp_path / f"{name}.toml", body)
        out = tmp_path / f"out-{name}"
        r = run_cli("bench", "--suite", str(suite), "--out", str(out), env=env, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        records = [schema.load(p) for p in out.rglob("*.json")]
        assert len(records) == 1, (name, r.stdout)
        (rec,) = records
        assert rec["case"]["backend"] == "mine" and rec["status"] == "ok", rec.get("failure")
        assert re.fullmatch(r"[0-9a-f]{16}", rec["workload_id"]) and rec["workload_id"] != "0" * 16
    r = run_cli("list", "backends", env=env)
    assert r.returncode == 0, r.stderr
    line = next((ln for ln in r.stdout.splitlines() if " mine " in f" {ln} "), "")
    assert "mine" in line and "main install" in line, r.stdout


BACKEND_LITERAL = re.compile(r"""["'](envpool|brax|gymnasium|mjx|isaaclab|godot)["':]""")


def test_no_module_outside_the_backends_and_the_registry_names_a_backend():
    src = ROOT / "src" / "gpuenv"
    hits = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        if rel.parts[0] == "backends" or rel.as_posix() == "registry.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if BACKEND_LITERAL.search(line):
                hits.append(f"src/gpuenv/{rel}:{n}: {line.strip()}")
    assert not hits, "backend names outside src/gpuenv/backends and registry.py:\n" + "\n".join(hits)


MODE_LITERAL = re.compile(r"""["'](env-step-throughput|time-to-reward)["']""")


def test_no_module_outside_the_modes_names_a_measurement_mode():
    """Readers ask the mode (step_rate, training_rates, headline, phase_rows ...), never its name."""
    src = ROOT / "src" / "gpuenv"
    hits = [f"src/gpuenv/{path.relative_to(src)}:{n}: {line.strip()}"
            for path in sorted(src.rglob("*.py")) if path.relative_to(src).parts[0] != "modes" and path.name != "mode_table.py"
            for n, line in enumerate(path.read_text().splitlines(), 1) if MODE_LITERAL.search(line)]
    assert not hits, "measurement modes named outside src/gpuenv/modes and the mode table:\n" + "\n".join(hits)


RECORD_KEY = re.compile(r"""(\[["'](case|summary|where|status|what|settings|processes|runs|run_id|case_key|measurement_mode|"""
                        r"""workload_id|created_utc|failure|machine|packages|git|tags)["']\]|\.get\(["'](case|summary|where|"""
                        r"""status|what|settings|processes|runs|failure|machine|packages|git|tags)["'])""")
READERS = ("history", "report", "claims", "cli", "decide.py", "dispatch/track.py")


def test_readers_take_typed_records_not_dicts():
    """The readers get validated records (gpuenv.results.schema.Record, their mode's model) and read
    fields; a string key into a record would bypass the model (and mypy). What they need of a mode's
    own results they ask the mode. The test sees itself fail on a planted line."""
    src = ROOT / "src" / "gpuenv"
    files = [p for name in READERS for p in ((src / name).rglob("*.py") if (src / name).is_dir() else [src / name])]
    assert len(files) > 20
    hits = [f"{path.relative_to(src)}:{n}: {line.strip()}" for path in files
            for n, line in enumerate(path.read_text().splitlines(), 1) if RECORD_KEY.search(line)]
    # no records there: `gpuenv info` prints the provenance it measures; export-gab converts pytest-benchmark's JSON
    hits = [h for h in hits if not h.startswith(("cli/machine.py", "history/gab.py"))]
    assert not hits, "readers index record dicts:\n" + "\n".join(hits)
    assert RECORD_KEY.search('rate = r["summary"]["env_steps_per_s"]') and RECORD_KEY.search("r.get('status')")


def test_read_only_commands_over_the_published_records_run_clean(tmp_path):
    published = str(ROOT / "results" / "published")
    commands = [
        ("show", published),
        ("compare", published, published),
        ("report", published, "--out", str(tmp_path / "site")),
        ("regressions", published),
        ("asv-import", published, "--results-dir", str(tmp_path / "asv")),
    ]
    for args in commands:
        r = run_cli(*args, timeout=600, cwd=ROOT)
        assert "Traceback" not in r.stderr, (args, r.stderr)
        assert "skipped" not in r.stderr.lower(), (args, r.stderr)
        assert r.returncode == 0, (args, r.stdout[-2000:] + r.stderr)


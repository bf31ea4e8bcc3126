"""The CLI as a user meets it: bad input is one line, exit code 2, no traceback."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT, fake_suite, write_suite

from gpuenv.backends.spec import Backend, NativeTask
from gpuenv.registry import Registry
from gpuenv.results.schema import load


@pytest.mark.parametrize(
    "args, message",
    [
        (["bench", "--backend", "nope"], "unknown backend 'nope'"),
        (["bench", "--task", "chess"], "unknown task 'chess'"),
        (["bench", "--suite", "nope"], "unknown suite 'nope'"),
        (["bench", "--num-envs", "0"], "--num-envs must be >= 1"),
        (["bench", "--num-envs", "many"], "Invalid value for '--num-envs'"),
        (["bench", "--frobnicate"], "No such option: --frobnicate"),
        (["bench", "-b", "brax", "-t", "pong"], "task 'pong' is not offered by backend 'brax'"),
        (["bench", "-b", "envpool:turbo"], "unknown variant 'turbo'"),
        (["bench", "-b", "fake:ok", "--out", "/proc/gpuenv-not-writable"], "cannot write results to /proc"),
        (["list", "gizmos"], "unknown list 'gizmos'"),
        (["show", "/nonexistent.json"], "no such file or directory"),
    ],
)
def test_bad_input_is_one_clear_line(cli, args, message):
    r = cli(*args, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and message in lines[0]
    assert "Traceback" not in r.stdout + r.stderr


def test_typo_in_suite_file_names_file_and_key(cli, tmp_path):
    s = write_suite(tmp_path / "typo.toml", "[[matrix]]\nbackend = ['envpool']\ntasks=['cartpole']\nnum_envs=[1]\n")
    r = cli("bench", "--suite", str(s))
    assert r.returncode == 2
    assert "typo.toml" in r.stderr and "unknown key 'backend'" in r.stderr


def test_missing_optional_dependency(monkeypatch, capsys, tmp_path):
    from gpuenv import cli
    from gpuenv.run import plan

    cartpole = NativeTask("Ghost-v0", 0.02, 1, 0.02, 500, (4,), "discrete", 2)
    ghost = Backend("ghost", "gpuenv_no_such_module.adapter", ("gpuenv_no_such_module",), "ghost", ("ok",), "absent",
                    tasks={"cartpole": cartpole})
    reg = Registry.of([ghost])
    monkeypatch.setattr(plan, "default_registry", lambda: reg)
    s = write_suite(tmp_path / "g.toml", "[[matrix]]\nbackends=['ghost']\ntasks=['cartpole']\nnum_envs=[1]\n")
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--suite", str(s), "--backend", "ghost"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "ghost is not installed" in err and "pip install 'gpuenv[ghost]'" in err


def test_show_refuses_unknown_schema_version(cli, tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"schema": "gpuenv.result", "schema_version": 99}))
    r = cli("show", str(p))
    assert r.returncode == 2
    assert "schema version 99 is not supported" in r.stderr


def test_listing_imports_no_backend_library():
    import subprocess

    code = (
        "import sys; from gpuenv.cli import main\n"
        "try:\n    main(['list'])\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in ('jax', 'torch', 'envpool', 'brax', 'mujoco', 'gymnasium', 'stable_baselines3') if m in sys.modules]\n"
        "print('IMPORTED', bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "IMPORTED []" in out
    assert "gymnasium" in out and "cartpole" in out and "quick" in out
    assert "environment" in out  # which Python environment each backend's workers use
    assert "isaacgym" in out and "obtainable" in out and "GPUENV_PLUGINS" in out  # said, not silent (Isaac Gym, legacy)
    assert "│ own " not in out  # the profile's backend is hidden


def test_bench_end_to_end_with_fake_backend(cli, tmp_path):
    s = write_suite(
        tmp_path / "f.toml",
        "[measure]\nmin_time_s=0.01\nvalues=2\nchunk_steps=5\n"
        "[[matrix]]\nbackends=['fake:ok','fake:raise']\ntasks=['cartpole']\nnum_envs=[1,4]\n",
    )
    r = cli("bench", "--suite", str(s), "--out", str(tmp_path / "o"))
    assert r.returncode == 1  # some cases failed: recorded, reported, and the exit code says so
    assert "fake:ok" in r.stdout and "4 records written to" in r.stdout
    assert "RuntimeError: fake backend failed on purpose" in r.stdout
    assert "crashed" in r.stdout  # the failure kind is shown
    run_dir = next((tmp_path / "o").iterdir())
    assert len(list(run_dir.glob("*.json"))) == 4
    shown = cli("show", str(run_dir))
    assert shown.returncode == 0 and "fake:ok" in shown.stdout


def test_show_markdown(cli, tmp_path):
    s = write_suite(
        tmp_path / "m.toml",
        "[measure]\nmin_time_s=0.01\nvalues=2\nchunk_steps=5\n[[matrix]]\nbackends=['fake:ok']\ntasks=['cartpole']\nnum_envs=[1,4]\n",
    )
    assert cli("bench", "--suite", str(s), "--out", str(tmp_path / "o")).returncode == 0
    r = cli("show", "--markdown", str(tmp_path / "o"))
    assert r.returncode == 0
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("**machine [1] ") and lines[1].startswith("run ")  # the heading names machine and run
    head = lines.index("| task | backend | 1 envs | 4 envs |")
    assert lines[head + 2].startswith("| cartpole | fake:ok | ") and lines[head + 2].count("(") == 2


def test_version_and_short_help_as_other_tools_have_them(cli):
    from gpuenv import __version__

    v = cli("--version")
    assert v.returncode == 0 and v.stdout.startswith(f"gpuenv {__version__}") and not v.stderr, v.stdout + v.stderr
    assert cli("-V").stdout == v.stdout
    for args in (["-h"], ["show", "-h"], ["bench", "-h"]):
        r = cli(*args)
        assert r.returncode == 0 and "Usage: gpuenv" in r.stdout and "--help" in r.stdout, (args, r.stderr)


def test_every_option_of_every_command_says_what_it_does():
    import typer

    from gpuenv.cli import app

    root = typer.main.get_command(app)
    missing = [f"{name} {p.opts[0]}" for name, cmd in root.commands.items() if not cmd.hidden  # type: ignore[attr-defined]
               for p in cmd.params if getattr(p, "param_type_name", "") == "option" and not (p.help or "").strip()]
    assert not missing, missing
    dispatch_opts = {o for p in root.commands["dispatch"].params for o in p.opts}  # type: ignore[attr-defined]
    assert {"--time-limit-min", "--time-min"} <= dispatch_opts  # a limit, not a minimum; the old spelling kept


def test_no_flag_shows_a_value_hint_in_any_commands_help():
    """A flag takes no value: typer's `<bool>` after it read as if it did (issue 29)."""
    import typer
    from typer.testing import CliRunner

    from gpuenv.cli import app

    root = typer.main.get_command(app)
    names = [n for n, c in root.commands.items() if not c.hidden]  # type: ignore[attr-defined]
    assert "bench" in names and "images" in names
    for args in ([], *([n] for n in names)):
        r = CliRunner().invoke(app, [*args, "--help"], terminal_width=200)
        assert r.exit_code == 0, (args, r.output)
        assert "--help" in r.output and "<bool>" not in r.output, (args, r.output)
    assert "<int>" in CliRunner().invoke(app, ["bench", "--help"], terminal_width=200).output  # options with values keep theirs
    # one way to build an image is shown (`images build NAME`); the old `--build NAME` still works, unlisted
    assert "--build" not in CliRunner().invoke(app, ["images", "--help"], terminal_width=200).output


def test_bench_takes_pyperfs_measurement_options_and_a_dry_run(cli, tmp_path):
    """`--processes/-p`, `--values`, `--warmups/-w` and `--min-time` replace the suite's settings in
    what runs and in the records; `--dry-run` shows the cases and how each would be measured and
    writes nothing; a setting the suite's kind has no use for, or out of range, is one line."""
    suite = fake_suite(tmp_path / "s.toml")
    out = tmp_path / "out"
    r = cli("bench", "--suite", str(suite), "--out", str(out), "-p", "2", "--values", "4", "-w", "0", "--min-time", "0.02", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "1 cases (2 processes each)" in r.stdout and "fake-ok-cartpole-n1: 2 processes x 4 values of at least 0.02 s, 0 warmup(s)" in r.stdout
    assert "nothing run, nothing written" in r.stdout and not out.exists()
    r = cli("bench", "--suite", str(suite), "--out", str(out), "-p", "2", "--values", "4", "-w", "0", "--min-time", "0.02")
    assert r.returncode == 0, r.stderr
    (rec,) = [load(p) for p in out.rglob("*.json")]
    assert {k: rec["settings"][k] for k in ("processes", "values", "warmups", "min_time_s")} == \
        {"processes": 2, "values": 4, "warmups": 0, "min_time_s": 0.02}
    assert len(rec["processes"]) == 2 and all(len(p["value_s"]) == 4 for p in rec["processes"])
    for args, says in ((["--values", "0"], "error: --values 0: processes, values and chunk_steps must be >= 1"),
                       (["--min-time", "inf"], "error: --min-time inf: min_time_s and timeout_s must be finite"),
                       (["-p", "500"], "error: --processes 500: processes = 500 is more than gpuenv runs")):
        r = cli("bench", "--suite", str(suite), "--out", str(out), *args, "--dry-run")
        assert r.returncode == 2 and r.stderr.startswith(says) and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cli("bench", "--suite", "ppo-smoke", "--values", "3", "--dry-run")
    assert r.returncode == 2 and "a time-to-reward suite's processes are its seeds" in r.stderr
    r = cli("bench", "--suite", "ppo-smoke", "-p", "1", "--dry-run", "-b", "gymnasium")
    assert r.returncode == 0 and "(1 seeds each)" in r.stdout and ": 1 seeds (1 must reach 475)" in r.stdout, r.stdout + r.stderr


def test_show_gives_one_section_per_machine_and_run_headed_by_what_it_ran_on(cli):
    """Two published runs of two machines: each run's tables under its own heading (machine, run,
    suite, date, commit, library versions), never one table; the bottleneck is a short label unless
    --details; --json and --markdown carry the same sections (issue 29)."""
    amd, intel = (str(ROOT / "results" / "published" / r) for r in ("20261203T082708Z-d39d04", "20261204T044354Z-a4d521"))
    r = cli("show", intel, amd)
    assert r.returncode == 0, r.stderr
    heads = [ln for ln in r.stdout.splitlines() if ln.startswith("machine [")]
    assert len(heads) == 2 and "AMD EPYC (2 cores), no GPU, reference speed" in heads[0] and "Intel(R) Xeon(R)" in heads[1], heads
    runs = [ln for ln in r.stdout.splitlines() if ln.startswith("run ")]
    assert runs[0].startswith("run 20261203T082708Z-d39d04: suite throughput, 9 record(s), 2026-12-03")
    assert runs[1].startswith("run 20261204T044354Z-a4d521: suite quick, 6 record(s), 2026-12-04 04:44 to 04:45 UTC, commit 374d0ba00e")
    assert "envpool 1.2.5" in r.stdout.replace("\n", " ")
    # each run's tables come after its own heading: the Intel run's 8-env cartpole rows never sit under the AMD heading
    assert r.stdout.index("107.9k") > r.stdout.index("run 20261204T044354Z-a4d521")
    assert "│ round trip │" in r.stdout and "round trip: driver" not in r.stdout
    assert "round trip: driver" in cli("show", intel, "--details").stdout  # the whole line, with its core counts
    doc = json.loads(cli("show", intel, amd, "--json").stdout)
    assert [m["machine"].split(" (")[0] for m in doc["machines"]] == ["AMD EPYC", "Intel(R) Xeon(R) Processor"]
    run = doc["machines"][1]["runs"][0]
    assert run["run_id"] == "20261204T044354Z-a4d521" and run["versions"]["envpool"] == "1.2.5" and len(run["records"]) == 6
    row = next(x for x in run["records"] if x["case_key"] == "envpool-async-cartpole-n8")
    assert row["unit"] == "env steps/s" and row["ci_low"] < row["value"] < row["ci_high"] and round(row["value"], -2) == 107900
    md = cli("show", intel, amd, "--markdown").stdout
    assert md.count("**machine [") == 2 and "| cartpole | envpool:async | 107.9k (104.5k-115.8k) |" in md


def test_a_named_machine_is_named_in_its_records_and_wherever_its_numbers_are_shown(cli, tmp_path):
    suite = fake_suite(tmp_path / "s.toml")
    out = tmp_path / "out"
    assert cli("bench", "--suite", str(suite), "--out", str(out), "--machine-name", "lab box 1").returncode == 0
    assert cli("bench", "--suite", str(suite), "--out", str(out), env={"GPUENV_MACHINE_NAME": "lab box 2"}).returncode == 0
    recs = sorted((load(p) for p in out.rglob("*.json")), key=lambda r: r["where"]["machine"]["name"])
    assert [r["where"]["machine"]["name"] for r in recs] == ["lab box 1", "lab box 2"]
    # two names are two machines, each heading says its name first
    r = cli("show", str(out))
    heads = sorted(ln for ln in r.stdout.splitlines() if ln.startswith("machine ["))
    assert [h.split("] ", 1)[1].split(":")[0] for h in heads] == ["lab box 1", "lab box 2"], r.stdout
    assert "lab box 1" in cli("info", env={"GPUENV_MACHINE_NAME": "lab box 1"}).stdout
    bad = cli("bench", "--suite", str(suite), "--out", str(out), "--machine-name", "a\x1b[31mred", "--dry-run")
    assert bad.returncode == 2 and bad.stderr.startswith("error: machine name") and "--machine-name 'lab-h200-1'" in bad.stderr


def test_compare_names_each_sides_runs_dates_and_machine(cli):
    old, new = (str(ROOT / "results" / "published" / r) for r in ("20261203T143723Z-eb9175", "20261203T151540Z-c0c44f"))
    r = cli("compare", old, new)
    lines = r.stdout.replace("\n", " ")
    assert "OLD: run 20261203T143723Z-eb9175 (2026-12-03 14:39 to 14:48 UTC) on Intel(R) Xeon(R) Processor (2 cores), no GPU" in lines
    assert "NEW: run 20261203T151540Z-c0c44f (2026-12-03 15:16 to 15:21 UTC) on Intel(R) Xeon(R)" in lines
    doc = json.loads(cli("compare", old, new, "--json").stdout)
    assert doc["old"].startswith("run 20261203T143723Z-eb9175 (") and doc["new"].startswith("run 20261203T151540Z-c0c44f (")

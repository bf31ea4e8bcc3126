"""Fault injection, for real: a killed gpuenv, a full disk, hostile record files through every reader,
script in a record's values through the report (in headless Chromium), options smuggled into sweep
specs, bad suite values, and the machine-speed fingerprint. Each asserts what the README's
"Guarantees" section promises: no traceback, the documented exit code, no finished record lost or
altered, no process left behind."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FAST, ROOT, fake_suite, write_suite

from gpuenv.errors import UserError
from gpuenv.measure import fingerprint
from gpuenv.results.models import Fingerprint
from gpuenv.results.schema import MAX_RECORD_BYTES, load, typed, validate


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for its parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gone(pids: list[int], within_s: float) -> bool:
    deadline = time.time() + within_s
    while time.time() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def no_traceback(*texts: str) -> None:
    for t in texts:
        assert "Traceback" not in t, t[-3000:]


# --- 1. a worker dies with the gpuenv process that started it ----------------------------------


def test_kill_9_of_gpuenv_takes_its_hanging_worker_and_the_workers_child(tmp_path):
    suite = fake_suite(tmp_path / "hang.toml", '"fake:hang"', timeout=600)
    pidfile = tmp_path / "child.pid"
    with open(tmp_path / "log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuenv", "bench", "--suite", str(suite), "--out", str(tmp_path / "out")],
            cwd=ROOT, env={**os.environ, "GPUENV_FAKE_CHILD_PIDFILE": str(pidfile)}, stdout=log, stderr=log,
        )
        deadline = time.time() + 120
        while not pidfile.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert pidfile.exists(), (tmp_path / "log").read_text()
        worker, child = (int(x) for x in pidfile.read_text().split())
        watchdog = int(Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[1])  # the worker's parent
        assert watchdog != proc.pid and alive(watchdog)  # the worker runs under its watchdog, under gpuenv
        proc.kill()  # kill -9: gpuenv cannot clean up; the kernel tells the watchdog
        proc.wait(timeout=30)
    # Far sooner than the case's 600 s timeout: they died with gpuenv, not of old age (a minute: a busy VM's teardown)
    assert gone([watchdog, worker, child], within_s=60), "a worker outlived the gpuenv process that started it"


# --- 2. a full disk ------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmpfs):
    """A 200 KB tmpfs."""
    return tmpfs("disk", "size=200k")


def fill(disk: Path, leave_kib: int) -> None:
    free = shutil.disk_usage(disk).free
    (disk / "filler").write_bytes(b"\0" * max(0, free - leave_kib * 1024))


def test_disk_full_mid_run_keeps_every_written_record_and_reports_the_rest(small_disk, tmp_path, cli):
    fill(small_disk, 100)
    suite = fake_suite(tmp_path / "many.toml", num_envs=str(list(range(1, 31))))
    r = cli("bench", "--suite", str(suite), "--out", str(small_disk / "out"), timeout=600)
    no_traceback(r.stdout, r.stderr)
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no space left in" in errors[0] and "KiB free" in errors[0], r.stderr
    files = sorted((small_disk / "out").rglob("*.json"))
    assert 1 <= len(files) < 30
    for f in files:  # every record on disk is whole and valid
        assert load(f)["status"] == "ok"
    assert f"the {len(files)} records already written are kept" in errors[0]
    not_run = [line for line in r.stdout.splitlines() if line.startswith("not run fake-ok-cartpole-n")]
    assert len(not_run) == 30 - len(files), r.stdout
    assert not list((small_disk / "out").rglob(".*.tmp")), "a half-written temp file was left behind"


def test_a_full_disk_is_refused_before_any_case_runs(small_disk, tmp_path, cli):
    fill(small_disk, 16)
    suite = fake_suite(tmp_path / "one.toml")
    r = cli("bench", "--suite", str(suite), "--out", str(small_disk / "out"))
    no_traceback(r.stdout, r.stderr)
    assert r.returncode == 2
    assert r.stderr.startswith("error: no room for results in") and "KiB free" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not list((small_disk / "out").rglob("*.json"))


# --- 3. hostile files through every reader --------------------------------------------------------


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    """One real record from a quick fake run."""
    d = tmp_path_factory.mktemp("good")
    suite = fake_suite(d / "s.toml")
    r = subprocess.run([sys.executable, "-m", "gpuenv", "bench", "--suite", str(suite), "--out", str(d / "out")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (path,) = (d / "out").rglob("*.json")
    return path


def test_hostile_files_are_skipped_by_every_reader_with_a_short_message(good_run, tmp_path, cli):
    d = tmp_path / "results"
    (d / "run").mkdir(parents=True)
    shutil.copy(good_run, d / "run" / good_run.name)
    (d / "deep.json").write_text("[" * 100_000)
    with open(d / "huge.json", "w") as f:  # 100 MB: refused by its size, never read whole
        f.write('{"schema": "' + "a" * (100 * 2**20) + '"}')
    (d / "long.json").write_text(json.dumps({"schema": "b" * 100_000}))
    (d / "dir.json").mkdir()
    os.mkfifo(d / "fifo.json")  # opening it would block a naive reader forever
    hostile = json.loads(good_run.read_text())
    hostile["case"]["task"] = "x' onerror='document.body.setAttribute(\"data-pwned\",\"yes\")"
    (d / "task.json").write_text(json.dumps(hostile))
    before = good_run.read_bytes()
    commands = [
        ("show", str(d)),
        ("compare", str(d), str(d)),
        ("report", str(d), "--out", str(tmp_path / "site")),
        ("regressions", str(d)),
        ("asv-import", str(d), "--results-dir", str(tmp_path / "asv" / "results")),
    ]
    for args in commands:
        r = cli(*args, timeout=300)
        no_traceback(r.stdout, r.stderr)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        skipped = [line for line in r.stderr.splitlines() if line.startswith("skipped")]
        assert len(skipped) == 6 * (2 if args[0] == "compare" else 1), (args, r.stderr)
        assert all(len(line) < 400 for line in skipped), [line[:200] for line in skipped]
        text = "\n".join(skipped)
        assert "nested too deep" in text and "too large for a result record" in text and "not a regular file" in text
        assert "field 'case.task'" in text
    assert good_run.read_bytes() == before
    assert os.path.getsize(d / "huge.json") > MAX_RECORD_BYTES


# --- 4. script in record values never runs in the report ------------------------------------------


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("no chromium here (Debian package `chromium`; .ci/run installs it)")
    return path


def dom(html_path: Path) -> str:
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000", "--dump-dom", html_path.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout


PWN = "document.body.setAttribute(\"data-pwned\",\"yes\")"


def test_report_escapes_every_record_value_and_no_script_runs_in_chromium(good_run, tmp_path, cli):
    from gpuenv.report.site import build

    rec = load(good_run)
    # Through the reader: a hostile CPU model is valid text, so it reaches the page.
    hostile_cpu = copy.deepcopy(json.loads(good_run.read_text()))
    hostile_cpu["where"]["machine"]["cpu_model"] = f"<img src=x onerror='{PWN}'><script>{PWN}</script>"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "cpu.json").write_text(json.dumps(hostile_cpu))
    r = cli("report", str(tmp_path / "in"), "--out", str(tmp_path / "site1"))
    assert r.returncode == 0, r.stderr
    # Past the reader (a record that validation would refuse, as a future reader might let through):
    # the page escapes it anyway, and file names come from a safe slug.
    good = typed(copy.deepcopy(rec))  # model_copy does not validate: values no reader would let through
    bad = good.model_copy(update={"case": good.case.model_copy(update={"task": f"x' onerror='{PWN}",
                                                                        "backend": f"<script>{PWN}</script>"})})
    build([bad], tmp_path / "site2")
    ours = {"<script src='plotly.min.js'>", "<script src='../plotly.min.js'>", "<script src='../../plotly.min.js'>",
            "<script data-gpuenv='figure'>"}
    pages = [p for site in ("site1", "site2") for p in (tmp_path / site).rglob("*.html")]
    assert len(pages) >= 8  # index, claims, decision and a case page of each site
    for page in pages:
        text = dom(page)
        assert "<body" in text
        assert not re.search(r"<body[^>]*data-pwned", text), f"script ran in {page}"
        raw = page.read_text()
        assert set(re.findall(r"<script[^>]*>", raw)) <= ours, page  # only the site's own scripts
        assert "<script>" not in raw and "onerror='" not in raw, page
    for f in (tmp_path / "site2").rglob("*"):
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", f.name), f.name


# --- 5. sweep specs and pins are requirements, never options ---------------------------------------


@pytest.mark.parametrize("args", [
    ["sweep", "--", "--index-url==a,b"],
    ["sweep", "--", "-r==a,b"],
    ["sweep", "brax==0.12.1,0.13.0", "--with=--index-url==x"],
    ["sweep", "brax==0.12.1,0.13.0", "--with", "numpy @ file:///etc/passwd"],
    ["sweep", "brax==0.12.1,not-a-version"],
    ["images", "--build", "gymnasium", "--pin", "--index-url==x", "--dry-run"],
])
def test_sweep_specs_and_pins_that_are_not_plain_requirements_are_refused(cli, args, tmp_path):
    r = cli(*args, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    no_traceback(r.stdout, r.stderr)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.in")), "a requirements file was written"


# --- 6. smaller defects -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [-1, 2**63 - 1])
def test_a_seed_simulators_cannot_take_is_refused_before_running(cli, tmp_path, seed):
    suite = fake_suite(tmp_path / "seed.toml", extra=f"seed = {seed}\n")
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "seed must be in 0.." in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_empty_out_and_empty_variant_are_refused(cli, tmp_path):
    r = cli("bench", "--suite", "smoke", "--out", "", cwd=tmp_path)
    assert r.returncode == 2 and "--out is empty" in r.stderr
    assert not list(tmp_path.iterdir())
    r = cli("bench", "--backend", "fake:", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "names no variant after ':'" in r.stderr, r.stderr
    r = cli("report", "--out", "")
    assert r.returncode == 2 and "--out is empty" in r.stderr


def test_a_suite_with_nothing_to_run_says_why(cli, tmp_path):
    suite = write_suite(tmp_path / "none.toml", FAST.format(timeout=60) + """
[[matrix]]
backends = ["fake:ok"]
tasks = ["ant"]
num_envs = [1]
""")
    r = cli("bench", "--suite", str(suite), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    assert "nothing to run in suite 'none'" in r.stderr and "fake:ok / ant: not offered by this backend" in r.stderr, r.stderr


def test_sigterm_is_recorded_as_sigterm_and_the_count_leaves_out_the_interrupted_case(tmp_path):
    suite = write_suite(tmp_path / "t.toml", FAST.format(timeout=600) + """
[[matrix]]
backends = ["fake:ok"]
tasks = ["cartpole"]
num_envs = [1]
[[matrix]]
backends = ["fake:hang"]
tasks = ["cartpole"]
num_envs = [1]
""")
    pidfile = tmp_path / "child.pid"
    with open(tmp_path / "out.log", "w") as o, open(tmp_path / "err.log", "w") as e:
        proc = subprocess.Popen([sys.executable, "-m", "gpuenv", "bench", "--suite", str(suite), "--out", str(tmp_path / "out")],
                                cwd=ROOT, env={**os.environ, "GPUENV_FAKE_CHILD_PIDFILE": str(pidfile)}, stdout=o, stderr=e)
        deadline = time.time() + 300
        while not pidfile.exists() and time.time() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    err = (tmp_path / "err.log").read_text()
    assert proc.returncode == 130, err
    assert "interrupted by SIGTERM: the 1 finished record(s) and the interrupted case's record are kept" in err
    rec = next(load(p) for p in (tmp_path / "out").rglob("*.json") if "hang" in p.name)
    assert rec["failure"]["reason"] == "interrupted by SIGTERM"
    from gpuenv.history.load import load_records
    from gpuenv.results.runs import half_finished

    records, _ = load_records([tmp_path / "out"])
    assert {r.invocation.cases for r in records if r.invocation} == {2} and len(records) == 2  # both cases, one command
    assert half_finished(records) == {rec["run_id"]: "fake-hang-cartpole-n1 was interrupted by SIGTERM"}


def test_tensorboard_writer_time_counts_as_import_not_training(tmp_path, monkeypatch):
    from test_ppo import FAKE, Clock, spec

    from gpuenv.modes.ttr.train import run_training

    clock = Clock()

    class SlowWriter:  # stands in for tensorboardX, whose import pulls in torch (about a second)
        def __init__(self, logdir: str) -> None:
            clock.t += 100.0

        def add_scalar(self, *a: object) -> None:
            pass

        flush = close = lambda self: None

    monkeypatch.setitem(sys.modules, "tensorboardX", types.SimpleNamespace(SummaryWriter=SlowWriter))
    s = spec(replace(FAKE, max_time_s=1000.0), returns=[10, 500])
    s["tb_dir"] = str(tmp_path)
    r = run_training(s, clock=clock)
    assert r["outcome"] == "reached"
    assert r["phases_s"]["import"] >= 100
    assert r["train_time_to_threshold_s"] < 50  # the 100 s of the writer is not training time
    assert r["time_to_threshold_s"] > 100  # but it is wall-clock


# --- 7. the machine-speed fingerprint --------------------------------------------------------------


def band(x: float, noise: float = 0.01) -> dict:
    return {"median": x, "low": x * (1 - noise), "high": x * (1 + noise)}


def fp_dict(py: float, mem: float = 10.0, noise: float = 0.01) -> dict:
    return {"method": fingerprint.METHOD, "python_mops": band(py, noise), "memory_gbs": band(mem, noise), "repeats": 7, "seconds": 0.2}


def fp(py: float, mem: float = 10.0, noise: float = 0.01) -> Fingerprint:
    return Fingerprint.model_validate(fp_dict(py, mem, noise))


def test_fingerprints_differ_only_beyond_their_noise():
    assert fingerprint.differs(fp(20.0), fp(20.6)) is None  # 3%: one machine
    why = fingerprint.differs(fp(20.0), fp(40.0))
    assert why and "2.00x" in why and "Mloops/s" in why
    assert fingerprint.differs(fp(20.0, noise=0.2), fp(26.0, noise=0.2)) is None  # within twice a wide noise band
    assert "GB/s" in (fingerprint.differs(fp(20.0, mem=10.0), fp(20.0, mem=4.0)) or "")
    assert fingerprint.differs(fp(20.0, mem=10.0), fp(20.0, mem=8.5)) is None  # memory bandwidth gets 25%
    assert fingerprint.differs(None, fp(20.0)) is None
    assert fingerprint.differs(fp(20.0), fp(40.0).model_copy(update={"method": "other"})) is None


def test_every_record_carries_a_fingerprint_measured_here(good_run):
    f = load(good_run)["where"]["machine"]["fingerprint"]
    assert f["method"] == fingerprint.METHOD and f["repeats"] == fingerprint.REPEATS
    for key, _, _ in fingerprint.COMPONENTS:
        assert 0 < f[key]["low"] <= f[key]["median"] <= f[key]["high"]
    bad = json.loads(good_run.read_text())
    bad["where"]["machine"]["fingerprint"]["python_mops"]["high"] = 0.001
    with pytest.raises(UserError, match=r"field 'where.machine.fingerprint.python_mops.high' must be >= low"):
        validate(bad)


def two_machines(good_run: Path, tmp_path: Path) -> tuple[Path, Path]:
    rec = json.loads(good_run.read_text())
    old, new = tmp_path / "old", tmp_path / "new"
    for d, speed in ((old, 10.0), (new, 20.0)):
        d.mkdir()
        r = copy.deepcopy(rec)
        r["where"]["machine"]["fingerprint"] = fp_dict(speed)
        r["run_id"] = f"run-{speed:g}"  # two runs: a run is on one machine
        validate(r)
        (d / good_run.name).write_text(json.dumps(r))
    return old, new


def test_compare_allows_for_two_machine_speeds_and_report_draws_them_apart(good_run, tmp_path, cli):
    old, new = two_machines(good_run, tmp_path)
    r = cli("compare", str(old), str(new))  # the same hardware at two speeds: compared, the speed change allowed for
    no_traceback(r.stdout, r.stderr)
    assert r.returncode == 0 and "reference speed moved between OLD and NEW in 1 case(s)" in " ".join(r.stdout.split()), r.stdout
    r = cli("show", str(old), str(new))
    assert r.returncode == 0 and "come from 2 machines" in r.stdout.replace("\n", " "), r.stdout

    r = cli("report", str(old), str(new), "--out", str(tmp_path / "site"))
    assert r.returncode == 0, r.stderr
    index = (tmp_path / "site" / "index.html").read_text()
    assert "machine-1/index.html" in index and "machine-2/index.html" in index
    for i in (1, 2):
        page = (tmp_path / "site" / f"machine-{i}" / "index.html").read_text()
        assert "1 records" in page  # each machine's page holds only its own record


def test_a_run_whose_speed_moved_is_one_machine_with_a_warning(good_run):
    rec = load(good_run)
    a, b = copy.deepcopy(rec), copy.deepcopy(rec)
    a["case_key"], b["case_key"] = "case-a", "case-b"
    a["where"]["machine"]["fingerprint"], b["where"]["machine"]["fingerprint"] = fp_dict(10.0), fp_dict(15.0)
    a, b = typed(a), typed(b)
    assert len(fingerprint.machines([a, b])) == 1  # one run, one machine
    (line,) = fingerprint.footnotes([a, b])
    assert line.startswith(f"run {rec['run_id']}: the machine's reference speed moved between cases (case-a vs case-b")
    assert fingerprint.footnotes([a, a.model_copy(deep=True)]) == []

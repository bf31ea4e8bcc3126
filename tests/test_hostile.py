"""Records from anywhere (issue 25): a hostile corpus through every reading command and export.

Records travel (a results branch anyone with push access writes, shared folders, pull requests), so
a record's text must never become an option, a command, markup, a terminal control sequence or a
path, and no reader may count a record twice. Each command here runs as a user would run it, over
records built from a real published one with hostile text planted in it, and must: exit with its
documented code, print no traceback, send no control character to the terminal, show markup as
text, and write nothing outside the folder it was given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, fake_suite, write_suite

from gpuenv.results.schema import load, read, seal

PUBLISHED = ROOT / "results" / "published" / "20261203T143723Z-eb9175"
ANSI = "\x1b[2J\x1b[H\x1b[32mALL CASES OK\x1b[0m"  # clear the screen, then a fake green verdict
OSC52 = "\x1b]52;c;aGFja2Vk\x07"  # writes the user's clipboard
MARKUP = "[bold red]pwned[/] [/]"
C1 = "\x9b31m"  # a one-byte CSI on some terminals
BIDI = "\u202egnp.exe"  # reverses what follows on screen
MATH = "$\\foo$"
# What must never reach a terminal: C0 controls but newline and tab, DEL, C1, bidi overrides.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def published(name: str) -> dict:
    return json.loads((PUBLISHED / name).read_text())


def clean(*texts: str) -> None:
    for t in texts:
        assert "Traceback" not in t, t[-3000:]
        bad = RAW_CONTROL.search(t)
        assert bad is None, f"raw control character {bad.group(0)!r} reached the terminal: ...{t[max(0, bad.start() - 80):bad.end() + 40]!r}"


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    """OLD: a published record as it is; H: hostile records (valid ones that carry hostile text, and
    invalid ones that must be skipped), hostile file names among them."""
    root = tmp_path_factory.mktemp("hostile")
    old, h = root / "old", root / "h"
    (old / "run").mkdir(parents=True)
    (h / "run").mkdir(parents=True)
    shutil.copy(PUBLISHED / "envpool-sync-cartpole-n1.json", old / "run" / "envpool-sync-cartpole-n1.json")

    a = published("envpool-sync-cartpole-n1.json")  # valid, with hostile text wherever text is free
    a["where"]["machine"]["cpu_model"] = MARKUP + ANSI + OSC52
    a["where"]["env"] = {"XLA_FLAGS": OSC52 + C1}
    a["summary"]["bottleneck"] = MARKUP + C1
    a["summary"]["warnings"] = [ANSI + " warn", MATH, BIDI, ":smile: \u2028\ufeff\u200b\u061c", "x" * 20_000]
    a["what"]["reset_mode"] = BIDI + "\x00"
    (h / "run" / "a.json").write_text(json.dumps(seal(a)))

    b = published("envpool-sync-cartpole-n8.json")  # a failed case whose reason and stderr attack
    b["status"], b["summary"] = "failed", None
    b["failure"] = {"kind": "crashed", "reason": ANSI + MARKUP + "a\x00b" + "y" * 10_000, "process": 0, "stderr_tail": OSC52}
    b["case_key"] = "envpool-sync-cartpole-n8b"
    (h / "run" / "b.json").write_text(json.dumps(seal(b)))

    c = published("envpool-sync-cartpole-n64.json")  # an option where a commit belongs: read as no commit
    c["where"]["git"]["sha"] = f"--output={root / 'clobbered'}"
    (h / "run" / "sha.json").write_text(json.dumps(c))
    d = published("envpool-sync-pong-n1.json")  # invalid: mathtext and markup where a version belongs
    d["where"]["packages"]["envpool"] = MATH + "[/]"
    (h / "run" / "version.json").write_text(json.dumps(d))
    e = published("envpool-sync-cartpole-n8.json")  # a forged workload id: n8 posing as n1's workload
    e["workload_id"] = seal(published("envpool-sync-cartpole-n1.json"))["workload_id"]
    (h / "run" / "forged.json").write_text(json.dumps(e))
    (h / "run" / "schema.json").write_text(json.dumps({"schema": MARKUP + ANSI}))
    (h / "run" / "deep.json").write_text("[" * 5000 + "]" * 5000)
    shutil.copy(h / "run" / "schema.json", h / "run" / f"esc{ANSI}.json")  # file names that attack
    shutil.copy(h / "run" / "schema.json", h / "run" / "[bold red]x.json")
    shutil.copy(h / "run" / "a.json", h / "a-copy.json")  # the same record twice: read once

    gab = root / "bench.json"  # pytest-benchmark output with hostile benchmark names
    gab.write_text(json.dumps({"machine_info": {"cpu": {"brand_raw": OSC52}}, "benchmarks": [
        {"name": ANSI + MARKUP, "extra_info": {"case": ANSI + MARKUP, "env_steps_per_s": 1000.0, "env_steps_per_round": 10},
         "stats": {"min": 0.009, "max": 0.011, "rounds": 5}}]}))
    return {"root": root, "old": old, "h": h, "gab": gab}


READERS = [
    ("show", ["show", "{h}"], {0}),
    ("show --markdown", ["show", "--markdown", "{h}"], {0}),
    ("compare (refused: machines differ)", ["compare", "{old}", "{h}"], {2}),
    ("compare --allow-different", ["compare", "--allow-different", "{old}", "{h}"], {0, 1}),
    ("regressions", ["regressions", "{h}"], {0}),
    ("report", ["report", "{h}", "--out", "{out}/site"], {0}),
    ("claims", ["claims", "{h}"], {0}),
    ("claims --json", ["claims", "--json", "{h}"], {0}),
    ("decide", ["decide", "--task", "cartpole", "--budget", "1M", "--results", "{h}"], {0}),
    ("asv-import", ["asv-import", "{h}", "--results-dir", "{out}/asv/results"], {0}),
    ("export-gab", ["export-gab", "{gab}", "{out}/gab.json"], {0}),
]


@pytest.mark.parametrize("name, args, codes", READERS, ids=[r[0] for r in READERS])
def test_the_hostile_corpus_through_every_reader(corpus, tmp_path, cli, name, args, codes):
    out = tmp_path / "out"
    out.mkdir()
    before = listing(corpus["root"])
    argv = [a.format(h=corpus["h"], old=corpus["old"], out=out, gab=corpus["gab"]) for a in args]
    r = cli(*argv, timeout=600)
    clean(r.stdout, r.stderr)
    assert r.returncode in codes, (name, r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert listing(corpus["root"]) == before, "a reader wrote into the records' folder"
    assert not (corpus["root"] / "clobbered").exists(), "a record's sha became git's --output"
    text = r.stdout + r.stderr
    if name.startswith(("show", "compare", "regressions", "report", "claims", "decide", "asv-import")):
        skipped = [line for line in r.stderr.splitlines() if line.startswith("skipped")]
        assert all(len(line) < 500 for line in skipped), [line[:200] for line in skipped]
        if name != "claims --json":
            assert "workload_id" in text and "does not match what the record describes" in text  # the forged id
            assert "nested too deep" in text
            assert "[bold red]x.json" in text and "esc\\x1b[2J" in text  # file names shown, not obeyed
            assert "duplicate record file(s)" in text  # the copy is read once
    if name == "show":
        assert "[bold red]pwned[/]" in text  # markup shown as typed
        assert "\\x1b[2J" in text and "ALL CASES OK" in text  # the attack visible, inert
    if name.startswith("compare (refused"):
        errors = [line for line in r.stderr.splitlines() if not line.startswith("skipped")]
        assert len(errors) == 1 and errors[0].startswith("error: the runs differ in"), r.stderr
    if name == "report":
        site = out / "site"
        assert (site / "index.html").is_file() and (site / ".gpuenv-output").is_file()
        page = "".join(p.read_text() for p in site.rglob("*.html"))
        assert "\x1b" not in page and "[bold red]pwned[/]" in page
    if name == "asv-import":  # the option-like sha was read as no commit at all
        assert "no commit recorded" in text
    if name == "export-gab":
        assert (out / "gab.json").is_file()


def test_nothing_is_written_outside_the_folders_given(corpus, tmp_path, cli):
    """asv-import's --by-version names a file: a path there is refused, and nothing lands outside."""
    scratch = tmp_path / "scratch"
    (scratch / "a" / "b").mkdir(parents=True)
    before = listing(tmp_path)
    r = cli("asv-import", str(corpus["h"]), "--results-dir", str(scratch / "a" / "b" / "results"), "--by-version", "../../x")
    clean(r.stdout, r.stderr)
    assert r.returncode == 2 and "--by-version '../../x': not a package name" in r.stderr
    assert listing(tmp_path) == before


def test_a_records_sha_never_reaches_git_as_an_option(tmp_path, monkeypatch):
    from gpuenv.history import asv_import
    from gpuenv.results.models import Git

    target = tmp_path / "clobbered"
    assert Git.model_validate({"sha": f"--output={target}", "dirty": None}).sha is None  # read as no commit
    assert asv_import.commit_date_ms(ROOT, f"--output={target}") is None  # and refused where it is used
    assert not target.exists()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    calls = []
    real = subprocess.run
    monkeypatch.setattr(asv_import.subprocess, "run", lambda argv, **kw: calls.append(argv) or real(argv, **kw))
    assert asv_import.commit_date_ms(ROOT, head) > 0  # a real commit still dates ...
    assert calls[-1][-2:] == ["--end-of-options", head]  # ... named after --end-of-options


def test_report_twice_then_regressions_finds_nothing_new(tmp_path, cli):
    """The site's copies of records sit under results/ by default: readers skip them and read each
    record once, so reporting never changes what the history says."""
    results = tmp_path / "results"
    shutil.copytree(PUBLISHED, results / PUBLISHED.name)
    first = cli("regressions", str(results))
    assert first.returncode == 0, first.stderr
    for _ in range(2):
        r = cli("report", str(results), "--out", str(results / "site"))
        assert r.returncode == 0, r.stderr
    assert list((results / "site" / "records").rglob("*.json"))  # the copies are there ...
    again = cli("regressions", str(results))
    assert again.returncode == 0 and again.stdout == first.stdout  # ... and not read
    assert "duplicate" not in again.stderr


def test_a_planted_output_mark_is_said_not_silent(tmp_path, cli):
    """A pull request could plant .gpuenv-output in a run folder to hide its records: readers say so."""
    results = tmp_path / "results"
    shutil.copytree(PUBLISHED, results / "run")
    (results / "run" / ".gpuenv-output").write_text("x")
    shutil.copy(PUBLISHED / "envpool-sync-cartpole-n1.json", results / "one.json")
    r = cli("show", str(results))
    clean(r.stdout, r.stderr)
    assert r.returncode == 0 and f"skipped {results / 'run'}: gpuenv's own output" in " ".join(r.stderr.split())
    site = cli("report", str(results), "--out", str(results))  # a site over its own records would hide them
    assert site.returncode == 2 and "holds the records it reads" in site.stderr


def test_a_case_rerun_into_the_same_run_gets_its_own_page(tmp_path):
    from gpuenv.report.interactive import case_href

    a = read(PUBLISHED / "envpool-sync-cartpole-n1.json")
    b = a.model_copy(update={"created_utc": "2026-12-03T15:00:00+00:00"})
    assert a.run_id == b.run_id and a.case_key == b.case_key
    assert case_href(a) != case_href(b) and case_href(a) == case_href(a.model_copy(deep=True))


def test_matplotlib_never_parses_mathtext_from_data(tmp_path):
    import matplotlib

    from gpuenv.escape import mathtext, pyplot

    plt = pyplot()
    assert matplotlib.rcParams["text.parse_math"]  # matplotlib's own log-axis ticks are mathtext: they must stay so
    fig, ax = plt.subplots()
    ax.set_title(mathtext("envpool $\\foo$ [/]"))
    ax.plot([1, 10], [1, 10], label=mathtext("$\\frac{a}{$"))
    ax.set_yscale("log")
    ax.legend()
    fig.savefig(tmp_path / "x.png")  # unescaped, "$\\frac{a}{$" raises ParseFatalException here
    plt.close(fig)
    assert mathtext("a $x$ b") == "a \\$x\\$ b"


def test_terminal_text_shows_every_control_character():
    from gpuenv.escape import html, markup, terminal

    assert terminal(ANSI) == "\\x1b[2J\\x1b[H\\x1b[32mALL CASES OK\\x1b[0m"
    assert terminal("a\nb\tc") == "a\\nb\\tc" and terminal("a\nb", multiline=True) == "a\nb"
    assert terminal(BIDI) == "\\u202egnp.exe" and terminal(C1) == "\\x9b31m" and terminal("a\x00") == "a\\x00"
    assert markup(MARKUP) == "\\[bold red]pwned\\[/] \\[/]"
    assert html("<b a='1'>") == "&lt;b a=&#x27;1&#x27;&gt;"


# --- one line and exit 2 instead of a traceback ------------------------------------------------------


def one_line_error(r, *needles: str) -> None:
    clean(r.stdout, r.stderr)
    assert r.returncode == 2, (r.returncode, r.stdout[-1000:], r.stderr[-1000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_paths_and_values_are_one_line_and_exit_2(tmp_path, cli):
    f = tmp_path / "file"
    f.write_text("x")
    for args, needle in [
        (["report", str(PUBLISHED), "--out", str(f)], "a file is there"),
        (["report", str(PUBLISHED), "--out", "/proc/gpuenv-site"], "/proc/gpuenv-site"),
        (["report", str(PUBLISHED), "--out", str(tmp_path / ("x" * 5000))], "pass a shorter path"),
        (["report", str(PUBLISHED), "--num-envs", "0"], "--num-envs must be >= 1"),
        (["report", str(PUBLISHED), "--num-envs", "3", "--out", str(tmp_path / "s")], "no ok record at that size"),
        (["show", "../../" + "x" * 5000], "cannot read it"),
        (["show", ""], "an empty path was given"),
        (["regressions", str(PUBLISHED), "--min-change", "nan"], "--min-change must be a fraction in [0, 10)"),
        (["asv-import", str(PUBLISHED), "--results-dir", "/proc/x/results"], "/proc/x"),
        (["bench", "--suite", "smoke", "--run-id", "", "--out", str(tmp_path / "o")], "--run-id ''"),
        (["bench", "--suite", "smoke", "--num-envs", "1000000000", "--out", str(tmp_path / "o")], "num_envs = 1,000,000,000 is more than"),
        # the register named where records go: said as what it is, not "a corrupt result file"
        (["claims", str(ROOT / "claims" / "register.toml")], "register.toml: not a result record"),
        (["show", str(ROOT / "suites" / "quick.toml")], "a .toml file is a suite (bench --suite FILE) or the claims register"),
    ]:
        one_line_error(cli(*args, timeout=300), needle)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_a_full_or_read_only_file_system_is_one_line(tmpfs, cli):
    full = tmpfs("full", "size=64k")  # the site's plotly.min.js alone is 4 MB
    one_line_error(cli("report", str(PUBLISHED), "--out", str(full / "site")), "No space left on device; free some space")
    read_only_dir = tmpfs("ro", "ro,size=64k")
    one_line_error(cli("report", str(PUBLISHED), "--out", str(read_only_dir / "site")), "writable file system")
    one_line_error(cli("asv-import", str(PUBLISHED), "--results-dir", str(read_only_dir / "asv")), "writable file system")


def test_bad_input_files_are_one_line(tmp_path, cli):
    deep = write_suite(tmp_path / "deep.toml", "x = " + "[" * 600 + "]" * 600 + "\n")
    one_line_error(cli("bench", "--suite", str(deep), "--out", str(tmp_path / "o")), "nested too deep")
    suites = tmp_path / "suites"
    suites.mkdir()
    shutil.copy(deep, suites / "deep.toml")
    r = cli("list", "suites", env={"GPUENV_SUITES_DIR": str(suites)})
    clean(r.stdout, r.stderr)
    assert r.returncode == 0 and "nested too deep" in " ".join(r.stdout.split())
    for body, needle in [('claim = "x"\n', "'claim' must be [[claim]] tables"),
                         ('[[claim]]\nid = ["x"]\n', "id must be text"),
                         ("claim = " + "[" * 600 + "]" * 600 + "\n", "nested too deep")]:
        reg = write_suite(tmp_path / "reg.toml", body)
        one_line_error(cli("claims", str(PUBLISHED), env={"GPUENV_CLAIMS": str(reg)}), needle)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    one_line_error(cli("claims", str(PUBLISHED), env={"GPUENV_CLAIMS": str(fifo)}, timeout=60), "not a regular file")
    suite = fake_suite(tmp_path / "s.toml")
    one_line_error(cli("bench", "--suite", str(suite), "--out", str(tmp_path / "o"), env={"GPUENV_RECORD_TAGS": "{"}),
                   "GPUENV_RECORD_TAGS is not JSON")
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").rglob("*.json"))  # refused before any case ran
    for extra, needle in [("memory_limit_mib = 9223372036854775807\n", "memory_limit_mib = 9,223,372,036,854,775,807 is more than"),
                          ("processes = 100000\n", "processes = 100,000 is more than")]:
        big = fake_suite(tmp_path / "big.toml", matrix_extra=extra)
        one_line_error(cli("bench", "--suite", str(big), "--out", str(tmp_path / "o")), needle)


# --- faults classified by what happened --------------------------------------------------------------


def test_ctrl_c_during_startup_is_one_line_never_a_traceback(tmp_path):
    """SIGINT at 0.05 s and later, while Python still imports gpuenv's modules. How long a start takes
    moves with the machine's load (and the first run of a fresh clone is the slowest), so after the
    fixed early delays the delay is bisected: a run that finished first shortens it, one ended by the
    signal before Python's handler lengthens it, until a signal lands inside gpuenv (the machine's
    speed decides how many tries that takes, never the outcome)."""
    gpuenv = Path(sys.executable).with_name("gpuenv")

    def whole() -> float:
        t0 = time.perf_counter()
        subprocess.run([str(gpuenv), "list"], capture_output=True, timeout=300)
        return time.perf_counter() - t0

    def interrupt(delay: float) -> str:
        """'landed' (one line, exit 130), 'early' (ended by the signal, silently) or 'late' (it finished)."""
        # SIGINT as a terminal leaves it: a background job of a non-interactive shell (as CI may run
        # the tests) inherits it ignored, and Python then installs no handler: every run would end 'late'
        p = subprocess.Popen([str(gpuenv), "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        assert "Traceback" not in err, (delay, err)
        if p.returncode == -signal.SIGINT:  # before Python installed its handler: ended by the signal, silently
            assert not err, (delay, err)
            return "early"
        if p.returncode == 0:
            return "late"
        assert p.returncode == 130 and err.strip().splitlines()[-1].startswith("interrupted"), (delay, p.returncode, err)
        return "landed"

    outcomes = [interrupt(d) for d in (0.05, 0.15, 0.3)]
    lo, hi = 0.0, min(whole(), whole())
    for _ in range(40):
        if "landed" in outcomes:
            break
        outcome = interrupt((lo + hi) / 2)
        outcomes.append(outcome)
        if outcome == "late":
            hi = (lo + hi) / 2
        elif outcome == "early":
            lo = (lo + hi) / 2
        if hi - lo < 0.005:  # the machine's speed moved under the bisection: start again from now
            lo, hi = 0.0, whole()
    assert "landed" in outcomes, f"no Ctrl-C landed while gpuenv ran in {len(outcomes)} tries ({outcomes}): the test proved nothing"


def test_scratch_of_a_killed_run_is_cleaned_at_the_next_and_no_empty_run_folder_stays(tmp_path, cli):
    import tempfile

    from gpuenv.run.runner import SCRATCH

    suite = fake_suite(tmp_path / "hang.toml", '"fake:hang"', timeout=600)
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "gpuenv", "bench", "--suite", str(suite), "--out", str(out)],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pattern = f"{SCRATCH}{p.pid}-*"
    deadline = time.time() + 300
    while not list(Path(tempfile.gettempdir()).glob(pattern)) and time.time() < deadline:
        time.sleep(0.1)
    scratch = list(Path(tempfile.gettempdir()).glob(pattern))
    assert scratch, "the run made no scratch folder"
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    assert scratch[0].exists()  # SIGKILL: its clean-up could not run
    assert not out.exists() or not any(out.iterdir()), "an empty run folder was left behind"
    # nor a worker: killed this early, the runner may die before its worker set up its guard (then it
    # leaves at once) or after (then the guard's watchdog kills the worker's group); either way nothing
    # of the run lives on (it used to: a worker hanging under PID 1 for an hour)
    def left() -> list[str]:
        return [ln for ln in subprocess.run(["pgrep", "-fa", scratch[0].name], capture_output=True, text=True).stdout.splitlines()
                if "pgrep" not in ln]

    deadline = time.time() + 60
    while left() and time.time() < deadline:
        time.sleep(0.2)
    assert not left(), left()
    r = cli("bench", "--suite", str(fake_suite(tmp_path / "ok.toml")), "--out", str(tmp_path / "out2"))
    assert r.returncode == 0, r.stderr
    assert not scratch[0].exists(), "the next run did not clean the killed run's scratch folder"


def _memory_cgroup(tmp_name: str, limit_bytes: int) -> Path | None:
    """A memory cgroup with a limit, v2 or v1, where this user may make one (root, as in CI)."""
    for base, limit_file in ((Path("/sys/fs/cgroup"), "memory.max"), (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes")):
        if not (base / limit_file).exists() and not (base / "cgroup.procs").exists():
            continue
        d = base / tmp_name
        try:
            d.mkdir(exist_ok=True)
            (d / limit_file).write_text(str(limit_bytes))
            return d
        except OSError:
            try:
                d.rmdir()
            except OSError:
                pass
    return None


def test_a_worker_the_oom_killer_ends_is_killed_and_the_oom_killer_named(tmp_path):
    cg = _memory_cgroup(f"gpuenv-test-{os.getpid()}", 1536 * 2**20)
    if cg is None:
        pytest.skip("cannot make a memory cgroup here (needs root and a writable cgroup file system; CI has both)")
    try:
        suite = fake_suite(tmp_path / "alloc.toml", '"fake:alloc"', "[64]", timeout=600)  # 4 GiB in a 1.5 GiB cgroup
        cmd = f"echo $$ > {cg / 'cgroup.procs'} && exec {sys.executable} -m gpuenv bench --suite {suite} --out {tmp_path / 'out'}"
        r = subprocess.run(["sh", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=600)
        clean(r.stdout, r.stderr)
        assert r.returncode == 1, r.stdout + r.stderr
        (rec,) = [load(p) for p in (tmp_path / "out").rglob("*.json")]
        assert rec["failure"]["kind"] == "killed"
        reason = rec["failure"]["reason"]
        assert reason.startswith("worker killed by SIGKILL from ") and "OOM killer: out of memory" in reason, reason
        assert f"{cg}/memory." in reason and "most likely" not in reason, reason  # the run's own cgroup counted it
    finally:
        for _ in range(50):
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)

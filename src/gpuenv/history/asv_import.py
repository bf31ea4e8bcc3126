"""Turn gpuenv records into asv result files, so `asv publish` draws the history without re-running.

asv's rules, kept here: smaller is better for every benchmark (so throughput is stored as seconds
per million env steps, time-to-reward as seconds), a result belongs to a commit on the configured
branch and is dated by that commit in integer milliseconds, and the machine is described by a
machine.json. GPU and driver are machine keys; library versions are result params, so asv can split
and filter by them. Written with asv's own Results class so the format is asv's.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from collections import defaultdict
from pathlib import Path

from gpuenv.errors import UserError
from gpuenv.modes import of
from gpuenv.pins import version_key
from gpuenv.results.schema import Record
from gpuenv.results.types import GIT_SHA, PACKAGE_NAME
from gpuenv.run.provenance import tracked_packages

ENV_NAME = "existing-gpuenv"


def machine_name(r: Record) -> str:
    m = r.where.machine
    gpu = "; ".join(g.name for g in m.gpus) or "nogpu"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", m.name or f"{m.cpu_model}-{m.cpu_logical}c-{gpu}").strip("-")


def tracked_libraries() -> tuple[str, ...]:
    """asv result params: every library a backend or mode declares (gpuenv itself is the commit)."""
    return tuple(p for p in tracked_packages() if p != "gpuenv")


def benchmark_name(r: Record) -> str:
    return of(r).asv_benchmark(r)


def value(r: Record) -> float:
    return of(r).asv_value(r)


def param(r: Record) -> str:
    return of(r).asv_param(r)


def commit_date_ms(repo: Path, sha: str) -> int | None:
    """The commit's date, or None where `sha` is no commit of `repo`. The sha is a record's (validated
    as hex by the record model, checked again here) and goes after --end-of-options: never an option."""
    if not re.fullmatch(GIT_SHA, sha):
        return None
    r = subprocess.run(["git", "show", "-s", "--format=%ct", "--end-of-options", sha], cwd=repo, capture_output=True, text=True)
    out = r.stdout.strip()
    return int(out) * 1000 if r.returncode == 0 and out.isdigit() else None


def release_timeline(records: list[Record], library: str, where: Path) -> dict[str, str]:
    """A git repository with one commit per release of `library` seen in the records (tagged
    `<library>-<version>`, in version order), so asv draws history against library versions. Returns
    {version: commit sha}. The records' `where.git.sha` is replaced by the release's commit."""
    check_library(library)
    versions = sorted({v for r in records if (v := r.where.packages.get(library))}, key=version_key)
    if not versions:
        raise UserError(f"no record says which {library} version it ran with")
    import os
    import shutil

    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    git = ["git", "-C", str(where), "-c", "user.name=gpuenv", "-c", "user.email=gpuenv@localhost"]
    run = functools.partial(subprocess.run, capture_output=True, text=True, check=True)
    shas = {}
    try:
        run([*git, "init", "-q", "-b", "main"])
        for i, v in enumerate(versions):
            date = f"2000-01-{i + 1:02d}T00:00:00+00:00"  # order only: asv needs dates, releases have none here
            env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "PATH": os.environ["PATH"]}
            run([*git, "commit", "-q", "--allow-empty", "-m", f"{library} {v}"], env=env)
            # the tag starts with the library's name (checked above): never an option; a version that
            # makes no valid tag (1..2) is still on the timeline, untagged
            subprocess.run([*git, "tag", f"{library}-{v}"], capture_output=True)
            shas[v] = run([*git, "rev-parse", "HEAD"]).stdout.strip()
    except subprocess.CalledProcessError as e:
        raise UserError(f"could not build the {library} release timeline in {where}: git {' '.join(e.cmd[7:9])} "
                        f"failed ({(e.stderr or '').strip()[:200]})") from None
    return shas


def write_config(results_dir: Path, library: str) -> Path:
    """asv-<library>.conf.json beside results_dir, for `asv publish` over the library's releases;
    returns the release timeline's repository (written by import_records)."""
    import json

    repo = results_dir.parent / f"timeline-{library}"
    conf = results_dir.parent / f"asv-{library}.conf.json"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(json.dumps({
        "version": 1, "project": f"gpuenv over {library} releases", "project_url": "https://github.com/gpuenv/gpuenv",
        "repo": str(repo.resolve()), "dvcs": "git", "branches": ["main"], "environment_type": "existing",
        "results_dir": str(results_dir.resolve()), "html_dir": str((results_dir.parent / f"html-{library}").resolve()),
    }, indent=2))
    return repo


def check_library(name: str) -> str:
    """A library name as --by-version takes it: a PEP 508 name, so it names a file and a git tag safely."""
    if not re.fullmatch(PACKAGE_NAME, name):
        raise UserError(f"--by-version {name!r}: not a package name (letters, digits, '.', '_', '-'), e.g. --by-version brax")
    return name


def _at_commit(r: Record, sha: str) -> Record:
    """A copy of the record that says it ran at `sha` (its place on a release timeline)."""
    where = r.where.model_copy(update={"git": r.where.git.model_copy(update={"sha": sha})})
    return r.model_copy(update={"where": where})


def import_records(records: list[Record], results_dir: Path, repo: Path, by_version: str | None = None) -> tuple[int, list[str]]:
    """Write asv results for every ok record whose commit is in `repo`; returns (results written,
    one message per record left out). With by_version, the records are placed on a release timeline
    of that library instead (see release_timeline) and `repo` is that timeline."""
    if by_version:
        shas = release_timeline(records, by_version, repo)
        records = [_at_commit(r, shas[v]) for r in records if (v := r.where.packages.get(by_version)) in shas]
    try:
        from asv.results import Results
        from asv.runner import BenchmarkResult
        from asv.util import write_json
    except ImportError:
        raise UserError("asv is not installed: pip install 'gpuenv[history]'") from None
    skipped: list[str] = []
    groups: dict[tuple[str, str, tuple], list[Record]] = defaultdict(list)
    libraries = tracked_libraries()
    for r in records:
        sha = r.where.git.sha
        if r.status != "ok" or not sha:
            skipped.append(f"{r.case_key} ({r.run_id}): {'not ok' if r.status != 'ok' else 'no commit recorded'}")
            continue
        versions = tuple((k, r.where.packages.get(k) or "none") for k in libraries)
        groups[(machine_name(r), sha, versions)].append(r)

    benchmarks: dict[str, dict] = {}
    # Every benchmark has one param axis: backend:variant@num_envs, over all records.
    axis: dict[str, set[str]] = defaultdict(set)
    for recs in groups.values():
        for r in recs:
            axis[benchmark_name(r)].add(param(r))
    for name, values in axis.items():
        benchmarks[name] = {
            "name": name,
            "type": "track",
            "unit": "seconds",
            "param_names": ["backend@num_envs"],
            "params": [[repr(v) for v in sorted(values)]],
            "version": "1",
            "timeout": 60,
            "code": "imported from gpuenv records (gpuenv asv-import)",
        }
    results_dir.mkdir(parents=True, exist_ok=True)
    write_json(results_dir / "benchmarks.json", benchmarks, api_version=2)

    written = 0
    for (machine, sha, versions), recs in groups.items():
        date = commit_date_ms(repo, sha)
        if date is None:
            skipped += [f"{r.case_key} ({r.run_id}): commit {sha[:8]} is not in {repo}" for r in recs]
            continue
        m = recs[0].where.machine
        machine_info = {
            "machine": machine,
            "os": m.os,
            "arch": "x86_64",
            "cpu": m.cpu_model or "",
            "num_cpu": str(m.cpu_logical or ""),
            "ram": f"{'' if m.memory_gib is None else m.memory_gib} GiB",
            "gpu": "; ".join(g.name for g in m.gpus) or "none",
            "driver": "; ".join(g.driver for g in m.gpus) or "none",
            "version": 1,
        }
        (results_dir / machine).mkdir(exist_ok=True)
        write_json(results_dir / machine / "machine.json", machine_info, api_version=1)
        params = {**machine_info, "python": m.python.rsplit(".", 1)[0], **dict(versions)}
        params.pop("version")
        res = Results(params, {}, sha, date, params["python"], ENV_NAME, {})
        by_bench: dict[str, dict[str, float]] = defaultdict(dict)
        for r in sorted(recs, key=lambda r: r.created_utc):
            by_bench[benchmark_name(r)][param(r)] = value(r)  # the latest record of a case counts
        for name, vals in by_bench.items():
            order = [ast.literal_eval(v) for v in benchmarks[name]["params"][0]]
            row = [vals.get(p, float("nan")) for p in order]
            res.add_result(benchmarks[name], BenchmarkResult(row, [None] * len(row), [None] * len(row), 0, "", None), record_samples=False)
            written += 1
        res.save(results_dir)
    return written, skipped

"""The gpuenv command line. Commands parse, call the library, render with rich.

Every user-fixable problem is one line on stderr and exit code 2 (never a traceback).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpuenv.errors import UserError
from gpuenv.escape import markup, terminal
from gpuenv.registry import default_registry

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="gpuenv: one harness for RL simulator throughput, the same in every backend.",
)
# Piped output (make, CI logs) gets a width the tables fit in; a terminal keeps its own.
# emoji=False: ":smile:" in a record is text, not a picture (markup() escapes the rest)
console = Console(width=None if sys.stdout.isatty() else 132, emoji=False)
err_console = Console(stderr=True, soft_wrap=True, highlight=False, emoji=False)  # one message, one line

DEFAULT_OUT = Path("results/local")
EXIT_USER_ERROR = 2
EXIT_CASE_FAILED = 1
EXIT_INTERRUPTED = 130


def only_cases(plan, keys: list[str]):
    """The plan cut down to these case keys (as `gpuenv dispatch` gives each array task its cases)."""
    known = {item.key for item in plan.items}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise UserError(f"--case {unknown[0]}: not a case of suite '{plan.suite}' with these filters "
                        f"(`gpuenv list` shows the suites; its cases: {', '.join(sorted(known)[:5])}{' ...' if len(known) > 5 else ''})")
    return replace(plan, items=[item for item in plan.items if item.key in set(keys)])


def checked_run_id(run_id: str) -> str:
    import re

    from gpuenv.results.types import IDENTIFIER

    if not re.fullmatch(IDENTIFIER, run_id):
        raise UserError(f"--run-id {run_id!r}: use letters, digits, '_', '.' or '-' (it names a directory and goes into every record)")
    return run_id


@app.command()
def bench(
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name in suites/ or a .toml path")] = "quick",
    backend: Annotated[
        list[str] | None, typer.Option("--backend", "-b", help="backend or backend:variant (repeatable)")
    ] = None,
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="task name (repeatable)")] = None,
    num_envs: Annotated[list[int] | None, typer.Option("--num-envs", "-n", help="replaces the suite's sizes")] = None,
    seeds: Annotated[int | None, typer.Option("--seeds", help="time-to-reward suites: seeds per case")] = None,
    out: Annotated[str, typer.Option("--out", "-o", help="records go to OUT/<run id>/")] = str(DEFAULT_OUT),
    case: Annotated[list[str] | None, typer.Option("--case", help="only these case keys of the plan (repeatable)")] = None,
    run_id_opt: Annotated[str | None, typer.Option("--run-id", help="write into this run (OUT/<run id>/, made if new) instead of a new one")] = None,
) -> None:
    """Run a suite (default: quick, on every backend available here) and print the tables."""
    from gpuenv.doctor import failures, in_gpu_image, run_checks
    from gpuenv.gpu import CPU_FALLBACK_HINT, cpu_ok
    from gpuenv.report.table import footnotes, tables
    from gpuenv.results.store import new_run_id, prepare_dir
    from gpuenv.run.runner import INTERRUPT, RunStopped, run_plan
    from gpuenv.suites import load_any

    if in_gpu_image():  # a GPU image checks its GPU, driver and JAX before measuring anything
        bad = failures(run_checks(), cpu_ok=cpu_ok())
        if bad:  # GPUENV_CPU_OK=1 lifts only "no GPU"; an old driver or a broken JAX stays an error
            hint = f"; {CPU_FALLBACK_HINT}" if bad[0].name == "gpu" else ""
            raise UserError(f"{bad[0].message}{hint}; `gpuenv doctor` shows every check")
    from gpuenv.results.schema import record_tags

    record_tags()  # a bad GPUENV_RECORD_TAGS: one line now, not after the first case ran
    registry = default_registry()
    for selector in backend or []:  # asked for by name but not installed: say how to install it
        reason = registry.parse(selector)[0].unavailable_reason()
        if reason:
            raise UserError(reason)
    mode, s = load_any(suite, registry, seeds=seeds)
    plan = mode.plan(s, registry, backends=backend, tasks=task, num_envs=num_envs)
    if case:
        plan = only_cases(plan, case)
    items: list = []
    unavailable: dict[str, None] = {}
    for item in plan.items:  # what this machine cannot run is said once, not recorded as failures
        info = registry.get(item.backend)
        reason = info.unavailable_reason() or mode.unavailable(item, registry)
        if reason is None:
            items.append(item)
        else:
            unavailable.setdefault(reason, None)
    if not items:
        why = [*plan.skipped, *unavailable]
        raise UserError(f"nothing to run in suite '{plan.suite}' on this machine"
                        + (f": {'; '.join(why[:3])}{' ...' if len(why) > 3 else ''}" if why else "") + "; see `gpuenv list`")
    keys = [item.key for item in items]
    run_id = checked_run_id(run_id_opt) if run_id_opt is not None else new_run_id()
    # the output folder is checked now; the run's own folder appears with its first record, so a
    # run killed before any case finished leaves no empty folder behind
    run_dir = prepare_dir(out_dir(out)) / run_id
    if run_dir.exists():  # --run-id of an existing run: it must take records too, before a case runs
        prepare_dir(run_dir)
    console.print(f"[bold]gpuenv bench[/] suite [cyan]{plan.suite}[/]: {len(keys)} cases ({plan.unit}), run {run_id}")
    for reason in unavailable:
        console.print(f"[yellow]skipped[/] {markup(reason)}")

    records: list[dict] = []
    interrupted = False
    stopped: RunStopped | None = None
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task("starting", total=len(keys))

        def on_event(kind: str, data: dict) -> None:
            if kind == "process_start":
                what = mode.process_word
                progress.update(bar, description=f"{keys[data['index']]} \\[{what} {data['process'] + 1}/{data['of']}]")
            elif kind == "process_done" and data["outcome"].failure and not mode.stop_after_failure:
                o = data["outcome"]
                progress.console.print(f"  {mode.process_word} {o.index}: [red]failed[/] {markup(o.failure['reason'])}", highlight=False)
            elif kind == "case_done":
                records.append(data["record"])
                r = data["record"]
                head = f"[{len(records)}/{len(keys)}] {r['case_key']}"
                if r["status"] != "ok":
                    progress.console.print(f"{head}: [red]{r['status']}[/] ({r['failure']['kind']}) {markup(r['failure']['reason'])}")
                else:
                    progress.console.print(f"{head}: {markup(mode.progress_line(r))}", highlight=False)
                progress.advance(bar)

        # Ctrl-C, SIGTERM and SIGHUP (a CI timeout, a closed terminal) take one path: workers run in
        # their own sessions and would not get the signal, so the handler kills the running worker and
        # the run stops after writing the interrupted case (see run.runner.Interrupt).
        previous = {sig: signal.signal(sig, INTERRUPT.handler) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            run_plan(mode, replace(plan, items=items), run_id=run_id, out_dir=run_dir, on_event=on_event)
            INTERRUPT.check()  # a signal after the last worker finished
        except KeyboardInterrupt:
            interrupted = True
        except RunStopped as e:
            stopped = e
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    for t in tables(records):
        console.print(t)
    for note in footnotes(records):
        console.print(f"[yellow]warning[/] {markup(note)}")
    for sk in plan.skipped:
        console.print(f"[dim]not run: {markup(sk)}[/]")
    failed = [r for r in records if r["status"] != "ok"]
    missed = [r for r in records if mode.missed(r)]
    console.print(f"{len(records)} records written to {markup(run_dir)}")
    if stopped is not None:
        for key in stopped.not_run:
            console.print(f"[red]not run[/] {key}")
        raise UserError(f"{stopped}; the run stopped: the {len(records)} records already written are kept in {run_dir}, "
                        f"{len(stopped.not_run)} case(s) not run (listed above)")
    if interrupted:
        done = sum(r["status"] != "interrupted" for r in records)
        raise Interrupted(f"interrupted by {INTERRUPT.cause()}: the {done} finished record(s) and the interrupted case's "
                          f"record are kept in {run_dir}" if done < len(records) else
                          f"interrupted by {INTERRUPT.cause()}: the {done} finished record(s) are kept in {run_dir}")
    if failed:
        err_console.print(f"{len(failed)} case(s) failed; their records say why (status 'failed')")
        raise typer.Exit(EXIT_CASE_FAILED)
    if missed:
        err_console.print(f"{len(missed)} case(s) missed their pass criterion (too few seeds reached the threshold)")
        raise typer.Exit(EXIT_CASE_FAILED)


def out_dir(value: str) -> Path:
    """An --out value as a path; empty is refused (pathlib would quietly take it as the current directory)."""
    if not value.strip():
        raise UserError("--out is empty; pass a directory, e.g. --out results/local")
    return Path(value)


@app.command("list")
def list_(
    what: Annotated[str, typer.Argument(help="backends | tasks | suites | all")] = "all",
) -> None:
    """Backends (available or not, and why), tasks (who offers each), suites."""
    from gpuenv.suites import available_suites, load_any
    from gpuenv.tasks import TASKS

    if what not in ("all", "backends", "tasks", "suites"):
        raise UserError(f"unknown list '{what}'; use one of: backends, tasks, suites, all")
    registry = default_registry()
    visible = registry.visible()
    if what in ("all", "backends"):
        t = Table(title="backends", title_justify="left")
        for col in ("backend", "variants", "steps on", "environment", "status"):
            t.add_column(col)
        for b in visible:
            reason = b.unavailable_reason()
            t.add_row(
                b.name,
                ", ".join(b.variants),
                "GPU (or CPU)" if b.device == "gpu" else "CPU",
                environment_status(b),
                "[green]available[/]" if reason is None else f"[yellow]{markup(reason)}[/]",
            )
        console.print(t)
    if what in ("all", "tasks"):
        t = Table(title="tasks (native env id per backend; - = not offered)", title_justify="left")
        t.add_column("task")
        for b in visible:
            t.add_column(b.name)
        for task in TASKS.values():
            cells = []
            for b in visible:
                nt = b.tasks.get(task.name)
                cells.append("-" if nt is None else (f"[dim]{nt.env_id} (unsupported)[/]" if nt.unsupported else nt.env_id))
            t.add_row(task.name, *cells)
        console.print(t)
    if what in ("all", "suites"):
        t = Table(title="suites", title_justify="left")
        t.add_column("suite")
        t.add_column("description")
        for name in available_suites():
            try:
                desc = markup(load_any(name, registry)[1].description)
            except UserError as e:
                desc = f"[red]{markup(str(e))}[/]"
            t.add_row(markup(name), desc)
        console.print(t)


def environment_status(b) -> str:
    """Which Python environment a backend's workers use, and whether it is built."""
    from gpuenv import envs

    e = b.environment
    if e is None:
        return "main install"
    if b.in_own_image():
        return f"own: Python {e.python}, this interpreter (its image, or a Python with its libraries)"
    lock = e.lock_path(envs.ROOT)
    if not lock.is_file():
        return f"[red]own (Python {e.python}): lock {e.lock} missing[/]"
    text = lock.read_text()
    state = "built" if envs.is_built(text, e.python) else "not built yet (built on first use)"
    return f"own: Python {e.python}, {e.lock}; {state}"


@app.command()
def info(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """The machine as the results will record it."""
    from gpuenv.run.provenance import provenance

    data = provenance()
    data["runtime"] = runtime_info()
    if as_json:
        console.print_json(json.dumps(data))
        return
    m = data["machine"]
    t = Table(title="machine", title_justify="left", show_header=False)
    t.add_row("cpu", markup(f"{m['cpu_model']} ({m['cpu_physical']} physical / {m['cpu_logical']} logical cores)"))
    t.add_row("memory", f"{m['memory_gib']} GiB")
    t.add_row("os / python", markup(f"{m['os']} / {m['python']}"))
    gpus = m["gpus"]
    t.add_row(
        "gpu",
        markup("; ".join(f"{g['name']} driver {g['driver']} CUDA {g['cuda_driver_api']}" for g in gpus))
        or "none (no nvidia-smi or no GPU visible)",
    )
    for k, v in data["runtime"].items():
        t.add_row(k, markup(v))
    t.add_row("git", f"{data['git']['sha']}{' (dirty)' if data['git']['dirty'] else ''}")
    console.print(t)
    v = Table(title="library versions", title_justify="left", show_header=False)
    for k, ver in data["packages"].items():
        v.add_row(k, markup(ver) if ver else "[dim]not installed[/]")
    console.print(v)
    if data["env"]:
        e = Table(title="environment variables that change speed", title_justify="left", show_header=False)
        for k, val in data["env"].items():
            e.add_row(markup(k), markup(val))
        console.print(e)


def runtime_info() -> dict:
    """JAX devices and torch threads, when those libraries are installed (imported only here)."""
    import importlib.util

    out: dict = {}
    if importlib.util.find_spec("jax"):
        try:
            import jax

            out["jax devices"] = ", ".join(f"{d.platform}:{d.device_kind}" for d in jax.devices())
        except Exception as e:  # noqa: BLE001 - report, do not crash `info`
            out["jax devices"] = f"error: {e}"
    if importlib.util.find_spec("torch"):
        import torch

        out["torch threads"] = torch.get_num_threads()
        out["torch cuda"] = torch.cuda.is_available()
    return out


@app.command()
def show(
    paths: Annotated[list[str], typer.Argument(help="record files or run directories")],
    as_markdown: Annotated[bool, typer.Option("--markdown", help="one markdown table (for READMEs)")] = False,
) -> None:
    """Print the tables of stored records (validated on read)."""
    from gpuenv.history.load import load_records
    from gpuenv.report.table import footnotes, markdown, tables

    records, problems = load_records(paths)
    print_skipped(problems)
    if as_markdown:
        print(terminal(markdown(records), multiline=True))
        return
    for t in tables(records):
        console.print(t)
    for note in footnotes(records):
        console.print(f"[yellow]warning[/] {markup(note)}")


def print_skipped(problems: list[str]) -> None:
    """What a reader left out and why, one line each (file names and record text escaped)."""
    for msg in problems:
        err_console.print(f"[yellow]skipped[/] {markup(msg)}")


@app.command()
def doctor(
    cpu_ok: Annotated[bool, typer.Option("--cpu-ok", help="a machine without a GPU passes (CPU backends only)")] = False,
) -> None:
    """Check the GPU, driver (against the image's minimum), JAX's backend, torch's CUDA, Isaac Sim's Vulkan."""
    from gpuenv.doctor import failures, in_gpu_image, run_checks
    from gpuenv.gpu import CPU_FALLBACK_HINT
    from gpuenv.gpu import cpu_ok as cpu_ok_env

    cpu_ok = cpu_ok or cpu_ok_env()
    checks = run_checks()
    colour = {"ok": "green", "fail": "red", "skip": "dim"}
    for c in checks:
        status = "skip" if cpu_ok and c.name == "gpu" and c.status == "fail" else c.status
        console.print(f"[{colour[status]}]{status:4}[/] {c.name:7} {markup(c.message)}", highlight=False)
    bad = failures(checks, cpu_ok)
    if bad:
        for c in bad:  # in a GPU image, no GPU: the one line also says how to measure on the CPU instead
            hint = f"; {CPU_FALLBACK_HINT}" if c.name == "gpu" and in_gpu_image() else ""
            error_line(f"{c.message}{hint}")
        raise typer.Exit(EXIT_USER_ERROR)
    if cpu_ok and any(c.name == "gpu" and c.status == "fail" for c in checks):
        console.print("no GPU here: fine for the CPU backends (--cpu-ok)")


@app.command()
def images(
    action: Annotated[str | None, typer.Argument(help="build: build images with any Docker engine")] = None,
    names: Annotated[list[str] | None, typer.Argument(help="with build: which images (default: all)")] = None,
    bake: Annotated[bool, typer.Option("--bake", help="print the docker buildx bake file (JSON) and exit")] = False,
    locks: Annotated[bool, typer.Option("--locks", help="regenerate docker/locks/*.txt with uv")] = False,
    build: Annotated[str | None, typer.Option("--build", help="build this image (same as `images build NAME`)")] = None,
    pin: Annotated[list[str] | None, typer.Option("--pin", help="with build: library version, e.g. brax==0.13.0")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="with build: write the lock, print the commands")] = False,
) -> None:
    """The per-backend Docker images: base image, CUDA, pinned versions, minimum driver; `build` builds them."""
    from gpuenv import images as im
    from gpuenv.images import bake_text, base_of, locked_versions, write_locks
    from gpuenv.modes import all_modes

    if locks and action is not None and action != "build":  # `gpuenv images --locks NAME ...`
        names = [action, *(names or [])]
        action = None
    if action not in (None, "build"):
        raise UserError(f"unknown images action '{action}'; use `gpuenv images build [NAMES]` or `gpuenv images`")
    if build or action == "build":
        build_images(([build] if build else []) + list(names or []), pin or [], dry_run)
        return
    if bake:
        print(bake_text(), end="")
        return
    if locks:
        for name in names or []:
            im.get_image(name)
        for path in write_locks(list(names) if names else None):
            console.print(f"wrote {markup(path)}")
        return
    t = Table(title="images (docker/; build with `make images`)", title_justify="left")
    for col in ("image", "base", "CUDA", "min driver", "pinned versions", "verified"):
        t.add_column(col)
    from gpuenv.images import ROOT

    for img in im.images().values():
        v = locked_versions(img)
        wanted = dict.fromkeys((*img.packages, *(p for m in all_modes() for p in m.packages)))
        shown = [f"{k} {v[k]}" for k in wanted if k in v]
        base = base_of(ROOT / img.dockerfile) if not img.base_target else base_of(ROOT / "docker/base.Dockerfile")
        t.add_row(img.tag, base.split("@")[0], img.cuda or "-", img.min_driver or "-", ", ".join(shown) or "(framework's own)",
                  "yes" if img.verified else "[yellow]NOT VERIFIED: never built or run here[/]")
    console.print(t)


def build_images(names: list[str], pins: list[str], dry_run: bool) -> None:
    """`gpuenv images build`: plain `docker build` in dependency order, BuildKit on; the base from the
    pinned reference, or a local debootstrap one where it cannot be pulled."""
    import subprocess
    import time

    from gpuenv import images as im
    from gpuenv.pins import exact_pin

    for n in names:
        im.get_image(n)
    pins = ["==".join(exact_pin(p, f"--pin {p!r}")) for p in pins]
    if pins:
        if len(names) != 1:
            raise UserError("--pin builds one image: name it, e.g. `gpuenv images build brax --pin brax==0.13.0`")
        (lock,) = im.write_locks(names, pins)
        console.print(f"wrote {markup(lock)}")
    if dry_run:
        for _, cmd in im.build_commands(names, "docker", {}, pins):
            console.print(terminal(shlex.join(cmd)), highlight=False, markup=False, soft_wrap=True)
        return
    why = im.docker_status(gpu=False)
    if why:
        raise UserError(f"cannot build images here: {why}")
    docker = im.build_client()
    bases = {}
    for pinned, python in im.python_bases(names).items():
        bases[pinned], source = im.base_image(docker, pinned, python)
        console.print(f"base image: {markup(bases[pinned])} ({markup(source)})", highlight=False)
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    rows = []
    for name, cmd in im.build_commands(names, docker, bases, pins):
        console.print(f"[bold]building {name}[/]: {markup(shlex.join(cmd))}", highlight=False, soft_wrap=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, cwd=im.ROOT, env=env)
        took = time.perf_counter() - t0
        ref = cmd[cmd.index("-t") + 1]
        size = im.image_size(docker, ref) if rc == 0 else None
        rows.append((name, rc, took, size))
        if rc != 0:
            break  # later images build on this one, or would fail the same way
    t = Table(title="images built", title_justify="left")
    for col in ("image", "result", "build s", "size"):
        t.add_column(col)
    for name, rc, took, size in rows:
        t.add_row(name, "[green]ok[/]" if rc == 0 else f"[red]failed (exit {rc})[/]", f"{took:.0f}", f"{size / 1e9:.2f} GB" if size else "-")
    console.print(t)
    failed = [r for r in rows if r[1] != 0]
    if failed:
        raise UserError(f"building {failed[0][0]} failed (docker build exited {failed[0][1]}; its output is above)")


@app.command()
def dispatch(
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name in suites/ or a .toml path")] = "quick",
    backend: Annotated[list[str] | None, typer.Option("--backend", "-b", help="backend or backend:variant (repeatable)")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="task name (repeatable)")] = None,
    num_envs: Annotated[list[int] | None, typer.Option("--num-envs", "-n", help="replaces the suite's sizes")] = None,
    executor: Annotated[str, typer.Option("--executor", help="slurm (sbatch arrays) or local (this machine)")] = "slurm",
    partition: Annotated[str | None, typer.Option("--partition", help="Slurm partition")] = None,
    gpus_per_task: Annotated[int, typer.Option("--gpus-per-task", help="GPUs per array task (GRES)")] = 0,
    cpus_per_task: Annotated[int | None, typer.Option("--cpus-per-task", help="CPUs per array task")] = None,
    exclusive: Annotated[bool, typer.Option("--exclusive", help="a whole node per task (what a benchmark wants)")] = False,
    container: Annotated[str, typer.Option("--container", help="none, docker, apptainer or pyxis")] = "none",
    image: Annotated[str | None, typer.Option("--image", help="image reference (default gpuenv/<backend>:latest) or a .sif")] = None,
    array_parallelism: Annotated[int, typer.Option("--array-parallelism", help="tasks running at once")] = 1,
    cases_per_task: Annotated[int, typer.Option("--cases-per-task", help="cases batched into one array task")] = 1,
    time_min: Annotated[int, typer.Option("--time-min", help="time limit per task, minutes")] = 60,
    out: Annotated[str, typer.Option("--out", "-o", help="the shared results directory: records go to OUT/<run id>/")] = "results/dispatch",
    attach: Annotated[str | None, typer.Option("--attach", help="pick up a dispatch by its job id (after the submitting command died)")] = None,
    rerun: Annotated[Path | None, typer.Option("--rerun", help="a dispatch's run directory: submit only its cases with no ok record")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the tasks and the command each would run; submit nothing")] = False,
    sweep: Annotated[str | None, typer.Option("--sweep", help="PACKAGE==V1,V2,...: every case once per version set (gpuenv sweep's environments)")] = None,
    with_: Annotated[list[str] | None, typer.Option("--with", help="with --sweep: extra pin for every set (repeatable)")] = None,
) -> None:
    """Run a suite's cases as array tasks on Slurm (or submitit's local executor), then print its tables."""
    from gpuenv import dispatch as dsp
    from gpuenv.report.table import footnotes, tables
    from gpuenv.results.store import new_run_id, prepare_dir
    from gpuenv.suites import load_any

    registry = default_registry()
    if attach or rerun:
        if attach and rerun:
            raise UserError("--attach and --rerun are two different things; pass one")
        run_dir = dsp.find_job(out_dir(out), attach) if attach else Path(str(rerun))
        d = dsp.Dispatch.load(run_dir)
        mode, s = load_any(d.suite, registry)
        plan = mode.plan(s, registry, **d.filters)
    else:
        options = dsp.Options(executor, partition, gpus_per_task, cpus_per_task, exclusive, container, image,
                              array_parallelism, cases_per_task, time_min).check()
        if container != "none" and (suite.endswith(".toml") or "/" in suite):
            raise UserError(f"--container {container}: pass a suite by name (the image has the same suites/); "
                            f"a file like {suite} is not inside the container")
        mode, s = load_any(suite, registry)
        sets: list[tuple[str, str | None, dict | None]] = [("", None, None)]
        if sweep:
            from gpuenv.history.sweep import parse_spec
            from gpuenv.pins import parse_with

            package = parse_spec(sweep)[0]
            owner = registry.by_library(package)
            if container != "none":
                raise UserError("--sweep runs each version set in its own environment on a shared filesystem: use --container none")
            if owner is None and not backend:
                raise UserError(f"which backend does {package} belong to? pass --backend (one of: {', '.join(b.name for b in registry.visible())})")
            if backend and len(backend) > 1:
                raise UserError("--sweep builds one environment per version set for one backend: pass one --backend")
            backend = backend or [owner.name] if owner else backend
        filters = {"backends": backend, "tasks": task, "num_envs": num_envs}
        plan = mode.plan(s, registry, **filters)
        if not plan.items:
            raise UserError(f"nothing to dispatch in suite '{plan.suite}' with these filters; see `gpuenv list`")
        if executor == "slurm" and not dry_run and not shutil.which("sbatch"):
            raise UserError("--executor slurm: sbatch is not on PATH (no Slurm client here); --executor local runs the same tasks on this machine")
        if sweep:
            sets = dsp.version_sets(sweep, parse_with(with_ or []), registry.parse((backend or [""])[0])[0].name, console)
        run_id = new_run_id()
        tasks = [dsp.Task(i, b, keys, version_set=label, python=py, tags=tags)
                 for i, (label, py, tags, b, keys) in enumerate(
                     (label, py, tags, b, keys) for label, py, tags in sets for b, keys in dsp.batches(plan.items, cases_per_task))]
        d = dsp.Dispatch(run_id, suite, str(out_dir(out) / run_id), options, tasks, dsp.now_utc(), filters=filters)
    items = {item.key: item for item in plan.items}
    if dry_run:
        for t in d.tasks:
            console.print(f"task {t.index} ({t.backend}): {markup(shlex.join(dsp.command_line(dsp.task_spec(d, t), '<facts>')))}", highlight=False)
        console.print(f"{len(d.tasks)} task(s), {len(items)} case(s); nothing submitted (--dry-run)")
        return
    if rerun:
        still = dsp.live(d)
        if still:
            raise UserError(f"{run_dir}: task(s) {', '.join(str(t.index) for t in still)} may still write records; "
                            f"`gpuenv dispatch --attach {d.job_id} --out {d.run_dir.parent}` waits for them, then --rerun")
        have = dsp.latest_ok(d)
        new: list[dsp.Task] = []
        gone = sorted({t.python for t in d.tasks if t.python and not Path(t.python).exists()})
        if gone:
            raise UserError(f"{run_dir}: the sweep's environment {gone[0]} is gone (gpuenv's cache was cleared); "
                            "dispatch the sweep again")
        for first in {t.version_set: t for t in reversed(d.tasks)}.values():  # each version set's environment once
            missing = [it for k, it in items.items() if (first.version_set, k) not in have and any(k in t.cases for t in d.tasks)]
            new += [dsp.Task(len(d.tasks) + len(new) + i, b, keys, version_set=first.version_set, python=first.python, tags=first.tags)
                    for i, (b, keys) in enumerate(dsp.batches(missing, d.options.cases_per_task))]
        if not new:
            console.print(f"every case of {markup(run_dir)} has an ok record: nothing to rerun")
            return
        missing = [k for t in new for k in t.cases]
        d.tasks += new
        d.reruns.append(dsp.now_utc())
        dsp.submit(d, new)
        console.print(f"rerun of {len(missing)} case(s) in {len(new)} task(s), job {new[0].job_id.split('_')[0] if new[0].job_id else '-'}")
    elif not attach:
        prepare_dir(d.run_dir)
        d.save()
        dsp.submit(d, d.tasks)
        console.print(f"[bold]gpuenv dispatch[/] suite [cyan]{markup(plan.suite)}[/]: {len(items)} cases in {len(d.tasks)} "
                      f"task(s), {d.options.executor} job {d.job_id}, run {d.run_id}")
    else:
        console.print(f"attached to job {markup(attach)}: run {markup(d.run_id)}, {len(d.tasks)} task(s)")
    try:
        dsp.wait(d, console)
    except KeyboardInterrupt:
        if d.options.executor == "local":  # local tasks are this command's children: they stop with it
            raise Interrupted(f"interrupted: the local tasks stop with this command; records so far are in {d.run_dir}; "
                              f"`gpuenv dispatch --rerun {d.run_dir}` runs the rest") from None
        raise Interrupted(f"detached: the tasks go on in Slurm; `gpuenv dispatch --attach {d.job_id} --out {d.run_dir.parent}` "
                          "picks the job up again") from None
    records = [r for r in dsp.finish(d, mode, plan, warn=lambda m: console.print(f"[yellow]warning[/] {markup(m)}")) if r["case_key"] in items]
    for label in dict.fromkeys(t.version_set for t in d.tasks):  # one set of tables per version set of a sweep
        if label:
            console.print(f"[bold]{markup(label)}[/]")
        for table in tables([r for r in records if dsp.slot(r)[0] == label]):
            console.print(table)
    for note in footnotes(records):
        console.print(f"[yellow]warning[/] {markup(note)}")
    failed = [r for r in records if r["status"] != "ok"]
    console.print(f"{len(records)} records in {markup(d.run_dir)}")
    if failed:
        err_console.print(f"{len(failed)} case(s) failed; their records say why; `gpuenv dispatch --rerun {markup(d.run_dir)}` reruns only those")
        raise typer.Exit(EXIT_CASE_FAILED)


@app.command("bench-image")
def bench_image(
    backend: Annotated[str, typer.Argument(help="a backend with an image (see `gpuenv images`)")],
    local: Annotated[bool, typer.Option("--local", help="no Docker: run the same suite on this machine")] = False,
    suite: Annotated[str | None, typer.Option("--suite", "-s", help="default: the backend's own suite (quick for most)")] = None,
    out: Annotated[str, typer.Option("--out", "-o", help="with --local: records go to OUT/<run id>/")] = str(DEFAULT_OUT),
) -> None:
    """Run a backend's suite in its image (building it if needed), or locally with --local."""
    from gpuenv.images import docker_run_command, get_image

    img = get_image(backend)
    suite = suite or img.suite or default_registry().get(img.backend).suite
    if local:
        from gpuenv.gpu import nvidia_smi

        gpus, why = nvidia_smi()
        where = (f"GPU here: {gpus[0]['name']}" if gpus else
                 f"no GPU here ({why}): {img.backend} runs on the CPU, so these are CPU numbers, not what its image measures on a GPU")
        console.print(f"[bold]{img.backend}[/]: suite {markup(suite)} on this machine (LOCAL=1), not in gpuenv/{img.name}; {markup(where)}",
                      highlight=False)
        bench(suite=suite, backend=[img.backend], task=None, num_envs=None, seeds=None, out=out)
        return
    from gpuenv.images import is_built, runnable_here

    runnable_here(img)  # no engine, or no NVIDIA runtime for a GPU image: one line, before any build
    if not is_built(img):
        build_images([img.name], [], False)
    cmd = docker_run_command(img, suite, Path.cwd() / "results")
    console.print(terminal(" ".join(cmd)), highlight=False, markup=False)
    import subprocess

    raise typer.Exit(subprocess.call(cmd))


@app.command()
def compare(
    old: Annotated[list[str], typer.Argument(help="OLD record files or result directories", show_default=False)],
    new: Annotated[str, typer.Argument(help="NEW record file or result directory")],
    threshold: Annotated[float, typer.Option("--threshold", help="exit 1 when a case is slower by more than this fraction")] = 0.10,
    allow_different: Annotated[bool, typer.Option("--allow-different", help="compare across hardware or drivers")] = False,
    by_case: Annotated[bool, typer.Option("--by-case", help="pair records by case key, even of different workloads (settings, physics)")] = False,
) -> None:
    """NEW/OLD per workload with a 95% interval and a verdict; exit 1 when a case regressed past --threshold."""
    from gpuenv.history.compare import compare_case, differences, match, memory_rows, speed_differences, version_changes
    from gpuenv.history.load import load_records

    if not 0 <= threshold < 1:
        raise UserError(f"--threshold must be a fraction in [0, 1) (got {threshold}); 0.1 means 10%")
    old_recs, p1 = load_records(old, "OLD records")
    new_recs, p2 = load_records([new], "NEW records")
    print_skipped(p1 + p2)
    diff = differences(old_recs, new_recs)
    if diff and not allow_different:
        fields = "; ".join(f"{k}: {a} vs {b}" for k, a, b in ((k, *v) for k, v in diff.items()))
        raise UserError(f"the runs differ in {fields}; such runs are not comparable (--allow-different compares anyway)")
    pairs, only_old, only_new = match(old_recs, new_recs, by="case" if by_case else "workload")
    if not pairs:
        raise UserError(
            "OLD and NEW have no ok record of the same workload in common (compare runs of the same suite; "
            "--by-case pairs by case key across measurement settings)"
        )
    apart, no_fingerprint = speed_differences(pairs)
    if apart and not allow_different:
        key, why = apart[0]
        raise UserError(
            f"the machine's reference speed differs between OLD and NEW in {len(apart)} of {len(pairs)} cases "
            f"(first, {key}: {why}): as if measured on different machines, so a change would not be gpuenv's or the "
            "library's (--allow-different compares anyway)"
        )
    rows = [compare_case(a, b, threshold) for a, b in pairs]
    mem_rows = [m for a, b in pairs for m in memory_rows(a, b, threshold)]
    t = Table(title="NEW vs OLD, 95% interval", title_justify="left")
    for col in ("case", "measure", "OLD", "NEW", "NEW/OLD", "95% interval", "verdict"):
        t.add_column(col)
    colour = {"faster": "green", "slower": "red", "less memory": "green", "more memory": "red"}
    for r in sorted(rows + mem_rows, key=lambda r: (r.case_key, r in mem_rows)):
        v = f"[{colour.get(r.verdict, 'white')}]{r.verdict}{' (REGRESSION)' if r.regressed else ''}[/]"
        t.add_row(r.case_key, r.unit, f"{r.old:,.1f}", f"{r.new:,.1f}", f"{r.ratio:.3f}", f"{r.ci_low:.3f}-{r.ci_high:.3f}", v)
    console.print(t)
    for k, (a, b) in version_changes(old_recs, new_recs).items():
        console.print(f"[dim]version {markup(k)}: {markup(a)} -> {markup(b)}[/]")
    if diff:
        console.print(f"[yellow]warning[/] compared across: {markup(', '.join(diff))}")
    if apart:
        console.print(f"[yellow]warning[/] compared across machine speeds in {len(apart)} case(s), e.g. {apart[0][0]}: {markup(apart[0][1])}")
    if no_fingerprint:
        console.print(f"[yellow]warning[/] {no_fingerprint} pair(s) have no machine-speed fingerprint on one side (records "
                      "written before gpuenv measured one): a faster or slower machine cannot be told from a code change there")
    for key in only_old:
        console.print(f"[dim]only in OLD: {key}[/]")
    for key in only_new:
        console.print(f"[dim]only in NEW: {key}[/]")
    regressed = [r for r in rows if r.regressed]
    mem_regressed = [r for r in mem_rows if r.regressed]
    n = {v: sum(r.verdict == v for r in rows) for v in ("faster", "slower", "no detectable change")}
    console.print(
        f"{len(rows)} cases: {n['faster']} faster, {n['slower']} slower, {n['no detectable change']} no detectable change; "
        f"{len(regressed)} regressed by more than {100 * threshold:g}%",
        highlight=False,
    )
    if mem_rows:
        m = {v: sum(r.verdict == v for r in mem_rows) for v in ("less memory", "more memory")}
        console.print(f"{len(mem_rows)} memory peaks: {m['less memory']} less, {m['more memory']} more; "
                      f"{len(mem_regressed)} grew by more than {100 * threshold:g}%", highlight=False)
    if regressed or mem_regressed:
        if regressed:
            err_console.print(f"regression: {', '.join(r.case_key for r in regressed)} slower by more than {100 * threshold:g}%")
        for r in mem_regressed:
            err_console.print(f"regression: {r.case_key} uses {100 * (r.ratio - 1):.0f}% more {r.unit.rsplit(' ', 1)[0]} "
                              f"({r.old:,.0f} -> {r.new:,.0f} {r.unit.rsplit(' ', 1)[1]})")
        raise typer.Exit(EXIT_CASE_FAILED)


@app.command()
def regressions(
    paths: Annotated[list[str] | None, typer.Argument(help="result directories (default: results/)")] = None,
    min_change: Annotated[float, typer.Option("--min-change", help="smallest relative change reported")] = 0.05,
    by_version: Annotated[str | None, typer.Option("--by-version", help="order each history by this library's version, e.g. brax")] = None,
) -> None:
    """Change points in each case's history (lower steps/s or longer time-to-reward = regression)."""
    import math

    from gpuenv.history.changepoints import detect
    from gpuenv.history.load import load_records
    from gpuenv.history.regress import describe, series_by_case

    if not (math.isfinite(min_change) and 0 <= min_change < 10):
        raise UserError(f"--min-change must be a fraction in [0, 10) (got {min_change}); 0.05 means 5%")

    records, problems = load_records(paths or ["results"], "records")
    print_skipped(problems)
    t = Table(title="change points (permutation test of the best split, p < 0.01)", title_justify="left")
    for col in ("case", "at run", "before", "after", "change", "kind", "what changed"):
        t.add_column(col)
    found = 0
    series = series_by_case(records, by_version)
    for key, points in sorted(series.items()):
        for cp in detect([v for v, _ in points], min_change=min_change):
            found += 1
            t.add_row(*map(markup, describe(key, points, cp)))
    if found:
        console.print(t)
    console.print(f"{found} change point(s) in {len(series)} case histories ({len(records)} records)")


@app.command()
def report(
    paths: Annotated[list[str] | None, typer.Argument(help="record files or directories (default: results/)")] = None,
    out: Annotated[str, typer.Option("--out", "-o", help="site directory")] = "results/site",
    num_envs: Annotated[int | None, typer.Option("--num-envs", help="num_envs of the backend comparison")] = None,
) -> None:
    """Build the static report site (HTML + PNG, works offline) from stored records."""
    from gpuenv.history.load import load_records
    from gpuenv.report.site import build

    site = out_dir(out)
    if site.exists() and not site.is_dir():
        raise UserError(f"--out {out}: a file is there; the site is a folder of pages (pass a new or existing directory)")
    if num_envs is not None and num_envs < 1:
        raise UserError(f"--num-envs must be >= 1 (got {num_envs})")
    inputs = [Path(p).resolve() for p in paths or ["results"] if str(p).strip()]
    if any(site.resolve() == p or site.resolve() in p.parents for p in inputs):
        raise UserError(f"--out {out} holds the records it reads: the site marks its folder as gpuenv's output, which readers "
                        "skip; pass a folder inside or beside them (default results/site)")
    records, problems = load_records(paths or ["results"], "records")
    print_skipped(problems)
    sizes = sorted({r["case"]["num_envs"] for r in records if r["status"] == "ok"})
    if num_envs is not None and num_envs not in sizes:
        raise UserError(f"--num-envs {num_envs}: no ok record at that size (measured: {', '.join(map(str, sizes)) or 'none'})")
    try:
        index = build(records, site, num_envs)
    except OSError as e:
        raise UserError(f"cannot write the site to {out}: {os_error_text(e)}") from None
    console.print(f"wrote {markup(index)} ({len(records)} records)")


@app.command()
def claims(
    paths: Annotated[list[str] | None, typer.Argument(help="record files or directories (default: results/)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Every published claim in claims/register.toml beside its closest measured case, or the run it needs."""
    from gpuenv import claims as cl
    from gpuenv.history.load import load_records

    records, problems = load_records(paths or ["results"], "records")
    print_skipped(problems)
    results = cl.check_all(records)
    if as_json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
        return
    for line in cl.text_report(results, cl.register_path()):
        console.print(terminal(line), highlight=False, markup=False, soft_wrap=True)


@app.command()
def decide(
    task: Annotated[str, typer.Option("--task", "-t", help="the task (gpuenv list tasks)")],
    budget: Annotated[str, typer.Option("--budget", help="env steps per run: 50M, 1B, 2e7 ...")],
    configs: Annotated[int, typer.Option("--configs", help="runs (hyperparameter configs), one after another")] = 1,
    results: Annotated[list[str] | None, typer.Option("--results", help="record files or directories (default: results/)")] = None,
) -> None:
    """The course's decision table, answered from measured records: wall-clock to the budget per backend, the row, the framework."""
    from gpuenv.decide import decide as run_decide
    from gpuenv.decide import parse_steps
    from gpuenv.format import duration
    from gpuenv.history.load import load_records
    from gpuenv.tasks import get_task

    get_task(task)  # an unknown task: one line naming the known ones
    steps = parse_steps(budget)
    records, problems = load_records(results or ["results"], "records")
    print_skipped(problems)
    d = run_decide(task, steps, configs, records)
    t = Table(title=f"{task}: {configs} x {steps:,} env steps, from records of {markup(d.machine)}", title_justify="left")
    for col in ("backend", "envs", "env steps/s", "startup+compile s", "wall-clock to budget", "with PPO training"):
        t.add_column(col)
    for o in d.options:
        tw = o.train_wall_s(steps, configs)
        t.add_row(o.selector, str(o.num_envs), f"{o.rate:,.0f} ({o.ci[0]:,.0f}-{o.ci[1]:,.0f})", f"{o.fixed_s:.1f}",
                  duration(o.wall_s(steps, configs)), duration(tw) if tw else "-")
    console.print(t)
    console.print(f"[bold]row[/]: {markup(d.row)}", highlight=False)
    console.print(f"[bold]answer[/]: {markup(d.answer)}", highlight=False)
    for w in d.why:
        console.print(f"  why: {terminal(w)}", highlight=False, markup=False)
    for n in d.needs_gpu:
        console.print(f"  needs GPU measurements: {terminal(n)}", highlight=False, markup=False)


@app.command("asv-import")
def asv_import(
    paths: Annotated[list[str], typer.Argument(help="record files or result directories")],
    results_dir: Annotated[Path, typer.Option("--results-dir", help="asv results_dir")] = Path("results/asv/results"),
    by_version: Annotated[str | None, typer.Option("--by-version", help="library whose releases form the x axis, e.g. brax")] = None,
) -> None:
    """Write asv result files from gpuenv records (then `asv publish` draws the history)."""
    from gpuenv.history.asv_import import check_library, import_records, write_config
    from gpuenv.history.load import load_records

    if by_version is not None:
        check_library(by_version)
    records, problems = load_records(paths, "records")
    print_skipped(problems)
    repo = write_config(results_dir, by_version) if by_version else Path.cwd()
    written, skipped = import_records(records, results_dir, repo, by_version)
    not_ok = [m for m in skipped if m.endswith(": not ok")]
    for msg in skipped:
        if msg not in not_ok:
            err_console.print(f"[yellow]not imported[/] {markup(msg)}")
    if not_ok:  # failed cases have no number to chart: expected, said once
        console.print(f"[dim]{len(not_ok)} record(s) of failed cases left out (asv charts numbers only)[/]")
    if not written:
        raise UserError("no record could be imported (each needs status ok and a commit in this repository)")
    how = f"asv publish --config {results_dir.parent / f'asv-{by_version}.conf.json'}" if by_version else "asv publish"
    console.print(f"wrote {written} asv results to {markup(results_dir)}; now `{markup(how)}`")


@app.command()
def sweep(
    spec: Annotated[str, typer.Argument(help="PACKAGE==V1,V2,... e.g. brax==0.12.1,0.13.0,0.14.2")],
    suite: Annotated[str, typer.Option("--suite", "-s")] = "quick",
    with_: Annotated[list[str] | None, typer.Option("--with", help="extra pin for every set, e.g. 'numpy<2' (repeatable)")] = None,
    backend: Annotated[str | None, typer.Option("--backend", "-b", help="default: the package's backend")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", "-t")] = None,
    out_: Annotated[str, typer.Option("--out", "-o")] = "results/sweeps",
) -> None:
    """Run the same suite under several versions of a library, each in its own cached environment."""
    from gpuenv.history import sweep as sw
    from gpuenv.history.compare import compare_case
    from gpuenv.pins import parse_with
    from gpuenv.results.store import new_run_id

    out = out_dir(out_)
    package, versions = sw.parse_spec(spec)
    pins = parse_with(with_ or [])
    registry = default_registry()
    owner = registry.by_library(package)
    name = backend or (owner.name if owner else None)
    if name is None:
        raise UserError(f"which backend does {package} belong to? pass --backend (one of: {', '.join(b.name for b in registry.visible())})")
    registry.parse(name)
    from gpuenv.modes import of
    from gpuenv.suites import load_any

    load_any(suite, registry)  # a bad suite name fails here, before any environment is built
    sweep_id = new_run_id()
    bench_args = ["--suite", suite, "--backend", name, *[a for t in task or [] for a in ("--task", t)]]
    sets = [sw.version_set(package, v, pins, name.split(":")[0]) for v in versions]
    console.print(f"[bold]gpuenv sweep[/] {package} over {', '.join(versions)} ({suite} suite, backend {name}), sweep {sweep_id}")
    for vs in sets:
        sw.prepare(vs)
        how = "reused the cached environment" if vs.reused else "resolved and built the environment"
        if vs.status != "ready":
            console.print(sw.not_ready_line(vs), highlight=False)
            continue
        console.print(f"{markup(vs.label)}: {how} in {vs.setup_s:.1f} s ({markup(vs.env_dir)})", highlight=False)
        sw.run(vs, sweep_id, bench_args, out)
    labels = [vs.label for vs in sets]
    series = sw.collect(sets)
    t = Table(title=f"{package}: each case across versions (headline [95% interval]; adjacent verdicts)", title_justify="left")
    t.add_column("case")
    for lbl in labels:
        t.add_column(lbl)
    for key, pts in sorted(series.items()):
        by = dict(pts)
        cells = []
        prev = None
        for lbl in labels:
            r = by.get(lbl)
            if r is None or r["status"] != "ok":
                short = r["failure"]["kind"] if r else "-"
                cells.append(f"[red]{short}[/]" if r else "-")
                prev = None
                continue
            h = of(r).headline(r)
            cell = f"{h.value:,.0f} [{h.ci_low:,.0f}-{h.ci_high:,.0f}] {h.unit}"
            if prev is not None:
                c = compare_case(prev, r, 0.10)
                mark = {"faster": "[green]faster[/]", "slower": "[red]slower[/]"}.get(c.verdict, "no detectable change")
                cell += f"\n{mark} {100 * c.change_pct:+.0f}%"
            cells.append(cell)
            prev = r
        t.add_row(key, *cells)
    console.print(t)
    for vs in sets:
        if vs.status.startswith("ran"):
            shown = {k: vs.versions.get(k) for k in (package, "jax", "jaxlib", "numpy", "mujoco") if vs.versions.get(k)}
            console.print(f"[dim]{markup(vs.label)}: {vs.status}; resolved {markup(shown)}; records in {markup(vs.run_dir)}[/]", highlight=False)
    if series:
        try:
            sw.plot(series, labels, out / sweep_id / "sweep.png")
            console.print(f"plot: {markup(out / sweep_id / 'sweep.png')}")
        except ImportError:
            console.print("[dim]no plot: matplotlib is not installed (pip install 'gpuenv[history]')[/]")
    bad = [vs for vs in sets if not vs.status.startswith("ran")]
    if bad:
        err_console.print(f"{len(bad)} version set(s) did not run: {markup(', '.join(f'{vs.label} ({vs.status})' for vs in bad))}")
        raise typer.Exit(EXIT_CASE_FAILED)


@app.command("export-gab")
def export_gab(
    src: Annotated[Path, typer.Argument(help="pytest-benchmark JSON (--benchmark-json)")],
    dst: Annotated[Path, typer.Argument(help="github-action-benchmark customBiggerIsBetter JSON to write")],
) -> None:
    """Convert `make bench-pytest` output for github-action-benchmark (env steps/s, bigger is better)."""
    from gpuenv.history.gab import export

    n = export(src, dst)
    console.print(f"wrote {n} benchmarks to {markup(dst)}")


@app.command(hidden=True)
def worker(spec: str, out: str) -> None:
    """Internal: measure one process of one case (started by the orchestrator)."""
    from gpuenv.run.worker import exit_now, guard
    from gpuenv.run.worker import main as worker_main

    guard()
    exit_now(worker_main(spec, out))


class Interrupted(Exception):
    """A command stopped by Ctrl-C (or SIGTERM, SIGHUP) that says what it kept: its one line, exit 130."""


def error_line(message: str) -> None:
    """The one line a user error gets on stderr: whatever the message quotes (a path, a record's
    text) is shown, never obeyed as a terminal control sequence."""
    err_console.print(f"error: {terminal(message)}", highlight=False, soft_wrap=True, markup=False)


def os_error_text(e: OSError) -> str:
    import errno

    fix = {errno.ENOSPC: "free some space or pass another directory", errno.EDQUOT: "free some space or pass another directory",
           errno.EROFS: "pass a directory on a writable file system", errno.EACCES: "check its permissions or pass another path",
           errno.ENAMETOOLONG: "pass a shorter path"}.get(e.errno or 0)
    if not e.filename:  # no path named: a program or the system refused
        return f"{e.strerror or e}; {fix}" if fix else f"{e.strerror or e} ({type(e).__name__})"
    where = f"{str(e.filename)[:200]}{'...' if len(str(e.filename)) > 200 else ''}"
    return f"{where}: {e.strerror or e}; {fix or 'check the path and pass another'}"


# Typer ships its own copy of click in recent releases: take the classes from typer itself.
_USAGE_ERROR: type[Exception] = typer.BadParameter.__mro__[1]  # type: ignore[assignment]  # click's UsageError, whichever click typer uses


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user errors and usage errors become one line and exit code 2."""
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=argv, prog_name="gpuenv", standalone_mode=False)
    except UserError as e:
        error_line(str(e))
        sys.exit(EXIT_USER_ERROR)
    except OSError as e:  # a path the user gave that cannot be read or written: the commands catch the
        # ones they expect; this is the net under them, still one line naming the path
        error_line(os_error_text(e))
        sys.exit(EXIT_USER_ERROR)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except _USAGE_ERROR as err:
        usage: Any = err  # click's UsageError: ctx, format_message()
        if type(usage).__name__ == "NoArgsIsHelpError":  # bare `gpuenv`: help, not an error
            console.print(command.get_help(usage.ctx), markup=False, highlight=False)
            sys.exit(0)
        hint = f" (see `{usage.ctx.command_path} --help`)" if getattr(usage, "ctx", None) else ""
        error_line(f"{usage.format_message()}{hint}")
        sys.exit(EXIT_USER_ERROR)
    except Interrupted as e:
        err_console.print(terminal(str(e)), highlight=False, soft_wrap=True, markup=False)
        sys.exit(EXIT_INTERRUPTED)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(EXIT_INTERRUPTED)
    if rv == EXIT_INTERRUPTED:  # typer turns a Ctrl-C inside any command into exit 130, silently
        err_console.print("interrupted (Ctrl-C)")
    sys.exit(rv if isinstance(rv, int) else 0)

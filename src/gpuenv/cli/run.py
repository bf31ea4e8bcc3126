"""Commands that run suites: bench, bench-image, dispatch (a cluster), sweep (library versions), and
the hidden worker. Each parses, calls the library (gpuenv.run, gpuenv.dispatch, gpuenv.history.sweep,
gpuenv.images) and prints."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpuenv.cli.common import (
    DEFAULT_OUT,
    EXIT_CASE_FAILED,
    Interrupted,
    app,
    console,
    err_console,
    out_dir,
    print_warnings,
)
from gpuenv.errors import UserError
from gpuenv.escape import markup, terminal
from gpuenv.registry import default_registry
from gpuenv.results.schema import Record


@contextlib.contextmanager
def case_progress(mode: Any, keys: list[str], records: list[Record], per_case: int = 1, to: Any = None) -> Iterator[Callable[[Any], None]]:
    """A progress bar over the plan's cases and the runner's event handler that drives it: a line per
    record written (appended to `records`), a failed seed said as it happens; on `to` (default stdout)."""
    from gpuenv.run.runner import CaseDone, Preparing, ProcessDone, ProcessStart

    total = len(keys) * per_case
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=to or console,
                  transient=False) as progress:
        bar = progress.add_task("starting", total=total)

        def on_event(e: Any) -> None:
            if isinstance(e, Preparing):
                progress.update(bar, description=f"{e.what} (first use)")
                progress.console.print(f"{e.what} side by side, before the first case (first use on this machine; reused after)", highlight=False)
            elif isinstance(e, ProcessStart):
                progress.update(bar, description=f"{keys[e.index]} \\[{mode.process_word} {e.process + 1}/{e.of}]")
            elif isinstance(e, ProcessDone) and e.outcome.failure is not None and not mode.stop_after_failure:
                why = e.outcome.failure["reason"]
                progress.console.print(f"  {mode.process_word} {e.outcome.index}: [red]failed[/] {markup(why)}", highlight=False)
            elif isinstance(e, CaseDone):
                records.append(e.record)
                r = e.record
                side = f" {r.tags['side']}" if per_case > 1 and r.tags.get("side") else ""
                head = f"[{len(records)}/{total}] {r.case_key}{side}"
                if r.failure is not None:
                    progress.console.print(f"{head}: [red]{r.status}[/] ({r.failure.kind.value}) {markup(r.failure.reason)}")
                else:
                    progress.console.print(f"{head}: {markup(mode.progress_line(r))}", highlight=False)
                progress.advance(bar)

        yield on_event


def build_own_environments(backends: list[str]) -> None:
    """`bench --build-envs`: the plan's missing own environments built side by side, a line for each; exit 1
    where one could not be built (its line says why; a run would record that backend's cases refused)."""
    from gpuenv.run.runner import Preparing, prepare

    def on_event(e: Any) -> None:
        if isinstance(e, Preparing):
            console.print(f"{e.what} side by side")

    outcomes: dict = {}
    built = prepare(backends, outcomes, on_event)
    failed = [b for b in built if isinstance(outcomes[b], UserError)]
    for b in built:
        if b in failed:
            err_console.print(f"{b}: its own environment could not be built: {markup(str(outcomes[b]))}")
        else:
            console.print(f"{b}: its own environment is built (reused by every later run)")
    if not built:
        console.print("no own environment to build: this plan's backends have theirs, or need none")
    if failed:
        raise typer.Exit(EXIT_CASE_FAILED)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP (a CI timeout, a closed terminal) take one path while suites run:
    workers run in their own sessions and would not get the signal, so the handler kills the running
    worker and the run stops after writing the interrupted case (see run.runner.Interrupt)."""
    from gpuenv.run.runner import INTERRUPT

    previous = {sig: signal.signal(sig, INTERRUPT.handler) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
    processes: Annotated[int | None, typer.Option("--processes", "-p", help="worker processes per case (seeds in a time-to-reward suite), replacing the suite's")] = None,
    values: Annotated[int | None, typer.Option("--values", help="timed values per process, replacing the suite's (pyperf's -n; here -n is --num-envs)")] = None,
    warmups: Annotated[int | None, typer.Option("--warmups", "-w", help="untimed values per process before the timed ones, replacing the suite's")] = None,
    min_time: Annotated[float | None, typer.Option("--min-time", help="seconds each timed value lasts at least, replacing the suite's")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the cases and how each would be measured; run nothing, write nothing")] = False,
    build_envs: Annotated[bool, typer.Option("--build-envs", help="build the own Python environments the plan's backends lack (as a run does before its first case), then exit; measure nothing (make install does it for the quick suite)")] = False,
    machine_name: Annotated[str | None, typer.Option("--machine-name", help="your name for this machine, carried by every record and shown wherever its numbers are (GPUENV_MACHINE_NAME)")] = None,
) -> None:
    """Run a suite (default: quick, on every backend available here) and print the tables."""
    from gpuenv.doctor import failures, in_gpu_image, run_checks
    from gpuenv.gpu import CPU_FALLBACK_HINT, cpu_ok
    from gpuenv.measure.system import MACHINE_NAME_ENV
    from gpuenv.measure.system import machine_name as system_machine_name
    from gpuenv.report.table import footnotes, tables
    from gpuenv.results.schema import record_tags
    from gpuenv.results.store import checked_run_id, new_run_id, prepare_dir
    from gpuenv.run.plan import bench_plan
    from gpuenv.run.runner import INTERRUPT, RunStopped, run_plan

    if in_gpu_image():  # a GPU image checks its GPU, driver and JAX before measuring anything
        bad = failures(run_checks(), cpu_ok=cpu_ok())
        if bad:  # GPUENV_CPU_OK=1 lifts only "no GPU"; an old driver or a broken JAX stays an error
            hint = f"; {CPU_FALLBACK_HINT}" if bad[0].name == "gpu" else ""
            raise UserError(f"{bad[0].error()}{hint}; `gpuenv doctor` shows every check")
    record_tags()  # a bad GPUENV_RECORD_TAGS: one line now, not after the first case ran
    if machine_name is not None:
        os.environ[MACHINE_NAME_ENV] = machine_name  # the workers and the records read it from there
    system_machine_name()  # a bad name: one line now
    measure = {k: v for k, v in (("processes", processes), ("values", values), ("warmups", warmups), ("min_time_s", min_time))
               if v is not None}
    bp = bench_plan(suite, backends=backend, tasks=task, num_envs=num_envs, seeds=seeds, cases=case, measure=measure)
    mode, plan, unavailable = bp.mode, bp.plan, bp.unavailable
    keys = [item.key for item in plan.items]
    if dry_run:
        console.print(f"[bold]gpuenv bench --dry-run[/] suite [cyan]{markup(plan.suite)}[/]: {len(keys)} cases ({plan.unit})")
        for item in plan.items:
            console.print(f"  {markup(item.key)}: {markup(mode.describe(item))}", highlight=False)
        for reason in unavailable:
            console.print(f"[yellow]would skip[/] {markup(reason)}")
        for sk in plan.skipped:
            console.print(f"[dim]not run: {markup(sk)}[/]")
        console.print("nothing run, nothing written (--dry-run)")
        return
    if build_envs:
        build_own_environments([item.backend for item in plan.items])
        return
    run_id = checked_run_id(run_id_opt) if run_id_opt is not None else new_run_id()
    # the output folder is checked now; the run's own folder appears with its first record, so a
    # run killed before any case finished leaves no empty folder behind
    run_dir = prepare_dir(out_dir(out)) / run_id
    if run_dir.exists():  # --run-id of an existing run: it must take records too, before a case runs
        prepare_dir(run_dir)
    console.print(f"[bold]gpuenv bench[/] suite [cyan]{markup(plan.suite)}[/]: {len(keys)} cases ({plan.unit}), run {run_id}")
    for reason in unavailable:
        console.print(f"[yellow]skipped[/] {markup(reason)}")

    records: list[Record] = []
    interrupted = False
    stopped: RunStopped | None = None
    with case_progress(mode, keys, records) as on_event, interruptible():
        try:
            run_plan(mode, plan, run_id=run_id, out_dir=run_dir, on_event=on_event)
            INTERRUPT.check()  # a signal after the last worker finished
        except KeyboardInterrupt:
            interrupted = True
        except RunStopped as e:
            stopped = e

    for t in tables(records):
        console.print(t)
    print_warnings(footnotes(records))
    for sk in plan.skipped:
        console.print(f"[dim]not run: {markup(sk)}[/]")
    failed = [r for r in records if r.status != "ok"]
    missed = [r for r in records if mode.missed(r)]
    console.print(f"{len(records)} records written to {markup(run_dir)}")
    if stopped is not None:
        for key in stopped.not_run:
            console.print(f"[red]not run[/] {key}")
        raise UserError(f"{stopped}; the run stopped: the {len(records)} records already written are kept in {run_dir}, "
                        f"{len(stopped.not_run)} case(s) not run (listed above)")
    if interrupted:
        done = sum(r.status != "interrupted" for r in records)
        raise Interrupted(f"interrupted by {INTERRUPT.cause()}: the {done} finished record(s) and the interrupted case's "
                          f"record are kept in {run_dir}" if done < len(records) else
                          f"interrupted by {INTERRUPT.cause()}: the {done} finished record(s) are kept in {run_dir}")
    if failed:
        err_console.print(f"{len(failed)} case(s) failed; their records say why (status 'failed')")
        raise typer.Exit(EXIT_CASE_FAILED)
    if missed:
        err_console.print(f"{len(missed)} case(s) missed their pass criterion (too few seeds reached the threshold)")
        raise typer.Exit(EXIT_CASE_FAILED)


@app.command("gpu-check")
def gpu_check(
    out: Annotated[str, typer.Option("--out", "-o", help="records go to OUT/<run id>/")] = "results/gpu-check",
    budget: Annotated[float, typer.Option("--budget", help="seconds for the whole check; the bench is interrupted (its records kept) to fit")] = 480.0,
) -> None:
    """The GPU parts of the decision in one command (make gpu-check): Brax and MJX at 1024-8192 envs, PPO's inference and learning on the GPU, then show and decide."""
    from gpuenv.results.store import new_run_id, prepare_dir
    from gpuenv.run.gpucheck import gpu_check as check_gpu

    if budget < 120:
        raise UserError(f"--budget {budget:g} s is too short: the check needs at least 120 s (JAX compiles for about a minute)")
    prepare_dir(out_dir(out))
    check = check_gpu(Path(out), new_run_id(), budget, say=lambda line: console.print(terminal(line), highlight=False, markup=False, soft_wrap=True))
    if not check.ok:
        bad = next((s for s in check.steps if s.returncode != 0 and not s.stopped), check.steps[-1])
        raise UserError(f"gpu-check: {bad.name} {'was stopped at the budget before any record' if bad.stopped else f'exited {bad.returncode}'}; "
                        f"what was measured is in {check.run_dir}")
    if any(s.stopped for s in check.steps):
        console.print(f"gpu-check: the bench was stopped at the budget: the cases it did not reach are not in {check.run_dir} "
                      "(raise --budget / GPU_CHECK_BUDGET to measure them)", highlight=False, markup=False)


@app.command()
def peers(
    peer: Annotated[list[str] | None, typer.Option("--peer", "-p", help="backend:variant with a peer benchmark (default: every row the backends declare)")] = None,
    task: Annotated[str, typer.Option("--task", "-t", help="a task every row's backend offers")] = "halfcheetah",
    num_envs: Annotated[list[int] | None, typer.Option("--num-envs", "-n", help="batch sizes (default 64)")] = None,
    rounds: Annotated[int, typer.Option("--rounds", help="interleaved rounds: every side, then the peer")] = 3,
    min_time: Annotated[float, typer.Option("--min-time", help="seconds per timed value (and per peer call)")] = 0.3,
    plain: Annotated[bool, typer.Option("--plain", help="gpuenv as it runs and the peer only (no zero-action or no-reset sides)")] = False,
    out: Annotated[str, typer.Option("--out", "-o", help="peers-<time>.jsonl goes here")] = "results/local/peers",
) -> None:
    """gpuenv's physics steps/s beside the framework's own benchmark (mjx.benchmark, brax.test_utils.benchmark) at matched settings, as ratios."""
    from gpuenv.run import peers as p

    sides = ("gpuenv",) if plain else p.SIDES
    report = p.measure(peer or p.rows(), task, num_envs or [64], rounds, min_time, Path(out), sides,
                       say=lambda row: console.print(terminal(row.line()), highlight=False, markup=False, soft_wrap=True))
    console.print(f"peers: {len(report.rows)} rows; ratio = gpuenv / peer, medians of physics steps/s; written {terminal(str(report.path))}",
                  highlight=False, markup=False)


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
        bench(suite=suite, backend=list(img.backends), task=None, num_envs=None, seeds=None, out=out)
        return
    from gpuenv.images import is_built, runnable_here

    runnable_here(img)  # no engine, or no NVIDIA runtime for a GPU image: one line, before any build
    if not is_built(img):
        from gpuenv.cli.machine import build_images

        build_images([img.name], [], False)
    cmd = docker_run_command(img, suite, Path.cwd() / "results")
    console.print(terminal(" ".join(cmd)), highlight=False, markup=False)
    import subprocess

    raise typer.Exit(subprocess.call(cmd))


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
    time_min: Annotated[int, typer.Option("--time-limit-min", "--time-min", help="the scheduler's time limit per task, in minutes")] = 60,
    out: Annotated[str, typer.Option("--out", "-o", help="the shared results directory: records go to OUT/<run id>/")] = "results/dispatch",
    attach: Annotated[str | None, typer.Option("--attach", help="pick up a dispatch by its job id (after the submitting command died)")] = None,
    rerun: Annotated[Path | None, typer.Option("--rerun", help="a dispatch's run directory: submit only its cases with no ok record")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the tasks and the command each would run; submit nothing")] = False,
    sweep: Annotated[str | None, typer.Option("--sweep", help="PACKAGE==V1,V2,...: every case once per version set (gpuenv sweep's environments)")] = None,
    with_: Annotated[list[str] | None, typer.Option("--with", help="with --sweep: extra pin for every set (repeatable)")] = None,
) -> None:
    """Run a suite's cases as array tasks on Slurm (or submitit's local executor), then print its tables."""
    from gpuenv import dispatch as dsp
    from gpuenv.pins import parse_with
    from gpuenv.report.table import footnotes, tables
    from gpuenv.results.store import prepare_dir

    if attach or rerun:
        d, mode, plan = dsp.existing(out_dir(out), attach, rerun)
    else:
        options = dsp.Options(executor, partition, gpus_per_task, cpus_per_task, exclusive, container, image,
                              array_parallelism, cases_per_task, time_min)
        d, mode, plan = dsp.new(suite, {"backends": backend, "tasks": task, "num_envs": num_envs}, options, out_dir(out),
                                sweep=sweep, pins=parse_with(with_ or []) if sweep else [], dry_run=dry_run, console=console)
    items = {item.key for item in plan.items}
    if dry_run:
        for t in d.tasks:
            console.print(f"task {t.index} ({t.backend}): {markup(shlex.join(dsp.command_line(dsp.task_spec(d, t), '<facts>')))}", highlight=False)
        console.print(f"{len(d.tasks)} task(s), {len(items)} case(s); nothing submitted (--dry-run)")
        return
    if rerun:
        again = dsp.rerun_tasks(d, plan)
        if not again:
            console.print(f"every case of {markup(d.run_dir)} has an ok record: nothing to rerun")
            return
        dsp.submit(d, again)
        console.print(f"rerun of {sum(len(t.cases) for t in again)} case(s) in {len(again)} task(s), "
                      f"job {again[0].job_id.split('_')[0] if again[0].job_id else '-'}")
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
    records = [r for r in dsp.finish(d, mode, plan, warn=lambda m: print_warnings([m])) if r.case_key in items]
    for label in dict.fromkeys(t.version_set for t in d.tasks):  # one set of tables per version set of a sweep
        if label:
            console.print(f"[bold]{markup(label)}[/]")
        for table in tables([r for r in records if dsp.slot(r)[0] == label]):
            console.print(table)
    print_warnings(footnotes(records))
    failed = [r for r in records if r.status != "ok"]
    console.print(f"{len(records)} records in {markup(d.run_dir)}")
    if failed:
        err_console.print(f"{len(failed)} case(s) failed; their records say why; `gpuenv dispatch --rerun {markup(d.run_dir)}` reruns only those")
        raise typer.Exit(EXIT_CASE_FAILED)


@app.command()
def sweep(
    spec: Annotated[str, typer.Argument(help="PACKAGE==V1,V2,... e.g. brax==0.12.1,0.13.0,0.14.2")],
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name in suites/ or a .toml path")] = "quick",
    with_: Annotated[list[str] | None, typer.Option("--with", help="extra pin for every set, e.g. 'numpy<2' (repeatable)")] = None,
    backend: Annotated[str | None, typer.Option("--backend", "-b", help="default: the package's backend")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="task name (repeatable)")] = None,
    out_: Annotated[str, typer.Option("--out", "-o", help="directory the sweep's runs and table go to")] = "results/sweeps",
    blocks: Annotated[int, typer.Option("--blocks", help="interleaved blocks per case: one worker process of each version per block")] = 6,
    one_after_another: Annotated[bool, typer.Option("--one-after-another", help="run each version's whole suite in turn, not interleaved "
                                                     "(for very slow environments; its verdicts then carry the machine's drift)")] = False,
    threshold: Annotated[float, typer.Option("--threshold", help="smallest change (fraction) called a regression or improvement")] = 0.05,
) -> None:
    """Run the same suite under several versions of a library, each in its own cached environment, interleaved case by case."""
    from gpuenv.history import sweep as sw
    from gpuenv.history import versionsets as vsets
    from gpuenv.history.compare import check_threshold
    from gpuenv.pins import parse_with
    from gpuenv.results.store import new_run_id
    from gpuenv.suites import load_any

    check_threshold(threshold)
    if not one_after_another and not 3 <= blocks <= 1000:
        raise UserError(f"--blocks {blocks}: give 3 or more interleaved blocks (6 is the default)")
    out = out_dir(out_)
    package, versions = vsets.parse_spec(spec)
    pins = parse_with(with_ or [])
    name = vsets.swept_backend(package, backend)
    load_any(suite, default_registry())  # a bad suite name fails here, before any environment is built
    from gpuenv.run.plan import bench_plan

    # the interleaved plan too (bad filters fail before any environment is built); the sets' environments have the library
    bp = None if one_after_another else bench_plan(suite, backends=[name], tasks=task, here=False)
    sweep_id = new_run_id()
    bench_args = ["--suite", suite, "--backend", name, *[a for t in task or [] for a in ("--task", t)]]
    sets = [vsets.version_set(package, v, pins, name.split(":")[0]) for v in versions]
    how_run = "one after another" if one_after_another else f"interleaved, {blocks} blocks per case"
    console.print(f"[bold]gpuenv sweep[/] {package} over {', '.join(versions)} ({markup(suite)} suite, backend {name}, {how_run}), "
                  f"sweep {sweep_id}")
    for vs in sets:
        vsets.prepare(vs)
        how = "reused the cached environment" if vs.reused else "resolved and built the environment"
        if vs.status != "ready":
            console.print(vsets.not_ready_line(vs), highlight=False)
            continue
        console.print(f"{markup(vs.label)}: {how} in {vs.setup_s:.1f} s ({markup(vs.env_dir)})", highlight=False)
        if one_after_another:
            sw.run(vs, sweep_id, bench_args, out)
    ready = [vs for vs in sets if vs.status == "ready"]
    if bp is not None and ready:
        from gpuenv.run.runner import INTERRUPT

        records: list[Record] = []
        with case_progress(bp.mode, [it.key for it in bp.plan.items], records, per_case=len(ready)) as on_event, interruptible():
            try:
                sw.run_interleaved(ready, sweep_id, bp, blocks, out, on_event)
                INTERRUPT.check()
            except KeyboardInterrupt:
                raise Interrupted(f"interrupted by {INTERRUPT.cause()}: the records written so far are kept in {out / sweep_id}") from None
    labels = [vs.label for vs in sets]
    series = sw.collect(sets)
    title = ("adjacent verdicts from interleaved blocks" if not one_after_another
             else "adjacent verdicts from runs one after another: the machine's drift is in them")
    t = Table(title=f"{package}: each case across versions (headline [95% interval]; {title})", title_justify="left")
    t.add_column("case")
    for lbl in labels:
        t.add_column(lbl)
    colour = {"faster": "green", "slower": "red", "regression": "red", "improvement": "green", "suspicious": "yellow"}
    for key, cells in sw.table(series, labels, threshold, interleaved=not one_after_another):
        shown = []
        for cell in cells:
            text = markup(cell.text) if cell.ok else (f"[red]{markup(cell.text)}[/]" if cell.text != "-" else "-")
            if cell.verdict is not None:
                word = f"[{colour[cell.verdict]}]{cell.verdict}[/]" if cell.verdict in colour else cell.verdict
                text += f"\n{word}" + (f" {cell.change_pct:+.0f}%" if cell.change_pct is not None else "")
            shown.append(text)
        t.add_row(key, *shown)
    console.print(t)
    for vs in sets:
        if vs.status.startswith("ran"):
            resolved = {k: vs.versions.get(k) for k in (package, "jax", "jaxlib", "numpy", "mujoco") if vs.versions.get(k)}
            console.print(f"[dim]{markup(vs.label)}: {vs.status}; resolved {markup(resolved)}; records in {markup(vs.run_dir)}[/]", highlight=False)
    if series:
        try:
            if sw.plot(series, labels, out / sweep_id / "sweep.png"):
                console.print(f"plot: {markup(out / sweep_id / 'sweep.png')}")
            else:
                console.print("[dim]no plot: no version set measured a number (every case failed; see above)[/]")
        except ImportError:
            console.print("[dim]no plot: matplotlib is not installed (pip install 'gpuenv[history]')[/]")
    bad = [vs for vs in sets if not vs.status.startswith("ran")]
    if bad:
        err_console.print(f"{len(bad)} version set(s) did not run: {markup(', '.join(f'{vs.label} ({vs.status})' for vs in bad))}")
        raise typer.Exit(EXIT_CASE_FAILED)


@app.command()
def ab(
    side_a: Annotated[str, typer.Argument(metavar="A", help="the baseline: '.', a git revision, a gpuenv checkout folder, PACKAGE==VERSION or image:REF")],
    side_b: Annotated[str, typer.Argument(metavar="B", help="the side compared with A, written the same way")],
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name in suites/ or a .toml path")] = "ab",
    backend: Annotated[list[str] | None, typer.Option("--backend", "-b", help="backend or backend:variant (repeatable)")] = None,
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="task name (repeatable)")] = None,
    num_envs: Annotated[list[int] | None, typer.Option("--num-envs", "-n", help="replaces the suite's sizes")] = None,
    blocks: Annotated[int, typer.Option("--blocks", help="paired blocks per case: one worker process of each side per block")] = 8,
    threshold: Annotated[float, typer.Option("--threshold", help="smallest change (fraction) called a regression or improvement")] = 0.05,
    out: Annotated[str, typer.Option("--out", "-o", help="records go to OUT/<ab id>/A/ and OUT/<ab id>/B/")] = "results/ab",
    json_out: Annotated[bool, typer.Option("--json", help="print the verdicts as JSON (one object) instead of the table")] = False,
    md_out: Annotated[bool, typer.Option("--markdown", help="print the verdicts as a Markdown table (a PR comment) instead")] = False,
) -> None:
    """Compare two sides interleaved (A B B A ...), case by case: a verdict per case from paired blocks; exit 1 on a regression."""
    from gpuenv.history import ab as abm
    from gpuenv.history.compare import check_threshold
    from gpuenv.measure.fingerprint import runs_machine
    from gpuenv.results.store import new_run_id, prepare_dir
    from gpuenv.run.plan import bench_plan
    from gpuenv.run.runner import INTERRUPT, RunStopped

    check_threshold(threshold)
    if json_out and md_out:
        raise UserError("--json and --markdown: choose one output")
    if not 3 <= blocks <= 1000:
        raise UserError(f"--blocks {blocks}: give 3 or more paired blocks (8 is the default; more narrow the interval)")
    sides = [abm.parse_side(side_a), abm.parse_side(side_b)]
    only = abm.swept_backend(sides, backend)
    bp = bench_plan(suite, backends=backend or ([only] if only else None), tasks=task, num_envs=num_envs,
                    here=not all(s.kind in ("version set", "image") for s in sides))  # their environments have the library
    mode, plan = bp.mode, bp.plan
    for side in sides:
        abm.prepare(side, only)
    ab_id = new_run_id()
    root = prepare_dir(out_dir(out)) / ab_id
    keys = [item.key for item in plan.items]
    say = err_console if json_out or md_out else console
    say.print(f"[bold]gpuenv ab[/] suite [cyan]{markup(plan.suite)}[/]: {len(keys)} cases, {blocks} blocks of A and B "
              f"interleaved (A B B A ...); ab {ab_id}", highlight=False)
    for name, side in zip(abm.SIDES, sides, strict=True):
        say.print(f"  {name}: {markup(side.label)} ({side.kind})", highlight=False)
    for reason in bp.unavailable:
        say.print(f"[yellow]skipped[/] {markup(reason)}")
    records: list[Record] = []
    interrupted = False
    with case_progress(mode, keys, records, per_case=2, to=say) as on_event, interruptible():
        try:
            abm.run(mode, plan, sides, blocks=blocks, ab_id=ab_id, out=root, on_event=on_event)
            INTERRUPT.check()
        except KeyboardInterrupt:
            interrupted = True
        except RunStopped as e:
            raise UserError(f"{e}; the run stopped: records written so far are kept in {root}") from None
    done = abm.pairs_of(records).get(ab_id, [])
    found = abm.analyse(done, threshold) if done else []
    if json_out:
        import json

        doc = {"ab": ab_id, "sides": {n: {"spec": s.spec, "label": s.label, "kind": s.kind, "git": s.git}
                                       for n, s in zip(abm.SIDES, sides, strict=True)},
               "blocks": blocks, "threshold": threshold, "fdr": abm.verdicts.FDR, "machine": runs_machine(records),
               "records": str(root), "verdicts": [v.to_dict() for v in found], "failed": abm.failed_sides(done)}
        print(json.dumps(doc, indent=1))
    elif md_out:
        print(abm.markdown(found, sides, records, threshold, blocks))
    elif found:
        console.print(_ab_table(found, sides, blocks))
        console.print(abm.summary(found, records, threshold), highlight=False)
    say.print(f"records: {markup(root)} (A and B); `gpuenv show {markup(root)}` shows each side's tables", highlight=False)
    if interrupted:
        raise Interrupted(f"interrupted by {INTERRUPT.cause()}: the records written so far are kept in {root}")
    regressed = [v for v in found if v.label == abm.verdicts.REGRESSION]
    failed = abm.failed_sides(done)
    for line in failed:
        err_console.print(f"failed: {markup(line)}", highlight=False)
    if regressed:
        err_console.print(f"regression: {', '.join(v.case_key for v in regressed)} (B worse than A beyond {100 * threshold:g}%, significant)")
    if regressed or any(": B failed" in line for line in failed):
        raise typer.Exit(EXIT_CASE_FAILED)


def _ab_table(found: list, sides: list, blocks: int) -> Table:
    from gpuenv.history import verdicts as vd

    t = Table(title=f"B vs A, {blocks} interleaved blocks per case: B/A of each block's pair, geometric mean and 95% interval",
              title_justify="left")
    for col in ("case", "A", "B", "B/A [95% interval]", "pairs", "verdict"):
        t.add_column(col)
    colour = {vd.REGRESSION: "red", vd.IMPROVEMENT: "green", vd.SUSPICIOUS: "yellow", vd.INSUFFICIENT: "magenta"}
    for v in found:
        ratio = f"{v.ratio:.3f} [{v.ci_low:.3f}-{v.ci_high:.3f}]" if v.ratio is not None else "-"
        a = f"{v.a:,.0f} {v.unit}" if v.a is not None else "-"
        b = f"{v.b:,.0f}" if v.b is not None else "-"
        word = f"[{colour[v.label]}]{v.label}[/]" if v.label in colour else v.label
        t.add_row(v.case_key, a, b, ratio, str(v.pairs), f"{word}\n[dim]{markup(v.why)}[/]")
    return t


@app.command()
def profile(
    env: Annotated[str, typer.Argument(metavar="ENV", help="your env: a Gymnasium id (CartPole-v1; --import PKG registers yours), module:factory, "
                                                           "or a godot-rl game: a Godot project folder or an exported binary")],
    imports: Annotated[list[str] | None, typer.Option("--import", help="a module to import first, which registers your env ids (repeatable)")] = None,
    time_s: Annotated[float, typer.Option("--time", help="seconds the sweep and the phases may take: no case starts after that")] = 240.0,
    budget: Annotated[str, typer.Option("--budget", help="the training budget the answer is for, in env steps (1M, 50M), as gpuenv decide")] = "1M",
    num_envs: Annotated[list[int] | None, typer.Option("--num-envs", "-n", help="replaces the sweep's sizes (1, the cores, 4x and 16x them)")] = None,
    out: Annotated[str, typer.Option("--out", "-o", help="records go to OUT/<run id>/ (the sweep) and OUT/<run id>/ (the phases)")] = "results/profile",
    speedup: Annotated[int | None, typer.Option("--speedup", help="a Godot game's realtime pacing: godot-rl's --speedup (default 20)")] = None,
    action_repeat: Annotated[int | None, typer.Option("--action-repeat", help="a Godot game's physics ticks per agent step: godot-rl's "
                                                                             "--action_repeat (default 8)")] = None,
    port_hours: Annotated[float, typer.Option("--port-hours", help="hours a port to a batched simulator would take you: the answer says "
                                                                    "above which training budget it pays off")] = 40.0,
) -> None:
    """Profile your own env or Godot game: every vectoriser (or Godot process count and pacing) over a num_envs sweep, where a PPO
    iteration's time goes, the best setting, the training time."""
    from gpuenv import profile as pm
    from gpuenv.decide import parse_steps
    from gpuenv.run.runner import INTERRUPT

    if not 10 <= time_s <= 86_400:
        raise UserError(f"--time {time_s:g}: give the seconds the profile may take, 10 to 86400 (default 240)")
    steps = parse_steps(budget)
    for n in num_envs or []:
        if not 1 <= n <= 4096:
            raise UserError(f"--num-envs {n}: give sizes from 1 to 4096")
    for flag, value in (("--speedup", speedup), ("--action-repeat", action_repeat)):
        if value is not None and not 1 <= value <= 1000:
            raise UserError(f"{flag} {value}: give godot-rl's {flag.lstrip('-').replace('-', '_')}, 1 to 1000")
    if not 0 < port_hours <= 100_000:
        raise UserError(f"--port-hours {port_hours:g}: give the hours a port would take, more than 0")
    written: list[list[Record]] = []  # per plan run: the sweep, then the phases

    def progress(mode: Any, keys: list[str]) -> Any:
        written.append([])
        return case_progress(mode, keys, written[-1])

    def started(p: pm.Profile, keys: list[str]) -> None:
        o = p.own
        pkg = f"; {o['identity']['package']} {o['identity']['version']}" if o["identity"].get("package") else ""
        if pm.is_game(o):
            pkg = f"; {o['game']['engine']} {o['game'].get('engine_version') or ''}".rstrip()
        console.print(f"[bold]gpuenv profile[/] {markup(o['spec'])}: observations {markup(o['spaces']['observation'])}, actions "
                      f"{markup(o['spaces']['action'])}{markup(pkg)}; {len(keys)} cases, run {p.run_id}, at most {time_s:g} s",
                      highlight=False)

    with interruptible():
        try:
            found = pm.run(env, imports or [], budget_s=time_s, budget_steps=steps, out=out_dir(out), num_envs=num_envs,
                           progress=progress, on_start=started, pacing=pm.GamePacing(speedup, action_repeat), port_hours=port_hours)
            INTERRUPT.check()
        except KeyboardInterrupt:
            kept = sum(len(w) for w in written)
            raise Interrupted(f"interrupted by {INTERRUPT.cause()}: the {kept} record(s) written so far are kept in {out_dir(out)}") from None
    for line in pm.report_lines(found):
        console.print(line, markup=False, highlight=False)
    if any(r.status != "ok" for r in found.records):
        err_console.print("a case failed; its record says why (gpuenv show " + markup(found.run_dir) + ")")
        raise typer.Exit(EXIT_CASE_FAILED)


@app.command(hidden=True)
def worker(spec: str, out: str) -> None:
    """Internal: measure one process of one case (started by the orchestrator)."""
    from gpuenv.run.worker import exit_now, guard
    from gpuenv.run.worker import main as worker_main

    guard()
    exit_now(worker_main(spec, out))

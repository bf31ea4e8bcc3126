"""Commands about this machine and the installation: list, info, doctor, images. Each parses, calls
the library (gpuenv.registry, gpuenv.run.provenance, gpuenv.doctor, gpuenv.images) and prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gpuenv.cli.common import EXIT_USER_ERROR, app, console, error_line
from gpuenv.errors import UserError
from gpuenv.escape import markup, terminal
from gpuenv.registry import UNOBTAINABLE, default_registry


@app.command("list")
def list_(
    what: Annotated[str, typer.Argument(help="backends | tasks | suites | all")] = "all",
    as_json: Annotated[bool, typer.Option("--json", help="with backends: print each backend's name and why it is unavailable (null: available) as JSON")] = False,
) -> None:
    """Backends (available or not, and why), tasks (who offers each), suites."""
    from gpuenv.suites import available_suites, load_any
    from gpuenv.tasks import TASKS

    if what not in ("all", "backends", "tasks", "suites"):
        raise UserError(f"unknown list '{what}'; use one of: backends, tasks, suites, all")
    if as_json and what != "backends":
        raise UserError("--json lists backends: `gpuenv list backends --json`")
    registry = default_registry()
    visible = registry.visible()
    if as_json:
        print(json.dumps({b.name: b.unavailable_reason() for b in visible}, indent=1))
        return
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
                env_cell(b),
                "[green]available[/]" if reason is None else f"[yellow]{markup(reason)}[/]",
            )
        for u in UNOBTAINABLE:
            t.add_row(u.name, "-", "GPU", "-", f"[yellow]not obtainable here: {markup(u.why)}[/]; {markup(u.how)}")
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


@app.command()
def system(
    install: Annotated[bool, typer.Option("--install", help="install what is missing with apt-get (as root; `make install` runs this)")] = False,
) -> None:
    """The Debian packages each backend declares (Godot's servers, Genesis's OpenGL, Ocean's compilers), and which are missing."""
    from gpuenv import system as sysm

    if install:
        report = sysm.install()
        if report.failed:
            console.print(f"[yellow]apt-get failed: {markup(report.failed)}[/]", highlight=False)
        elif report.not_tried and report.missing:
            console.print(f"[yellow]not installed: {markup(report.not_tried)}[/]", highlight=False)
        for b in report.backends:
            console.print(markup(b.line(frozenset(report.installed))), highlight=False)
        return
    t = Table(title="Debian packages the backends declare (`gpuenv system --install` installs the missing ones as root)",
              title_justify="left")
    for col in ("backend", "package", "role", "for", "here"):
        t.add_column(col)
    for b in sysm.declared():
        for p in b.needed:
            t.add_row(b.backend, p.name, p.role, markup(p.why), "[yellow]missing[/]" if p in b.missing else "[green]present[/]")
    console.print(t)


@app.command()
def info(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """The machine as the results will record it."""
    from gpuenv.run.provenance import provenance, runtime

    data = provenance()
    data["runtime"] = runtime()
    if as_json:
        console.print_json(json.dumps(data))
        return
    m = data["machine"]
    t = Table(title="machine", title_justify="left", show_header=False)
    if m.get("name"):
        t.add_row("name", markup(m["name"]))
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
            error_line(f"{c.error()}{hint}")
        raise typer.Exit(EXIT_USER_ERROR)
    if cpu_ok and any(c.name == "gpu" and c.status == "fail" for c in checks):
        console.print("no GPU here: fine for the CPU backends (--cpu-ok)")


@app.command()
def images(
    action: Annotated[str | None, typer.Argument(help="build: build images with any Docker engine; wheels: the wheelhouse for a GPU machine without internet")] = None,
    names: Annotated[list[str] | None, typer.Argument(help="with build: which images (default: all); with wheels: the folder (default .whl)")] = None,
    bake: Annotated[bool, typer.Option("--bake", help="print the docker buildx bake file (JSON) and exit")] = False,
    locks: Annotated[bool, typer.Option("--locks", help="regenerate docker/locks/*.txt with uv")] = False,
    build: Annotated[str | None, typer.Option("--build", hidden=True, help="old spelling of `images build NAME`, kept for a release")] = None,
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
    if action not in (None, "build", "wheels"):
        raise UserError(f"unknown images action '{action}'; use `gpuenv images build [NAMES]`, `gpuenv images wheels [DIR]` or `gpuenv images`")
    if action == "wheels":
        write_wheels(names or [".whl"])
        return
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


def write_wheels(dest: list[str]) -> None:
    """`make gpu-wheels`: the wheelhouse `make gpu-check` installs on a GPU machine (gpuenv.images.wheelhouse)."""
    from gpuenv.images.wheelhouse import LIMIT_BYTES, SOURCE_LOCK, download

    if len(dest) != 1:
        raise UserError(f"`gpuenv images wheels` takes one folder, not {len(dest)}: e.g. `gpuenv images wheels .whl`")
    house = download(Path(dest[0]))
    for w in house.wheels:
        console.print(f"  {markup(w.name)} ({w.stat().st_size / 1e6:.1f} MB)", highlight=False)
    console.print(f"{len(house.wheels)} wheels, {house.bytes / 1e6:.1f} MB (limit {LIMIT_BYTES / 1e6:.0f} MB), in {markup(house.dest)}: "
                  f"Python 3.12 x86-64, the versions and hashes of {SOURCE_LOCK.name}; `make gpu-check` on the GPU machine installs them",
                  highlight=False)


def build_images(names: list[str], pins: list[str], dry_run: bool) -> None:
    """Build images (gpuenv.images.build), then the table of what was built."""
    from gpuenv import images as im

    built = im.build(names, pins, dry_run, say=lambda line: console.print(terminal(line), highlight=False, markup=False, soft_wrap=True))
    if dry_run:
        return
    t = Table(title="images built", title_justify="left")
    for col in ("image", "result", "build s", "size"):
        t.add_column(col)
    for b in built:
        result = "[green]ok[/]" if b.returncode == 0 else "[red]not started: no room[/]" if b.refused else f"[red]failed (exit {b.returncode})[/]"
        t.add_row(b.name, result, f"{b.seconds:.0f}",
                  f"{b.size_bytes / 1e9:.2f} GB" if b.size_bytes else "-")
    console.print(t)
    failed = [b for b in built if b.returncode != 0]
    if failed and failed[0].refused:
        raise UserError(failed[0].refused)
    if failed:
        f = failed[0]
        console.print(f"the last {len(f.tail)} lines of {f.name}'s build:", highlight=False)
        for line in f.tail:
            console.print(f"  {line[:400]}", highlight=False, markup=False, soft_wrap=True)
        raise UserError(f"building {f.name} failed (docker build exited {f.returncode}): {(f.cause() or 'no output')[:300]}")


def env_cell(b) -> str:
    """A backend's environment in `gpuenv list` (gpuenv.envs.status), red where its lock is missing."""
    from gpuenv import envs

    text, fine = envs.status(b)
    return markup(text) if fine else f"[red]{markup(text)}[/]"

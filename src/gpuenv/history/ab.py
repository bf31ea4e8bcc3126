"""`gpuenv ab A B`: two sides measured interleaved, case by case, and a verdict per case from the
paired blocks.

A side is this working tree (`.`), another checkout of gpuenv (a folder with src/gpuenv), a git
revision of this repository (exported once into the cache and run with this install's libraries), a
library version set PACKAGE==VERSION (its own cached environment, as `gpuenv sweep` builds it), or
a gpuenv image in the local Docker engine, image:REF (each worker process a container of it: its
libraries and its gpuenv, gpuenv.images.worker).

Per case, block b runs one worker process of each side, A then B in even blocks and B then A in odd
ones (A B B A A B ...): whatever the machine does over the minutes a case takes (a VM's speed moves
up to 2x here) falls on both sides alike, and the order within a block is balanced. Each process is
an ordinary worker of the case (its values, warm-ups, min time), so each side's processes make an
ordinary record, written to OUT/<ab id>/A and /B and tagged with the pairing. The verdict comes from
the per-block ratios B/A (gpuenv.history.verdicts).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuenv import envs
from gpuenv.errors import NoSpace, UserError
from gpuenv.history import verdicts
from gpuenv.measure.fingerprint import runs_machine
from gpuenv.results.schema import Record

SIDES = ("A", "B")
IMAGE = "image:"  # a side naming a local gpuenv image: image:gpuenv/envpool:latest


@dataclass
class Side:
    spec: str  # as the user wrote it
    kind: str  # "working tree" | "checkout" | "revision" | "version set" | "image"
    label: str  # what tables and records call it
    git: dict  # where.git of its records
    src: Path | None = None  # the src/ its workers import gpuenv from (None: this checkout's)
    package: str | None = None  # version set: the package, its version
    version: str | None = None
    version_set: Any = None  # gpuenv.history.versionsets.VersionSet once prepared
    image: Any = None  # gpuenv.images.worker.LocalImage: an image side


def _git(*args: str, where: Path = envs.ROOT) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"git {' '.join(args[:2])} failed ({e}); a git revision as a side needs git and this repository's history") from None


def checkout_git(folder: Path) -> dict:
    """where.git of a checkout side: its own commit where the folder is the top of a git work tree
    (dirty when anything tracked changed), else unknown: never an enclosing repository's commit."""
    top = _git("rev-parse", "--show-toplevel", where=folder)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != folder.resolve():
        return {"sha": None, "dirty": None}
    sha = _git("rev-parse", "HEAD", where=folder).stdout.strip() or None
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", where=folder).stdout.strip())
    return {"sha": sha, "dirty": dirty}


def parse_side(spec: str) -> Side:
    """What a side names; UserError when it names nothing gpuenv can run."""
    from gpuenv.measure.system import git_sha

    if spec == ".":
        return Side(spec, "working tree", "this working tree", git_sha())
    if spec.startswith(IMAGE):
        from gpuenv.images.worker import local_image

        ref = spec.removeprefix(IMAGE)
        if not ref:
            raise UserError(f"side {spec!r}: name the image after {IMAGE} (e.g. {IMAGE}gpuenv/envpool:latest)")
        img = local_image(ref, f"side {spec!r}")
        return Side(spec, "image", f"image {ref} ({img.id.removeprefix('sha256:')[:12]})", img.git, image=img)
    path = Path(spec).expanduser()
    if "==" in spec:
        from gpuenv.pins import package_name, version

        name, _, ver = spec.partition("==")
        what = f"side {spec!r}"
        return Side(spec, "version set", spec, git_sha(), package=package_name(name, what), version=version(ver, what))
    if path.is_dir():
        if not (path / "src" / "gpuenv" / "__init__.py").is_file():
            raise UserError(f"side {spec!r}: a folder, but not a gpuenv checkout (no src/gpuenv/__init__.py in it)")
        return Side(spec, "checkout", f"checkout {path}", checkout_git(path), src=(path / "src").resolve())
    r = _git("rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}")
    if r.returncode != 0:
        raise UserError(f"side {spec!r} is not a git revision of this repository, a gpuenv checkout folder, '.' (this working tree), "
                        f"PACKAGE==VERSION or {IMAGE}REF (e.g. HEAD~3, v0.1.0, ../gpuenv-old, envpool==1.1.0, {IMAGE}gpuenv/envpool:latest)")
    sha = r.stdout.strip()
    return Side(spec, "revision", f"{spec} ({sha[:10]})", {"sha": sha, "dirty": False})


def prepare(side: Side, backend: str | None) -> None:
    """Make the side runnable: a revision exported into the cache (once per commit), a version set's
    environment resolved and built (cached by its lock). UserError where that fails."""
    if side.kind == "revision":
        side.src = export_revision(side.git["sha"]) / "src"
    elif side.kind == "version set":
        from gpuenv.history import versionsets

        assert backend is not None and side.package and side.version
        vs = versionsets.prepare(versionsets.version_set(side.package, side.version, [], backend.split(":")[0]))
        if vs.status != "ready":
            raise UserError(f"side {side.spec}: {vs.status}: {vs.reason}")
        side.version_set = vs


def extract_tree(t: tarfile.TarFile, dest: Path) -> None:
    """A commit's tree, unpacked with tarfile's "data" filter, leaving out a member it refuses (a link out of
    the tree, as an absolute symlink committed by mistake): the harness reads only src/ from it. Python
    before 3.11.4 has no filters: this repository's own tree is trusted there."""
    if not hasattr(tarfile, "data_filter"):
        t.extractall(dest)
        return

    def data_or_skip(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        try:
            return tarfile.data_filter(member, path)
        except tarfile.FilterError:
            return None

    t.extractall(dest, filter=data_or_skip)


def export_revision(sha: str) -> Path:
    """The tree of commit `sha` in the cache (git archive, unpacked once; reused after)."""
    where = envs.cache_root().parent / "revisions" / sha
    if (where / envs.READY).exists():
        return where
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=where.parent))
    try:
        archive = tmp / "tree.tar"
        with open(archive, "wb") as f:
            r = subprocess.run(["git", "-C", str(envs.ROOT), "archive", "--format=tar", sha], stdout=f, stderr=subprocess.PIPE, timeout=300)
        if r.returncode != 0:
            raise UserError(f"git archive {sha[:10]} failed: {envs.last_line(r.stderr.decode(errors='replace'))}")
        with tarfile.open(archive) as t:
            extract_tree(t, tmp / "tree")
        (tmp / "tree" / envs.READY).write_text(sha + "\n")
        if not (where / envs.READY).exists():  # another run may have exported it meanwhile: theirs stands
            shutil.rmtree(where, ignore_errors=True)
            try:
                os.replace(tmp / "tree", where)
            except OSError:
                if not (where / envs.READY).exists():
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return where


def swept_backend(sides: list[Side], backends: list[str] | None) -> str | None:
    """The backend a version-set side's package, or an image side's image, belongs to (the sides must
    agree: an image or a version set runs only its backend); None where no side is either."""
    from gpuenv.history.versionsets import swept_backend as package_backend

    names = {package_backend(s.package, None).split(":")[0] for s in sides if s.kind == "version set" and s.package}
    asked = {b.split(":")[0] for b in backends or []}
    for s in sides:
        if s.image is not None:  # the image's own backend, or one it carries that --backend names
            names |= (asked & set(s.image.image.backends)) or {s.image.image.backend}
    if not names:
        return None
    if len(names) > 1:
        raise UserError(f"the two sides belong to different backends ({', '.join(sorted(names))}): "
                        "a version set or an image runs only its own backend; compare one backend at a time")
    name = names.pop()
    for b in backends or []:
        if b.split(":")[0] != name:
            what = next(s.spec for s in sides if s.package or s.image)
            raise UserError(f"--backend {b}: side {what} runs only backend {name}")
    return name


def side_launcher(side: Side, backend: str, cache: dict, out: Path | None = None) -> Any:
    """How this side starts a worker of this backend: a Launcher, or the UserError why it cannot.
    `out`: the folder the records go to (an image side's containers mount it)."""
    from gpuenv.registry import default_registry
    from gpuenv.run.runner import Launcher, launcher_or_error

    key = (side.spec, backend)
    if key in cache:
        return cache[key]
    b = default_registry().get(backend)
    if side.image is not None:  # the image's own settings: a host path from worker_env means nothing in its container
        from gpuenv.images.worker import image_launcher

        if b.name not in side.image.image.backends:
            how: Any = UserError(f"{side.spec} holds backend {', '.join(side.image.image.backends)}'s environment, not {b.name}'s")
        else:
            how = image_launcher(side.image, {}, (str(out.resolve()),) if out else ())
    elif side.version_set is not None:
        vs = side.version_set
        extra = b.worker_environ()
        how = Launcher(str(vs.env_dir / "bin" / "python"), extra,
                       {"name": vs.label, "python": vs.python, "lock_sha256": hashlib.sha256(vs.lock.encode()).hexdigest(), "path": str(vs.env_dir)})
    else:
        how = launcher_or_error(backend, {})
        if side.src is not None and not isinstance(how, UserError):
            path = os.pathsep.join(filter(None, [str(side.src), how.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))]))
            how = Launcher(how.python, {**how.env, "PYTHONPATH": path}, how.environment)
    cache[key] = how
    return how


@dataclass
class CaseResult:
    key: str
    records: dict[str, Record]  # side name -> its record of the case
    paths: dict[str, Path]


@dataclass
class AbRun:
    ab_id: str
    sides: list[Side]
    blocks: int
    run_ids: dict[str, str]  # side name -> its run id
    out: Path
    cases: list[CaseResult] = field(default_factory=list)


def block_order(b: int, k: int = 2) -> list[int]:
    """The side indices of block b in run order. Two sides: A B in even blocks, B A in odd ones. More
    (a sweep's version sets): the order rotates by one every two blocks and odd blocks reverse the
    block before them, so each side takes each place, and each neighbour comes before and after it."""
    first = [(i + b // 2) % k for i in range(k)]
    if k == 2:
        first = [0, 1]
    return first if b % 2 == 0 else first[::-1]


def run(mode: Any, plan: Any, sides: list[Side], *, blocks: int, ab_id: str, out: Path, names: list[str] | None = None,
        on_event: Callable[[Any], None] = lambda e: None) -> AbRun:
    """Every item of the plan, interleaved between the sides (two for `ab`, a sweep's version sets);
    records into OUT/<side name>/<its run id>/. Re-raises KeyboardInterrupt after writing the
    interrupted case's records."""
    from gpuenv.modes.base import Outcome, RecordContext, failure
    from gpuenv.results.store import new_run_id
    from gpuenv.run.provenance import provenance
    from gpuenv.run.runner import (
        INTERRUPT,
        CaseDone,
        CaseStart,
        ProcessDone,
        ProcessStart,
        RunStopped,
        backend_where,
        case_where,
        clean_scratch,
        run_process,
        scratch,
        write_case,
    )

    clean_scratch()
    base = provenance()
    names = names or list(SIDES)
    k = len(sides)
    run_ids = {name: new_run_id() for name in names}
    result = AbRun(ab_id, sides, blocks, run_ids, out)
    launchers: dict = {}
    env_where: dict[str, dict] = {}
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    sequence = " ".join("".join(letters[s % 26] for s in block_order(b, k)) for b in range(blocks))  # side j is letter j
    for i, item in enumerate(plan.items):
        INTERRUPT.check()  # a signal between cases (during an environment build, say): stop before the next
        item = mode.with_processes(item, blocks)
        on_event(CaseStart(i, item))
        here = case_where(base)  # one fingerprint for the case: both sides run in the same minutes
        outcomes: list[list[Outcome]] = [[] for _ in sides]
        wheres = [here for _ in sides]
        interrupted = False
        with scratch() as tmp:
            try:
                hows = [side_launcher(s, item.backend, launchers, out) for s in sides]
                refused = [(names[j], how) for j, how in enumerate(hows) if isinstance(how, UserError)]
                for j, how in enumerate(hows):
                    if isinstance(how, UserError):
                        outcomes[j].append(Outcome(0, None, failure("refused", str(how), 0)))
                    elif refused:  # paired or not at all: this side is not run alone
                        name, why = refused[0]
                        outcomes[j].append(Outcome(0, None, failure("refused", f"not run: side {name} cannot run this case ({why})", 0)))
                    else:
                        (Path(tmp) / str(j)).mkdir()
                        wheres[j] = backend_where(here, how, Path(tmp) / str(j), env_where)
                if not any(o for o in outcomes):
                    n = 0
                    for b in range(blocks):
                        for s in block_order(b, k):
                            on_event(ProcessStart(i, n, k * blocks))
                            n += 1
                            o = run_process(mode.process_spec(item, b, out / names[s]), b, item.timeout_s, Path(tmp) / str(s), hows[s])
                            outcomes[s].append(o)
                            on_event(ProcessDone(i, o))
                        if mode.stop_after_failure and any(o.failure for side in outcomes for o in side[-1:]):
                            break  # a failed block ends the case (both sides keep what they measured)
            except KeyboardInterrupt:
                interrupted = True
            except UserError as e:
                for side_out in outcomes:
                    side_out.append(Outcome(len(side_out), None, failure("refused", str(e), len(side_out))))
        cause = INTERRUPT.cause() if interrupted else None
        case = CaseResult(item.key, {}, {})
        for j, side in enumerate(sides):
            name = names[j]
            where = {**wheres[j], "git": side.git}
            tags: dict[str, Any] = {"ab": ab_id, "side": name, "side_spec": side.spec, "side_label": side.label, "blocks": blocks,
                                    "order": sequence, "letter": letters[j % 26], "runs": run_ids}
            if k == 2:
                tags.update(aa=sides[0].label == sides[1].label, paired_run=run_ids[names[1 - j]])
            if side.version_set is not None:
                from gpuenv.history.versionsets import tags_of

                tags.update(tags_of(side.version_set, ab_id))
            try:
                rec, path = write_case(mode, item, outcomes[j], RecordContext(plan.suite, run_ids[name], where, cause, tags=tags),
                                       out / name / run_ids[name])
            except NoSpace as e:
                raise RunStopped(str(e), [], [it.key for it in plan.items[i:]]) from None
            case.records[name], case.paths[name] = rec, path
            on_event(CaseDone(i, rec, path))
        result.cases.append(case)
        if interrupted:
            raise KeyboardInterrupt
    return result


def evidence(mode_of: Callable[[Record], Any], a: Record, b: Record) -> verdicts.Evidence:
    """The complete pairs of one case: block i of A with block i of B, where both measured (the
    blocks a failed or interrupted record finished count too)."""
    mode = mode_of(b if b.status == "ok" else a)
    va, vb = mode.process_values(a), mode.process_values(b)
    both = sorted(set(va) & set(vb))
    missing = []
    for name, r, v in (("A", a, va), ("B", b, vb)):
        if r.status != "ok":
            missing.append(f"{name} {r.status}: {r.failure.reason if r.failure else ''}".rstrip(": "))
        elif len(v) < len(both) or len(v) < max(len(va), len(vb)):
            missing.append(f"{name} measured {len(v)} block(s)")
    try:
        unit, hib = _unit(mode, b if b.status == "ok" else a)
    except Exception:  # noqa: BLE001 - neither side ok: the mode's headline is not defined
        unit, hib = "", True
    return verdicts.Evidence(a.case_key, unit, hib, [va[i] for i in both], [vb[i] for i in both], "; ".join(missing))


def _unit(mode: Any, r: Record) -> tuple[str, bool]:
    h = mode.headline(r)
    return h.unit, h.higher_is_better


def failed_sides(pairs: list[tuple[Record, Record]]) -> list[str]:
    """One line per case where B failed while A ran (a crash the change brought: `ab` exits 1), or the reverse."""
    out = []
    for a, b in pairs:
        for name, r, other in (("B", b, a), ("A", a, b)):
            if r.status == "failed" and other.status == "ok":
                out.append(f"{r.case_key}: {name} failed where {'A' if name == 'B' else 'B'} ran "
                           f"({r.failure.kind.value if r.failure else 'failed'}: {(r.failure.reason if r.failure else '')[:160]})")
    return out


def analyse(pairs: list[tuple[Record, Record]], threshold: float) -> list[verdicts.Verdict]:
    """Verdicts over (A record, B record) of the same cases of one interleaved run."""
    from gpuenv.modes import of

    return verdicts.decide([evidence(of, a, b) for a, b in pairs], threshold)


def pairs_of(records: list[Record]) -> dict[str, list[tuple[Record, Record]]]:
    """ab id -> [(A record, B record)] of each case both sides of that interleaved run recorded."""
    by: dict[tuple[str, str], dict[str, Record]] = {}
    for r in records:
        t = r.tags or {}
        if t.get("ab") and t.get("side") in SIDES:
            by.setdefault((t["ab"], r.case_key), {})[t["side"]] = r
    out: dict[str, list[tuple[Record, Record]]] = {}
    for (ab_id, _), sides in sorted(by.items()):
        if len(sides) == 2:
            out.setdefault(ab_id, []).append((sides["A"], sides["B"]))
    return out


def summary(found: list[verdicts.Verdict], records: list[Record], threshold: float) -> str:
    n = verdicts.counts(found)
    tested = sum(v.label != verdicts.INSUFFICIENT for v in found)
    return (f"{len(found)} cases: " + ", ".join(f"{k} {v}" for k, v in n.items())
            + f". Verdicts: q-values by Benjamini-Hochberg over the {tested} case(s) with {verdicts.MIN_PAIRS}+ pairs "
            f"(FDR {100 * verdicts.FDR:g}%), threshold {100 * threshold:g}%. Machine: {runs_machine(records)}")


def markdown(found: list[verdicts.Verdict], sides: list[Side], records: list[Record], threshold: float, blocks: int) -> str:
    """The verdicts as a Markdown table (a PR comment, a job summary), with the sides, the method and the machine."""
    lines = [f"**gpuenv ab**: A = {sides[0].label}, B = {sides[1].label}; {blocks} interleaved blocks per case "
             "(one worker process of each side per block, A B / B A in turn)", "",
             "| case | A | B | B/A [95% interval] | pairs | verdict |", "|---|---|---|---|---|---|"]
    for v in found:
        ratio = f"{v.ratio:.3f} [{v.ci_low:.3f}-{v.ci_high:.3f}]" if v.ratio is not None else "-"
        a = f"{v.a:,.0f} {v.unit}" if v.a is not None else "-"
        b = f"{v.b:,.0f}" if v.b is not None else "-"
        cell = (f"**{v.label}**" if v.label in (verdicts.REGRESSION, verdicts.IMPROVEMENT) else v.label) + f" ({v.why})"
        lines.append(f"| {v.case_key} | {a} | {b} | {ratio} | {v.pairs} | {cell.replace('|', '/')} |")
    return "\n".join([*lines, "", summary(found, records, threshold), ""])

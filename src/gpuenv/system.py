"""The Debian packages the backends declare (SystemPackage in gpuenv.backends.spec), checked and installed:
`gpuenv system` lists them, `gpuenv system --install` (run by `make install`) installs what is missing with
apt-get where this user can (root, apt-get), and says in one line per backend what is still missing and
the command that would install it."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from gpuenv.backends.spec import ROLES, Backend, SystemPackage, apt_phrase, forget_libraries
from gpuenv.registry import default_registry

APT_TIMEOUT_S = 1200


@dataclass(frozen=True)
class BackendPackages:
    backend: str
    needed: tuple[SystemPackage, ...]  # what it declares, of the roles asked for
    missing: tuple[SystemPackage, ...]  # of those, what is not here

    def line(self, installed: frozenset[str] = frozenset()) -> str:
        """One line: what it needs, what was installed now, and what is missing with the command."""
        names = ", ".join(p.name for p in self.needed)
        if not self.missing:
            new = [p.name for p in self.needed if p.name in installed]
            return f"{self.backend}: {names}: " + (f"installed now ({', '.join(new)})" if new else "present")
        return f"{self.backend}: missing {apt_phrase(self.missing)} (as root), or `make install` as root"


@dataclass
class SystemReport:
    backends: list[BackendPackages]
    installed: list[str] = field(default_factory=list)  # the packages apt-get installed now
    not_tried: str | None = None  # why nothing was installed, where something was missing
    failed: str | None = None  # apt-get's last line, where it failed

    @property
    def missing(self) -> list[SystemPackage]:
        return list({p.name: p for b in self.backends for p in b.missing}.values())


def declared(roles: tuple[str, ...] = ROLES, backends: list[Backend] | None = None) -> list[BackendPackages]:
    """Each backend that declares packages of those roles: what it needs and what is missing here."""
    forget_libraries()  # a library installed since the last look
    out = []
    for b in backends if backends is not None else default_registry().visible():
        needed = b.system_needed(roles)
        if needed:
            out.append(BackendPackages(b.name, needed, tuple(p for p in needed if not p.present())))
    return out


def _why_not() -> str | None:
    if shutil.which("apt-get") is None:
        return "no apt-get on this machine (not Debian or Ubuntu): install the equivalents by hand"
    if os.geteuid() != 0:
        return "not root: run the apt-get lines below as root, or `make install` as root"
    return None


def apt_get(names: list[str]) -> str | None:
    """`apt-get update` then `apt-get install` of names, quiet; None, or the last line of what failed."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *names]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=APT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"{' '.join(cmd[:2])} took over {APT_TIMEOUT_S // 60} minutes: is Debian's mirror reachable?"
        if r.returncode != 0:
            lines = (r.stderr or r.stdout).strip().splitlines()
            return f"{' '.join(cmd[:2])} exited {r.returncode}: {lines[-1][:200] if lines else ''}"
    return None


def install(backends: list[Backend] | None = None) -> SystemReport:
    """Install every declared package that is missing, where this user can; the report says what is left."""
    before = declared(backends=backends)
    report = SystemReport(before)
    names = [p.name for p in report.missing]
    if not names:
        return report
    report.not_tried = _why_not()
    if report.not_tried is None:
        report.failed = apt_get(names)
        report.backends = declared(backends=backends)
        left = {p.name for p in report.missing}
        report.installed = [n for n in names if n not in left]
    return report

"""Package names, versions and pins from the command line, parsed as PEP 508 / PEP 440.

They end up in requirement files uv reads, where a line such as `--index-url x` or `-r file` is an
option: so nothing is passed through as text, only what `packaging` parsed as a plain name with a
version.
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from gpuenv.errors import UserError


def package_name(name: str, what: str) -> str:
    """A distribution name as PEP 508 writes it: never an option (`--index-url`) or a path."""
    try:
        req = Requirement(name)
    except InvalidRequirement:
        req = None
    if req is None or str(req) != name or req.specifier or req.extras or req.url or req.marker:
        raise UserError(f"{what}: {name!r} is not a package name (letters, digits, '.', '_', '-'; e.g. brax)")
    return canonicalize_name(name)


def version(v: str, what: str) -> str:
    try:
        Version(v)
    except InvalidVersion:
        raise UserError(f"{what}: {v!r} is not a version (PEP 440, e.g. 0.13.0)") from None
    if v != v.strip():
        raise UserError(f"{what}: {v!r} has spaces around it")
    return v


def parse_with(pins: list[str]) -> list[str]:
    """--with pins: each a PEP 508 requirement of a named package with a version specifier; no URL,
    no marker, no option (uv reads a requirements file, where `--index-url` or `-r` would be options)."""
    out = []
    for p in pins:
        what = f"--with {p!r}"
        try:
            req = Requirement(p.strip())
        except InvalidRequirement:
            raise UserError(f"{what}: write a requirement such as jax==0.6.2 or 'numpy<2'") from None
        if req.url or req.marker or req.extras or not req.specifier:
            raise UserError(f"{what}: write a package with a version, such as jax==0.6.2 or 'numpy<2' (no URL, marker or extras)")
        package_name(req.name, what)
        out.append(f"{canonicalize_name(req.name)}{req.specifier}")
    return out


def exact_pin(p: str, what: str) -> tuple[str, str]:
    """PACKAGE==VERSION (an image's --pin): (canonical name, version)."""
    name, sep, v = p.strip().partition("==")
    if not sep:
        raise UserError(f"{what}: write PACKAGE==VERSION, e.g. brax==0.13.0")
    return package_name(name, what), version(v, what)


def version_key(v: str) -> tuple:
    """Sort key for versions: PEP 440 order, anything unparsable after, as text."""
    try:
        return (0, Version(v))
    except InvalidVersion:
        return (1, v)

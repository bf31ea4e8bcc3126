"""The Debian packages the backends declare (SystemPackage): one declaration read by `make install`
(`gpuenv system --install`), `gpuenv list`, the images and nothing else, so that CI cannot install one
by hand and stay green while a user's machine misses it (issue 48). Installing is shown with a stand-in
apt-get on PATH that makes what its package provides; no test here installs a Debian package."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest
from conftest import ROOT

from gpuenv import system as sysm
from gpuenv.backends import spec
from gpuenv.backends.spec import Backend, NativeTask, SystemPackage
from gpuenv.images import images
from gpuenv.images.catalogue import bake, system_args
from gpuenv.registry import default_registry

REG = default_registry()
TASK = {"cartpole": NativeTask("CartPole-v1", 0.02, 1, 0.02, 500, (4,), "box", 1)}


def _backend(*system: SystemPackage, name: str = "sysfake") -> Backend:
    return Backend(name, "gpuenv_fake.adapter", (), "fake", ("ok",), "a backend declaring Debian packages", TASK, system=system)


def test_a_declaration_says_how_its_package_is_found():
    with pytest.raises(ValueError, match="provides 'command:NAME'"):
        SystemPackage("x", "file:/x", "why")
    with pytest.raises(ValueError, match="role one of"):
        SystemPackage("x", "command:x", "why", role="sometimes")
    with pytest.raises(ValueError):
        SystemPackage("x", "command:", "why")
    assert SystemPackage("sh-pkg", "command:sh", "a shell").present()
    assert not SystemPackage("nope", "command:gpuenv-no-such-program", "x").present()
    assert not SystemPackage("nope", "library:libgpuenv-no-such.so.9", "x").present()
    assert SystemPackage("libc6", "library:libc.so.6", "the C library").present()
    assert SystemPackage("p", "python-headers", "x").apt_name(pinned=True) == "p"
    assert SystemPackage("p", "command:p", "x", image_version="1.2-3").apt_name(pinned=True) == "p=1.2-3"


def test_a_library_is_found_in_debians_folders_without_ldconfig(tmp_path, monkeypatch):
    (tmp_path / "libgpuenvtest.so.1").write_bytes(b"")
    monkeypatch.setattr(spec, "_LIBRARY_DIRS", (str(tmp_path),))
    assert SystemPackage("libgpuenvtest1", "library:libgpuenvtest.so.1", "x").present()


def test_the_shipped_backends_declare_what_their_simulators_need():
    declared = {b.name: {(p.name, p.role) for p in b.system} for b in REG.visible() if b.system}
    assert declared == {
        "godot": {("godot3-server", "run")},
        "godot4": {("debootstrap", "install")},
        "genesis": {("libgl1", "run"), ("libegl1", "run"), ("libxrender1", "run")},
        "ocean": {("gcc", "build"), ("g++", "build"), ("libc6-dev", "build"), ("python3-dev", "build")},
    }
    # `programs` and SystemPackage do not say the same thing twice
    for b in REG.visible():
        assert not {p.provides.removeprefix("command:") for p in b.system} & set(b.programs), b.name


def test_a_missing_package_makes_its_backend_unavailable_in_one_line_with_the_command():
    b = _backend(SystemPackage("gpuenv-test-pkg", "command:gpuenv-no-such-program", "runs the simulator"),
                 SystemPackage("gpuenv-test-tool", "command:gpuenv-no-such-tool", "makes its runtime", role="install"))
    why = b.unavailable_reason()
    assert why == ("sysfake needs Debian's gpuenv-test-pkg (runs the simulator): apt-get install gpuenv-test-pkg "
                   "(`make install` installs them as root)")
    # an install-role package is make install's own step's: the backend runs without it
    assert _backend(SystemPackage("t", "command:gpuenv-no-such-tool", "x", role="install")).unavailable_reason() is None
    from gpuenv.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="apt-get install gpuenv-test-pkg"):
        b.load()


def _fake_apt(tmp_path, monkeypatch, fails: bool = False):
    """An apt-get on PATH that logs its arguments and 'installs' a package by making the program of its name."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "apt.log"
    (bin_ / "apt-get").write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        + ('[ "$1" = install ] && { echo "E: Unable to locate package $5" >&2; exit 100; }\n' if fails else "")
        + f'[ "$1" = install ] && for p in "$@"; do case "$p" in -*|install) ;; *) printf "#!/bin/sh\\n" > {bin_}/$p; '
        f"chmod +x {bin_}/$p;; esac; done\nexit 0\n")
    (bin_ / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{__import__('os').environ['PATH']}")
    monkeypatch.setattr(sysm.os, "geteuid", lambda: 0)
    return log


def test_install_runs_apt_get_for_what_is_missing_and_says_what_it_did(tmp_path, monkeypatch):
    log = _fake_apt(tmp_path, monkeypatch)
    b = _backend(SystemPackage("gpuenv-test-sim", "command:gpuenv-test-sim", "the simulator"),
                 SystemPackage("sh-pkg", "command:sh", "a shell"))
    assert b.unavailable_reason() is not None
    report = sysm.install([b])
    assert log.read_text().splitlines() == ["update -qq", "install -y -qq --no-install-recommends gpuenv-test-sim"]
    assert report.installed == ["gpuenv-test-sim"] and report.failed is None and report.missing == []
    assert report.backends[0].line(frozenset(report.installed)) == "sysfake: gpuenv-test-sim, sh-pkg: installed now (gpuenv-test-sim)"
    assert b.unavailable_reason() is None
    # nothing missing: apt-get is not called again
    log.unlink()
    assert sysm.install([b]).installed == [] and not log.exists()


def test_install_that_cannot_or_fails_says_what_is_missing_and_the_command(tmp_path, monkeypatch):
    _fake_apt(tmp_path, monkeypatch, fails=True)
    b = _backend(SystemPackage("gpuenv-test-sim", "command:gpuenv-test-sim", "the simulator"))
    failed = sysm.install([b])
    assert failed.failed == "apt-get install exited 100: E: Unable to locate package gpuenv-test-sim"
    assert failed.backends[0].line() == ("sysfake: missing Debian's gpuenv-test-sim (the simulator): apt-get install gpuenv-test-sim "
                                         "(as root), or `make install` as root")
    monkeypatch.setattr(sysm.os, "geteuid", lambda: 1000)
    assert "not root" in sysm.install([b]).not_tried


def test_gpuenv_system_lists_every_declared_package(cli):
    r = cli("system")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    for b in REG.visible():
        for p in b.system:
            assert p.name in r.stdout
    j = cli("list", "backends", "--json")
    import json

    assert j.returncode == 0 and set(json.loads(j.stdout)) == {b.name for b in REG.visible()}
    bad = cli("list", "tasks", "--json")
    assert bad.returncode == 2 and "gpuenv list backends --json" in bad.stderr


def test_make_install_installs_the_declarations_and_ci_installs_none_of_them_itself():
    """CI stayed green while `make install` lacked debootstrap, because .ci/run installed it (issue 48)."""
    make = (ROOT / "Makefile").read_text()
    stamp = make.split("$(STAMP): pyproject.toml", 1)[1].split("\ninstall:", 1)[0]
    assert "$(GPUENV) system --install" in stamp
    assert stamp.index("system --install") < stamp.index("gpuenv.backends.godot4.install")  # debootstrap before it is used
    ci = (ROOT / ".ci" / "run").read_text()
    ci_installs = set(re.findall(r"need\+=\(([^)]*)\)", ci))
    ci_packages = {name for group in ci_installs for name in group.split()}
    assert ci_packages == {"chromium", "chromium-driver", "docker.io"}
    declared = {p.name for b in REG.visible() for p in b.system}
    assert not ci_packages & declared
    for name in declared:  # nor does a line of .ci/run name one outside a comment
        code = [line for line in ci.splitlines() if not line.lstrip().startswith("#")]
        assert not any(re.search(rf"(^|[\s(]){re.escape(name)}($|[\s)])", line) for line in code), name


def test_images_install_what_their_backends_declare():
    for img in images().values():
        args = system_args(img)
        wanted = [p for b in img.backends for p in REG.get(b).system]
        assert args.get("SYSTEM_PACKAGES", "").split() == [p.apt_name(pinned=True) for p in wanted if p.role == "run"]
        assert args.get("BUILD_PACKAGES", "").split() == [p.name for p in wanted if p.role == "build"]
        dockerfile = (ROOT / img.dockerfile).read_text()
        for arg in ("SYSTEM_PACKAGES", "BUILD_PACKAGES"):
            # an image whose backends declare such packages takes them as that build arg, and one that declares none has no such arg
            assert (f"ARG {arg}\n" in dockerfile) == (arg in args), (img.name, arg)
            assert bake()["target"][img.name]["args"].get(arg) == args.get(arg)
        assert "libgl1" not in dockerfile and "godot3-server=" not in dockerfile and "install -y --no-install-recommends gcc" not in dockerfile
    assert system_args(images()["godot"]) == {"SYSTEM_PACKAGES": "godot3-server=3.2.3-stable-1+b3"}  # the version it was measured with


def test_a_declared_package_is_one_field_of_a_backend():
    # a plug-in declares its packages as the built-ins do: the field exists with an empty default
    assert [f.default for f in dataclasses.fields(Backend) if f.name == "system"] == [()]


def _links_out(repo) -> list[str]:
    """The links git tracks in repo that point outside it."""
    files = subprocess.run(["git", "-C", str(repo), "ls-files", "-s"], capture_output=True, text=True, check=True).stdout
    out = []
    for line in files.splitlines():
        if line.startswith("120000 "):
            link = repo / line.split("\t", 1)[1]
            target = (link.parent / link.readlink()).resolve() if link.is_symlink() else None
            if target is None or not target.is_relative_to(repo.resolve()):
                out.append(f"{link.relative_to(repo)} -> {target}")
    return out


def test_no_tracked_symlink_points_outside_the_repository(tmp_path):
    """A link into one machine's ~/.cache was committed at the repository's root (f2d77ae)."""
    assert _links_out(ROOT) == []
    # the check finds one: a repository with a link out and a link within
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "docs" / "a.md").write_text("a")
    (repo / "inside").symlink_to("docs/a.md")
    (repo / "resources").symlink_to("/root/.cache/gpuenv/somewhere/resources")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    assert _links_out(repo) == ["resources -> /root/.cache/gpuenv/somewhere/resources"]

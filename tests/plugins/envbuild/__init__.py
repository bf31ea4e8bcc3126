"""Build steps for tests/test_envs.py: one that leaves a mark in the environment it is given (with
that environment's interpreter), one that fails as a compiler would."""

from __future__ import annotations

import subprocess
from pathlib import Path


def mark(python: str, work: Path) -> None:
    assert work.is_dir() and not any(work.iterdir()), "the build step gets an empty scratch folder"
    subprocess.run([python, "-c", "import pathlib, sys, sysconfig; "
                    "pathlib.Path(sysconfig.get_paths()['purelib'], 'envbuild_mark.py').write_text(f'PREFIX = {sys.prefix!r}')"],
                   check=True)


def fail(python: str, work: Path) -> None:
    raise RuntimeError("gcc: command not found\nsecond line")

"""The README and docs/ name only paths that exist: a moved or deleted file breaks this test, not a
newcomer's first read (issue 26). Checked: link targets, and `code` spans that name a repository path
from its root (src/..., tests/..., docs/..., suites/..., ...); outputs a run writes (results/local,
results/site, results/sweeps, results/asv) are not repository paths."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "results" / "published" / "README.md"]
ROOTS = ("src/", "tests/", "docs/", "suites/", "bench/", "docker/", "claims/", "tools/", ".ci/", ".github/", "results/published")
OUTPUTS = ("results/local", "results/site", "results/sweeps", "results/asv", "results/dispatch")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")


def named_paths(doc: Path) -> list[tuple[str, Path]]:
    text = doc.read_text()
    out = []
    for target in LINK.findall(text):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        out.append((target, (doc.parent / target.split("#", 1)[0]).resolve()))
    for token in CODE.findall(text):
        token = token.rstrip(".,:;)")
        if token.startswith(ROOTS) and not token.startswith(OUTPUTS) and not any(c in token for c in "*<>{}$"):
            out.append((token, ROOT / token.split(":", 1)[0]))
    return out


def test_every_repository_path_the_docs_name_exists():
    missing = [f"{doc.relative_to(ROOT)}: {name}" for doc in DOCS for name, path in named_paths(doc) if not path.exists()]
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


def test_the_check_sees_a_missing_path(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("see `src/gpuenv/nope.py` and [this](nope.md) and `results/local/x` and [web](https://example.org)\n")
    assert [name for name, path in named_paths(doc) if not path.exists()] == ["nope.md", "src/gpuenv/nope.py"]


def test_the_readme_is_a_front_door():
    """The two commands, a current table with its machine and run, and the command list, early."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md is {len(lines)} lines: the manual belongs in docs/"
    text = "\n".join(lines[:120])
    assert "make bench" in text and "make test" in text
    assert re.search(r"run `\d{8}T\d{6}Z-[0-9a-f]{6}`", text), "the results table names its run"
    assert "## Commands" in "\n".join(lines)


def test_every_environment_variable_gpuenv_reads_is_documented():
    import re

    src = "\n".join(p.read_text() for p in (ROOT / "src" / "gpuenv").rglob("*.py"))
    names = set(re.findall(r"GPUENV_[A-Z0-9_]+", src))
    documented = set(re.findall(r"GPUENV_[A-Z0-9_]+", (ROOT / "docs" / "environment.md").read_text()))
    assert len(names) > 15 and not names - documented, sorted(names - documented)

"""What every command module shares: the typer app, the two consoles, exit codes, and the few ways a
command speaks (a skipped file, an error line, an interruption). Text from outside gpuenv goes
through gpuenv.escape before it is printed."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from gpuenv.errors import UserError
from gpuenv.escape import markup, terminal

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # -h as well, as on every other tool
    help="gpuenv: one harness for RL simulator throughput, the same in every backend.",
)


def _flag_hint_dropped() -> None:
    """Typer's help gives every option a type hint, `<bool>` for a flag too, which takes no value:
    a flag shows none (as in click's, argparse's and pyperf's help)."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "gpuenv", False):  # older typer (a sweep's version set) has no such hint
        return

    def display_type_rich(self: TyperOption, ctx: object) -> str | None:
        return None if self.is_flag and self.metavar is None else shown(self, ctx)  # type: ignore[arg-type]

    display_type_rich.gpuenv = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flag_hint_dropped()


def _version(value: bool) -> None:
    if value:
        from gpuenv import __version__
        from gpuenv.measure.system import git_sha

        git = git_sha()
        commit = str(git.get("sha") or "")
        sha = f", commit {commit[:12]}{' (uncommitted changes)' if git.get('dirty') else ''}" if commit else ""
        print(f"gpuenv {__version__}{sha}")
        raise typer.Exit(0)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                          help="print gpuenv's version and commit, and exit")) -> None:
    """gpuenv: one harness for RL simulator throughput, the same in every backend."""
# Piped output (make, CI logs) gets a width the tables fit in; a terminal keeps its own.
# emoji=False: ":smile:" in a record is text, not a picture (markup() escapes the rest)
console = Console(width=None if sys.stdout.isatty() else 132, emoji=False)
err_console = Console(stderr=True, soft_wrap=True, highlight=False, emoji=False)  # one message, one line

DEFAULT_OUT = Path("results/local")
EXIT_USER_ERROR = 2
EXIT_CASE_FAILED = 1
EXIT_INTERRUPTED = 130


class Interrupted(Exception):
    """A command stopped by Ctrl-C (or SIGTERM, SIGHUP) that says what it kept: its one line, exit 130."""


def out_dir(value: str) -> Path:
    """An --out value as a path; empty is refused (pathlib would quietly take it as the current directory)."""
    if not value.strip():
        raise UserError("--out is empty; pass a directory, e.g. --out results/local")
    return Path(value)


def print_skipped(problems: list[str]) -> None:
    """What a reader left out and why, one line each (file names and record text escaped)."""
    for msg in problems:
        err_console.print(f"[yellow]skipped[/] {markup(msg)}")


def print_warnings(notes: list[str]) -> None:
    for note in notes:
        console.print(f"[yellow]warning[/] {markup(note)}")


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

"""The gpuenv command line: one module per command group, each command parses, calls one library
function and prints what it returns (text from outside gpuenv through gpuenv.escape).

  run       bench, bench-image, dispatch, sweep (and the hidden worker)
  history   show, compare, regressions, report, asv-import, export-gab
  answers   claims, decide
  machine   list, info, doctor, images

Every user-fixable problem is one line on stderr and exit code 2 (never a traceback).
"""

from __future__ import annotations

import sys
from typing import Any

import typer

# isort: off
from gpuenv.cli import run, machine, history, answers  # noqa: F401 - each registers its commands; this order is --help's
# isort: on
from gpuenv.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    Interrupted,
    app,
    console,
    err_console,
    error_line,
    os_error_text,
)
from gpuenv.errors import UserError
from gpuenv.escape import terminal

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

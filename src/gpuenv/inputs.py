"""Reading the files a user or another machine hands gpuenv (suites, the claims register, records):
a regular file of a sane size, parsed without a traceback whatever it holds. A leaf module.

A FIFO or a device is refused before it is opened (opening a FIFO blocks), the size is capped (a
suite, a register or a record is kilobytes), and nesting deep enough to exhaust Python's recursion
(a 1 KB TOML file of 500 nested arrays) is refused in one line, like any other malformed file.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

from gpuenv.errors import UserError

MAX_TEXT_BYTES = 4 * 2**20


def read_regular(path: Path, what: str, max_bytes: int = MAX_TEXT_BYTES, kind: str = "this kind of file") -> bytes:
    """The bytes of `path`, a regular file of at most max_bytes; UserError otherwise ("what: ...")."""
    try:
        # O_NONBLOCK: opening a FIFO (one swapped in after any check) returns at once instead of blocking
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())  # of what was opened, not of what a path named a moment before
            if not stat.S_ISREG(st.st_mode):
                raise UserError(f"{what}: not a regular file")
            data = f.read(max_bytes + 1)  # the cap holds even if the file grows
    except FileNotFoundError:
        raise UserError(f"{what}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{what}: not a regular file (a folder)") from None
    except OSError as e:
        raise UserError(f"{what}: cannot read it ({e.strerror or e})") from None
    if len(data) > max_bytes:
        raise UserError(f"{what}: {max(st.st_size, len(data)) / 2**20:,.1f} MiB is too large for {kind} (at most {max_bytes // 2**20} MiB)")
    return data


def read_toml(path: Path, what: str) -> dict:
    """A TOML file as a dict; UserError naming `what` for anything that is not a sane TOML file."""
    data = read_regular(path, what)
    try:
        return tomllib.loads(data.decode())
    except UnicodeDecodeError as e:
        raise UserError(f"{what}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{what}: not valid TOML: {e}") from None
    except RecursionError:
        raise UserError(f"{what}: nested too deep to be read (no suite or register nests more than a few levels)") from None

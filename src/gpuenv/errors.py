"""Errors a user can fix. The CLI prints them as one line and exits 2."""


class UserError(Exception):
    """Bad input or a missing prerequisite: the message says what is wrong and what to do."""


class BackendUnavailable(UserError):
    """A backend's libraries are not installed (or cannot run on this machine)."""


class Unsupported(UserError):
    """The backend cannot run this case faithfully (a release without the env, an adapter too new for
    the library): recorded with failure kind `unsupported`, never worked around."""


class Diverged(Exception):
    """Training produced a non-finite value: recorded with failure kind `diverged`."""


class NoSpace(UserError):
    """The results directory has no room for another record (ENOSPC, EDQUOT): the run stops there,
    every record already written is kept."""


def first_line(e: BaseException) -> str:
    """An error as a record keeps it beside a figure it did not spoil: its type and its first line, at most 300 characters."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]

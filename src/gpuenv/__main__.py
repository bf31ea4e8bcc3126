"""`gpuenv` and `python -m gpuenv`. The command line's modules are imported inside the guard, so a
Ctrl-C at any moment (the first imports take a few tenths of a second) is one line and exit 130,
never a traceback; a reader piped into `head` ends quietly."""

import os
import sys

EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        from gpuenv.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (Ctrl-C)\n")
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # `gpuenv show ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main()

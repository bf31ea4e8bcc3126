"""The one output layer for text that comes from outside gpuenv's code: record fields, suite and
claims files, file names, environment variables, other programs' output.

Such text must never become a terminal control sequence, rich markup, HTML or matplotlib mathtext.
Each output has one function here, and every reader passes outside text through it:

  terminal(s)  control characters (ANSI/OSC escape sequences, BEL, CR, C1 controls, bidi overrides)
               shown as visible escapes (\\x1b), never sent raw; one line unless multiline=True
  markup(s)    terminal(s), then rich markup escaped ("[/]" is printed, not parsed)
  html(s)      HTML-escaped, quotes included (for element text and attribute values)
  mathtext(s)  terminal(s) with "$" escaped, for a matplotlib label, title or tick: a "$\\foo$" in a
               version or a name is drawn as typed, never parsed as math (and never fatal). Only
               text from data: matplotlib's own log-axis ticks are mathtext and must stay so.
  pyplot()     matplotlib's pyplot, drawing to files (Agg)

A leaf module: it imports nothing of gpuenv.
"""

from __future__ import annotations

import functools
import html as _html
import re
from typing import Any

# C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI on some terminals), and
# the Unicode format characters that reorder or hide text (bidi overrides and isolates, zero-width).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_NEWLINE = re.compile("[\n\t]")


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _visible(m: re.Match[str]) -> str:
    c = m.group(0)
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def terminal(value: Any, *, multiline: bool = False) -> str:
    """`value` as text safe to print: every control character shown as an escape (\\x1b, \\u202e).
    Newlines and tabs are kept with multiline=True, else shown as \\n and \\t (one value, one line)."""
    text = _CONTROL.sub(_visible, str(value))
    return text if multiline else _NEWLINE.sub(_visible, text)


def markup(value: Any, *, multiline: bool = False) -> str:
    """`value` for a rich string that may carry markup of gpuenv's own: controls shown, markup escaped."""
    from rich.markup import escape

    return escape(terminal(value, multiline=multiline))


def html(value: Any) -> str:
    """`value` as HTML element text or an attribute value (quotes escaped)."""
    return _html_of(str(value))


@functools.lru_cache(maxsize=1 << 16)
def _html_of(text: str) -> str:
    """A report site escapes the same names, versions and labels on thousands of pages: once each."""
    return _html.escape(terminal(text, multiline=True), quote=True)


def mathtext(value: Any) -> str:
    """`value` for a matplotlib label, title or tick label: "$" escaped, so no mathtext is parsed from data."""
    return terminal(value).replace("$", r"\$")


def pyplot() -> Any:
    """matplotlib.pyplot for files (Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt

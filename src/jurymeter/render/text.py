"""Text for a terminal: every control character escaped, JSON a terminal can show, numbers as tables print them.

Below the CLI and the analyses' command declarations alike (both print reports);
rich is its only outside import. ``out`` and ``err`` are the consoles every
printer writes to (stdout and stderr).
"""

from __future__ import annotations

import contextvars
import math
import re
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from rich.text import Text

# The characters a terminal may act on instead of showing: C0 and C1 controls and DEL
# (ANSI escapes, a carriage return that overwrites the line, NUL), format characters
# (bidi overrides such as U+202E that reorder what follows, zero-width characters),
# lone surrogates (which cannot even be encoded) and the line and paragraph separators:
# Unicode's categories Cc, Cf, Cs, Zl and Zp (Unicode 14, Python 3.11's; the test
# derives the set from unicodedata and compares).
CONTROL_RANGES: tuple[tuple[int, int], ...] = (
    (0x0, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD),
    (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
    (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xDFFF), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges) + "]")


_CONTROL = _char_class(CONTROL_RANGES)
_CONTROL_BUT_NEWLINE = _char_class(((0x0, 0x9), (0xB, 0x1F), *CONTROL_RANGES[1:]))
# In orjson's output C0 controls inside strings are escaped already; those left are its layout.
_JSON_UNSAFE = _char_class(CONTROL_RANGES[1:])
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else (f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")


def safe_text(value: object, *, newlines: bool = False) -> str:
    r"""``value`` as text a terminal shows as written: every control character escaped.

    ANSI escapes, ``\r``, ``\x00``, the other C0 and C1 controls, bidi overrides
    and the other format characters, lone surrogates and the line separators
    become Python-style escapes (``\x1b``, ``\r``, ``\u202e``), so an id cannot
    recolour, overwrite or reorder a terminal's output, and two ids that differ
    only there still look different. Everything else, backslashes included, is
    kept: JSON and CSV output (``--json``, ``--csv``) is where the exact value is.

    Parameters
    ----------
    value
        Any value; a non-string is shown as ``str(value)``.
    newlines
        Keep ``\n`` (a whole message of several lines); an id's newline is escaped.

    Returns
    -------
    str
        The escaped text (``value`` itself when it holds no such character).
    """
    text = value if isinstance(value, str) else str(value)
    return (_CONTROL_BUT_NEWLINE if newlines else _CONTROL).sub(_escaped, text)


def _json_escaped(match: re.Match[str]) -> str:
    units = match.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}" for i in range(0, len(units), 2))


def json_text(value: Any) -> str:
    r"""``value`` as indented JSON whose every character a terminal acts on is a ``\u`` escape.

    orjson escapes the C0 controls; DEL, the C1 controls, bidi overrides and the
    other format characters and the line separators it writes as they are. Written
    as escapes they are the same value to any JSON reader, and harmless on a terminal.
    """
    import orjson

    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()
    return text if text.isascii() and "\x7f" not in text else _JSON_UNSAFE.sub(_json_escaped, text)


def print_json(value: Any) -> None:
    """Write ``value`` to stdout as :func:`json_text` and a newline (a command's ``--json`` output)."""
    sys.stdout.write(json_text(value) + "\n")


def shorten(value: object, width: int) -> str:
    """``value`` escaped (:func:`safe_text`) and cut to about ``width`` characters, the cut said.

    The cut falls between escapes, never inside one, and says how many characters
    of the original were left out.
    """
    text = value if isinstance(value, str) else str(value)
    shown: list[str] = []
    length = 0
    for used, char in enumerate(text):
        piece = safe_text(char)
        if length + len(piece) > width:
            return "".join(shown) + f"... (+{len(text) - used:,} characters)"
        shown.append(piece)
        length += len(piece)
    return "".join(shown)


class SafeConsole(Console):
    r"""A rich console that shows every string it renders with its control characters escaped.

    Each string a command prints (a line, a table's cell, title or header) becomes
    rich ``Text`` through :meth:`render_str`; escaping there, before rich measures
    it, keeps tables aligned, and no printer can forget it. Printers still pass
    ids through :func:`safe_text` so an id's newline shows as ``\n`` (a message
    keeps its own line breaks here). The consoles read no markup and no emoji
    codes: ids such as ``[/]`` (a markup error), ``[n/a, n/a]`` (swallowed as a
    style) or ``:cat:`` (an emoji) are printed as written.
    """

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Text:
        return super().render_str(safe_text(text, newlines=True), *args, **kwargs)


# Outside a terminal rich would wrap tables at 80 columns; logs read better wide.
_WIDTH = None if sys.stdout.isatty() else 160
out = SafeConsole(highlight=False, width=_WIDTH, markup=False, emoji=False)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


def fmt(value: Any, digits: int = 3, *, none: str = "n/a") -> str:
    """A number for a table: ``none`` for a null (not estimable), "never" for infinity."""
    if value is None:
        return none
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "never" if value > 0 else "-inf"
        return f"{value:.{digits}f}"
    return str(value)


def fmt_bound(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if value == float("inf"):
        return "never"
    return f"{value:.0f}" if float(value).is_integer() and abs(value) >= 2 else f"{value:.3f}"


# Whether a command's printout lists every note (``--verbose``) or folds them into a count.
VERBOSE: contextvars.ContextVar[bool] = contextvars.ContextVar("jurymeter_verbose", default=False)


def print_notes(notes: list[str]) -> None:
    """Notes, one a line with ``--verbose`` (:data:`VERBOSE`), else one line with their count."""
    if not notes:
        return
    if VERBOSE.get():
        for note in notes:
            out.print(note, markup=False)
        return
    out.print(f"{len(notes)} note{'s' if len(notes) != 1 else ''}: --verbose lists them", markup=False)


# The symbols a maintainer may not know (issue 24, point 6): (term, the words that mark a use of it,
# what it means with its unit), in the order a fit's page first uses them. One list for both: the pages' glossary line (render.html.glossary_html) and the commands' --help.
GLOSSARY: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("E\u03c1\u00b2", ("E\u03c1\u00b2", "E rho^2", "erho2"),
     "expected generalizability coefficient, 0\u20131: the share of the variance of system means that is "
     "real system difference, at the observed judges and items (0.80 is the conventional bar for a ranking)"),
    ("\u03a6", ("\u03a6",),
     "dependability, 0\u20131: like E\u03c1\u00b2 but for a system's absolute score, so the judges' and "
     "items' own levels count as error too"),
    ("MDD", ("MDD",),
     "minimum detectable difference (MDD95): the smallest difference of two system means the design tells "
     "apart at 95 %, in score points"),
    ("ceiling", ("ceiling",),
     "the E\u03c1\u00b2 one judge (or a fixed panel) reaches with unlimited items: a judge's disagreement "
     "with the others does not shrink as items are added"),
    ("logit", ("logit",),
     "log odds, ln(p / (1 \u2212 p)): 0 is even odds; +1 turns 50 % into 73 %"),
    ("slot-A advantage", ("slot-A advantage", "slot A", "Slot-A advantage"),
     "a system's win rate when shown first minus its win rate when shown second, in percentage points "
     "(0: the judge ignores the order)"),
)


def glossary_help() -> str:
    """The symbols of :data:`GLOSSARY` explained, one paragraph each, for a command's ``--help`` epilog."""
    return "\n\n".join(f"{term}: {meaning}." for term, _, meaning in GLOSSARY)

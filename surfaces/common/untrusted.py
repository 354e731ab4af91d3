"""One rendering rule for untrusted text: every string an MCP server supplies (form message, titles,
descriptions, option labels, defaults, property names, progress messages, Tool names and descriptions, result
text) passes :func:`display_text` before any surface shows it (docs/security.md#threats-and-what-stops-them).

Characters that could drive a terminal or hide and reorder what is shown are replaced by a visible marker,
never silently dropped, so a reader sees that the text was altered:

- C0 controls (U+0000-U+001F) and DEL become their Unicode control pictures (``ESC`` → ``␛``, ``BEL`` → ``␇``,
  ``DEL`` → ``␡``); a newline is kept only in multiline text (else a space), a tab becomes a space, a CR LF pair
  is one newline;
- C1 controls (U+0080-U+009F), bidi embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069,
  U+200E/U+200F, U+061C), zero-width characters (U+200B-U+200D, U+2060, U+FEFF), every other format character
  (Unicode category ``Cf``) and lone surrogates become :data:`MARKER` (``�``);
- the line and paragraph separators (U+2028/U+2029) are newlines;
- in multiline text a run of blank lines is collapsed to one, so a message cannot push what follows (or what
  precedes, on a scrolled terminal) out of view with newlines.

Right-to-left letters, wide characters, emoji without joiners and combining marks are kept as they are.
Markup is *not* escaped here: each surface still shows the result as plain text (Textual ``markup=False``,
``textContent`` on the page). The web page applies the same rule in ``static/js/untrusted.js``; both run the
cases of ``tests/fixtures/untrusted_text_cases.json``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MARKER = "\ufffd"
"""Shown in place of a C1, bidi, zero-width or other format character."""

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")
_NEWLINES = re.compile(r"\r\n|[\u2028\u2029]")
_BLANK_RUNS = re.compile(r"\n(?:[ ]*\n){2,}")


@dataclass(frozen=True)
class Shown:
    """Untrusted text as a surface shows it, and whether any character had to be replaced."""

    text: str
    altered: bool


def _picture(char: str) -> str | None:
    """The replacement of one character, or ``None`` when it is shown as it is."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if 0x80 <= code <= 0x9F or char in BIDI_CONTROLS or char in ZERO_WIDTH:
        return MARKER
    if code < 0xA0:
        return None
    if unicodedata.category(char) in ("Cf", "Cs"):
        return MARKER
    return None


def shown_text(text: str, *, multiline: bool = False) -> Shown:
    """:func:`display_text` with a ``was altered`` signal (a character was replaced by a marker)."""
    text = _NEWLINES.sub("\n", text)
    out: list[str] = []
    altered = False
    for char in text:
        if char == "\n":
            out.append("\n" if multiline else " ")
            continue
        if char == "\t":
            out.append(" ")
            continue
        picture = _picture(char)
        if picture is None:
            out.append(char)
        else:
            out.append(picture)
            altered = True
    shown = "".join(out)
    if multiline:
        shown = _BLANK_RUNS.sub("\n\n", shown)
    return Shown(shown, altered)


def display_text(text: str, *, multiline: bool = False) -> str:
    """``text`` safe to write to a terminal or a page as plain text (the module's rule): no control, C1, bidi,
    zero-width or format character survives; each is replaced by a visible marker. Newlines are kept only when
    ``multiline`` (runs of blank lines collapsed to one), else each is a space."""
    return shown_text(text, multiline=multiline).text


def was_altered(text: str) -> bool:
    """Whether :func:`display_text` replaces any character of ``text``."""
    return shown_text(text, multiline=True).altered

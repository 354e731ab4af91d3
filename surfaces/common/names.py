"""The "did you mean" of every surface that is given a name it does not know (``maka call``, the MCP front door)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.6
"""How alike (``difflib`` ratio) a known name must be to be suggested."""


def closest_name(requested: str, names: Iterable[str]) -> str | None:
    """The known name most like ``requested`` (``difflib.get_close_matches``), or None when none is close."""
    close = difflib.get_close_matches(requested, list(names), n=1, cutoff=CUTOFF)
    return close[0] if close else None

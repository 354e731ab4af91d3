"""Strict decoding of JSON text that users and callers send (``maka answer --values``, ``maka call --args``,
the web page's answer body, ``CallTool.arguments_json``).

Python's :func:`json.loads` is lenient where the project must decode exact shapes (docs/security.md, "Bad
input"): a repeated object name silently keeps the last value (``{"env": "staging", "env": "production"}``
answers ``production``), ``NaN`` / ``Infinity`` are accepted although RFC 8259 §6 has no such numbers, a
``\\ud800`` escape yields an unpaired surrogate that cannot be encoded as UTF-8 again (protobuf ``string``,
the MCP wire), and deep nesting raises :class:`RecursionError`, not :class:`ValueError`. :func:`loads` refuses
each of them with :class:`JsonTextError`, whose message names the problem and never quotes the text.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted; far beyond any form answer or Tool argument object."""


class JsonTextError(ValueError):
    """The text is not strict JSON; ``str(error)`` (``not JSON: …`` or ``not strict JSON: …``) reads after
    "X is" and never quotes the text's values; ``problem`` is the part after the colon."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.problem = message.partition(": ")[2]


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JsonTextError(f"not strict JSON: the name {json.dumps(key)[:80]} appears twice in one object")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise JsonTextError(f"not strict JSON: {name} is not a JSON number")


def _check_tree(value: object) -> None:
    """Depth and Unicode of every string (keys included), without recursion."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise JsonTextError(
                    "not strict JSON: a string has an unpaired surrogate escape (not Unicode)"
                ) from None
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise JsonTextError(f"not strict JSON: nested deeper than {MAX_DEPTH} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def loads(text: str | bytes | bytearray) -> Any:
    """Parse ``text`` as strict JSON (RFC 8259): unique object names, finite numbers, valid Unicode, at most
    :data:`MAX_DEPTH` levels. Raises :class:`JsonTextError` otherwise (also for text that is not JSON, with
    the position of the first problem, and bytes that are not UTF-8)."""
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_constant=_constant)
    except JsonTextError:
        raise
    except json.JSONDecodeError as error:
        raise JsonTextError(f"not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except UnicodeDecodeError:
        raise JsonTextError("not JSON: the bytes are not UTF-8") from None
    except RecursionError:
        raise JsonTextError(f"not strict JSON: nested deeper than {MAX_DEPTH} levels") from None
    _check_tree(value)
    return value

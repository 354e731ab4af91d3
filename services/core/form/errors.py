"""Errors of the form contract: one exception carrying every violation with a stable reason."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum


class FormErrorReason(StrEnum):
    """Stable codes; the names match ``maka.form.v1.FormErrorReason`` without its prefix."""

    SCHEMA_NOT_OBJECT = "SCHEMA_NOT_OBJECT"
    SCHEMA_UNSUPPORTED_KEYWORD = "SCHEMA_UNSUPPORTED_KEYWORD"
    SCHEMA_UNSUPPORTED_TYPE = "SCHEMA_UNSUPPORTED_TYPE"
    SCHEMA_INVALID_VALUE = "SCHEMA_INVALID_VALUE"
    SCHEMA_UNKNOWN_REQUIRED = "SCHEMA_UNKNOWN_REQUIRED"
    SCHEMA_DUPLICATE_OPTION = "SCHEMA_DUPLICATE_OPTION"
    SCHEMA_INVALID_DEFAULT = "SCHEMA_INVALID_DEFAULT"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    ANSWER_MISSING_REQUIRED = "ANSWER_MISSING_REQUIRED"
    ANSWER_UNKNOWN_FIELD = "ANSWER_UNKNOWN_FIELD"
    ANSWER_WRONG_TYPE = "ANSWER_WRONG_TYPE"
    ANSWER_CONSTRAINT = "ANSWER_CONSTRAINT"
    ANSWER_INVALID_ACTION = "ANSWER_INVALID_ACTION"


_MEMO_MAX_CHARS = 256
"""Longest ``parts`` (together) whose pointer is memoised: a field name is at most 200 code points
(``Limits.max_label_chars``); anything longer is a caller's unknown key and is never kept."""


def pointer(*parts: str) -> str:
    """A JSON Pointer (RFC 6901) from unescaped ``parts``: ``pointer("properties", "a/b")`` → ``/properties/a~1b``.

    Unpaired surrogates are replaced with U+FFFD. With no parts it returns ``$``, the whole schema or answer
    (``maka.form.v1.FieldViolation.path``). Never raises. Memoised for short parts: every form and answer check
    builds the pointer of each field on the happy path too, and a Host sees the same few field names over and
    over; a long unknown key (an answer may carry one of 100 000 characters) is not kept, so hostile answers
    cannot fill the cache with megabytes of names.
    """
    if sum(len(part) for part in parts) > _MEMO_MAX_CHARS:
        return _pointer(*parts)
    return _memo_pointer(*parts)


@functools.lru_cache(maxsize=4096)
def _memo_pointer(*parts: str) -> str:
    return _pointer(*parts)


def _pointer(*parts: str) -> str:
    if not parts:
        return "$"
    # Unpaired surrogates (possible in parsed JSON) become U+FFFD so a path always encodes as UTF-8.
    clean = (part.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for part in parts)
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in clean)


@dataclass(frozen=True, slots=True)
class Violation:
    """One rejected place: ``path`` is ``/properties/<name>/<keyword>`` for schemas, ``/<name>`` for answers."""

    path: str
    reason: FormErrorReason
    description: str


class FormError(ValueError):
    """A schema or an answer broke the form contract. ``violations`` lists every problem found.

    Messages never quote answer values (they may be secrets); they name paths and constraints.
    """

    def __init__(self, violations: list[Violation]) -> None:
        if not violations:
            raise ValueError("FormError needs at least one violation")
        self.violations: tuple[Violation, ...] = tuple(violations)
        super().__init__("; ".join(f"{v.path}: {v.reason.value}: {v.description}" for v in self.violations))

    @property
    def reason(self) -> FormErrorReason:
        """The first violation's reason (the headline code)."""
        return self.violations[0].reason

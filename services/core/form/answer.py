"""Validate an answer against a form (RFC "Core owns exact-shape decoding ..."; MCP 2026-07-28
``client/elicitation.mdx`` "Response Actions": clients SHOULD validate responses against the schema).

Also home of :func:`check_value`, the one per-field value rule shared by answer validation and by the
schema decoder's ``default`` check, so a default is accepted exactly when a user could submit it.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Mapping

import jsonschema
from email_validator import EmailNotValidError, validate_email

from services.core.form.errors import FormError, FormErrorReason, Violation, pointer
from services.core.form.model import (
    Action,
    Answer,
    BooleanField,
    Field,
    Form,
    FormValue,
    MultiSelectField,
    NumberField,
    SingleSelectField,
    StringField,
    StringFormat,
)
from services.core.limits import DEFAULT_LIMITS, Limits

MAX_SAFE_INTEGER = 2**53
"""Integers are interoperable JSON integers only within ±2^53 (RFC 8259 §6; I-JSON RFC 7493 §2.2)."""

_FORMAT_CHECKER = jsonschema.FormatChecker(["date", "date-time", "uri"])
"""RFC 3339 ``date`` / ``date-time`` (rfc3339-validator) and RFC 3986 ``uri`` (rfc3986-validator)."""

Problem = tuple[FormErrorReason, str]
"""One rule a value broke: the reason and a description that never quotes the value."""


def format_conforms(fmt: StringFormat, text: str) -> bool:
    """Whether ``text`` conforms to ``fmt`` (MCP 2026-07-28 elicitation "Requested Schema": email|uri|date|date-time).

    ``date``/``date-time`` are RFC 3339 and ``uri`` is RFC 3986 (``jsonschema.FormatChecker`` with the
    ``format-nongpl`` extras); ``email`` is checked for syntax only (:func:`email_syntax_ok`): JSON Schema's
    ``email`` format is the RFC 5321 mailbox *syntax*, so internal names (``ops@corp.local``, ``a@localhost``,
    ``x@example.test``) are addresses too. Never raises.
    """
    if fmt is StringFormat.EMAIL:
        return email_syntax_ok(text)
    return _FORMAT_CHECKER.conforms(text, fmt.value)


_DOMAIN_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_SYNTAX_ONLY_DOMAIN = "example.com"
"""A stand-in domain: the local part is checked by ``email_validator`` against it, the real domain by shape."""


def email_syntax_ok(text: str) -> bool:
    """Whether ``text`` is an email address by syntax alone (RFC 5321 ``Mailbox``; RFC 6531 for UTF-8).

    The local part (dot-atom or quoted string, UTF-8 allowed) is checked by ``email_validator``; the domain
    must be a host name (dot-separated LDH labels of 1-63 characters after IDNA encoding, 253 in all; one
    label is enough) or an address literal (``[192.0.2.1]``, ``[IPv6:2001:db8::1]``). No DNS, no
    "globally deliverable" or special-use name rule: internal domains such as
    ``corp.local`` are real addresses for a form (docs/acceptance.md#protocol-and-form-correctness).
    Never raises.
    """
    local, at, domain = text.rpartition("@")
    if not at or not local or not domain or len(text) > 254:
        return False
    try:
        validate_email(f"{local}@{_SYNTAX_ONLY_DOMAIN}", check_deliverability=False, allow_quoted_local=True)
    except EmailNotValidError:
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        try:
            ipaddress.ip_address(literal[5:] if literal.startswith("IPv6:") else literal)
        except ValueError:
            return False
        return True
    try:
        ascii_domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    labels = ascii_domain.split(".")
    return len(ascii_domain) <= 253 and all(_DOMAIN_LABEL.fullmatch(label) for label in labels)


def is_valid_unicode(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no unpaired surrogates), i.e. can travel in JSON (RFC 8259 §8.1) and
    protobuf ``string``. Never raises."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def safe_number(value: object) -> int | float | None:
    """``value`` if it is a JSON number that can be carried exactly, else ``None``.

    A ``bool`` is never a number; a ``float`` must be finite (no NaN/Infinity); an ``int`` must be within
    ±2^53 so it survives a JSON/double round trip. Never raises. Source: MCP 2026-07-28 ``NumberSchema``;
    RFC 8259 §6 / RFC 7493 §2.2 (interoperable numbers); RFC criterion 5.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def safe_integer(value: object) -> int | None:
    """``value`` as ``int`` if it is an integral JSON number within ±2^53 (``1.0`` and ``1e1`` count), else ``None``.

    Never raises. Source: MCP 2026-07-28 ``NumberSchema`` ``type: "integer"``; RFC 7493 §2.2.
    """
    number = safe_number(value)
    if number is None:
        return None
    if isinstance(number, float):
        if not number.is_integer() or abs(number) > MAX_SAFE_INTEGER:
            return None
        return int(number)
    return number


def int_if_integral(value: float) -> int | float:
    """A double holding an integral value within ±2^53 becomes ``int`` (integer fields); others stay ``float``."""
    if math.isfinite(value) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return value


def _check_string(field: StringField, value: object, limits: Limits) -> tuple[FormValue | None, list[Problem]]:
    if not isinstance(value, str):
        return None, [(FormErrorReason.ANSWER_WRONG_TYPE, "must be a string")]
    if not is_valid_unicode(value):
        return None, [(FormErrorReason.ANSWER_WRONG_TYPE, "must be valid Unicode text (no unpaired surrogates)")]
    problems: list[Problem] = []
    length = len(value)  # code points
    if length > limits.max_string_value_chars:
        problems.append(
            (FormErrorReason.LIMIT_EXCEEDED, f"must be at most {limits.max_string_value_chars} characters (cap)")
        )
    if field.min_length is not None and length < field.min_length:
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, f"must be at least {field.min_length} characters"))
    if field.max_length is not None and length > field.max_length:
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, f"must be at most {field.max_length} characters"))
    if field.format is not None and not format_conforms(field.format, value):
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, f"must be a valid {field.format.value}"))
    return value, problems


def _check_number(field: NumberField, value: object) -> tuple[FormValue | None, list[Problem]]:
    number: int | float | None
    if field.integer:
        number = safe_integer(value)
        if number is None:
            return None, [(FormErrorReason.ANSWER_WRONG_TYPE, "must be an integral number within ±2^53")]
    else:
        number = safe_number(value)
        if number is None:
            return None, [
                (FormErrorReason.ANSWER_WRONG_TYPE, "must be a finite number (integers within ±2^53, not a boolean)")
            ]
    problems: list[Problem] = []
    if field.minimum is not None and number < field.minimum:
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, f"must be at least {field.minimum:g}"))
    if field.maximum is not None and number > field.maximum:
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, f"must be at most {field.maximum:g}"))
    return number, problems


def _check_single(field: SingleSelectField, value: object) -> tuple[FormValue | None, list[Problem]]:
    if not isinstance(value, str):
        return None, [(FormErrorReason.ANSWER_WRONG_TYPE, "must be a string option value")]
    if value not in {option.value for option in field.options}:
        return None, [(FormErrorReason.ANSWER_CONSTRAINT, "must be one of the declared options")]
    return value, []


def _check_multi(field: MultiSelectField, value: object) -> tuple[FormValue | None, list[Problem]]:
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        return None, [(FormErrorReason.ANSWER_WRONG_TYPE, "must be an array of string option values")]
    picks: tuple[str, ...] = tuple(value)
    problems: list[Problem] = []
    allowed = {option.value for option in field.options}
    if any(pick not in allowed for pick in picks):
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, "every item must be one of the declared options"))
    if len(set(picks)) != len(picks):
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, "items must be unique"))
    if field.min_items is not None and len(picks) < field.min_items:
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, f"must have at least {field.min_items} items"))
    if field.max_items is not None and len(picks) > field.max_items:
        problems.append((FormErrorReason.ANSWER_CONSTRAINT, f"must have at most {field.max_items} items"))
    return picks, problems


def check_value(
    field: Field, value: object, *, limits: Limits = DEFAULT_LIMITS
) -> tuple[FormValue | None, list[Problem]]:
    """Check one ``value`` (parsed JSON or Python domain value) against ``field``.

    Returns ``(normalized, problems)``: ``normalized`` is the value in its declared type (an integer field's
    ``1.0`` → ``1``; a multi-select list → ``tuple``) or ``None`` when the type is wrong; ``problems`` lists
    every broken rule as ``(FormErrorReason, description)`` — ``ANSWER_WRONG_TYPE``, ``ANSWER_CONSTRAINT``
    or ``LIMIT_EXCEEDED`` — and is empty when the value is valid. Descriptions never quote the value.

    Rules (MCP 2026-07-28 ``client/elicitation.mdx`` "Requested Schema"; RFC criterion 5): JSON types are exact
    (a ``bool`` is never a number; NaN/Infinity are not numbers; an integer is integral and within ±2^53);
    string lengths are Unicode code points; formats per :func:`format_conforms`; options are members of the
    declared set; multi-select items are unique and within ``minItems``/``maxItems``. Never raises: problems are
    returned, not thrown.
    """
    if isinstance(field, StringField):
        return _check_string(field, value, limits)
    if isinstance(field, NumberField):
        return _check_number(field, value)
    if isinstance(field, BooleanField):
        if not isinstance(value, bool):
            return None, [(FormErrorReason.ANSWER_WRONG_TYPE, "must be a boolean")]
        return value, []
    if isinstance(field, SingleSelectField):
        return _check_single(field, value)
    return _check_multi(field, value)


def _answer_bytes(values: object) -> int | None:
    try:
        text = json.dumps(values, ensure_ascii=False, default=list)
    except (TypeError, ValueError, RecursionError):
        return None  # unserializable values are reported per field as ANSWER_WRONG_TYPE
    return len(text.encode("utf-8", "surrogatepass"))


def validate_answer(form: Form, answer: Answer, *, limits: Limits = DEFAULT_LIMITS) -> Answer:
    """Validate ``answer`` against ``form``; return the canonical answer.

    Shapes: ``answer.values`` maps field name → ``str | int | float | bool | tuple[str, ...]`` (a list is accepted
    for a multi-select and normalized to a tuple). The returned :class:`Answer` has values in the form's field
    order, each in its declared JSON type (integer fields hold ``int``).

    Rules (MCP 2026-07-28 ``client/elicitation.mdx`` "Response Actions" and "Requested Schema"; RFC criterion 5,
    "Runtime Host validates an accepted value against the stored canonical form"):

    - ``decline`` and ``cancel`` carry no values (``ANSWER_INVALID_ACTION``); an action that is not an
      :class:`Action` is ``ANSWER_INVALID_ACTION``.
    - ``accept``: the values' JSON is at most ``limits.max_answer_bytes`` UTF-8 bytes (``LIMIT_EXCEEDED``);
      keys are declared fields only (``ANSWER_UNKNOWN_FIELD``); each value passes :func:`check_value`.
    - A default is never filled in: a field the answer leaves out stays out. Surfaces pre-fill defaults and
      send what the user left untouched, so an omitted field is one the user cleared (MCP 2026-07-28
      elicitation: the user MUST be able to review and modify what is sent;
      docs/acceptance.md#protocol-and-form-correctness).
    - A required field that is absent is ``ANSWER_MISSING_REQUIRED``, with or without a default (a required
      boolean without a default therefore needs an explicit ``true`` or ``false``).
    - A required multi-select submitted as ``[]`` is *present*; it is rejected (``ANSWER_CONSTRAINT``) only
      when ``minItems`` >= 1 says so. Every surface applies this same rule.

    Raises :class:`FormError` listing every violation (path ``/<field name>`` as a JSON Pointer, or ``$`` for
    the whole answer); descriptions never quote submitted values.
    """
    if not isinstance(answer.action, Action):
        raise FormError(
            [Violation("$", FormErrorReason.ANSWER_INVALID_ACTION, "action must be accept, decline or cancel")]
        )
    if answer.action is not Action.ACCEPT:
        if answer.values:
            raise FormError(
                [Violation("$", FormErrorReason.ANSWER_INVALID_ACTION, f"{answer.action.value} carries no values")]
            )
        return Answer(answer.action)
    if not isinstance(answer.values, Mapping):
        raise FormError([Violation("$", FormErrorReason.ANSWER_WRONG_TYPE, "values must be an object")])
    violations: list[Violation] = []
    size = _answer_bytes(answer.values)
    if size is not None and size > limits.max_answer_bytes:
        raise FormError(
            [
                Violation(
                    "$",
                    FormErrorReason.LIMIT_EXCEEDED,
                    f"answer is {size} bytes; the cap is {limits.max_answer_bytes}",
                )
            ]
        )
    declared = {field.name for field in form.fields}
    for key in answer.values:
        if key not in declared:
            name = key if isinstance(key, str) else repr(type(key).__name__)
            violations.append(Violation(pointer(name), FormErrorReason.ANSWER_UNKNOWN_FIELD, "is not a declared field"))
    values: dict[str, FormValue] = {}
    for field in form.fields:
        path = pointer(field.name)
        if field.name in answer.values:
            normalized, problems = check_value(field, answer.values[field.name], limits=limits)
            violations.extend(Violation(path, reason, description) for reason, description in problems)
            if normalized is not None and not problems:
                values[field.name] = normalized
        elif field.required:
            violations.append(Violation(path, FormErrorReason.ANSWER_MISSING_REQUIRED, "is required"))
    if violations:
        raise FormError(violations)
    return Answer(Action.ACCEPT, values)

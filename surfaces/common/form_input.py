"""Pure helpers every surface shares to turn what a user typed into a form answer.

The form contract is :mod:`services.core.form` (field kinds: string with formats email|uri|date|
date-time, number, integer, boolean, single_select, multi_select). A surface keeps the *raw* text of
every text-like widget and calls:

- :func:`initial_raw` / :func:`initial_raws` — what a widget starts with (the field's default).
- :func:`parse_field` — one raw input → a typed :data:`services.core.form.FormValue` (or ``None`` when
  left empty), raising :class:`FieldInputError` with a short user-facing message.
- :func:`check_form_input` — every raw input → an :class:`Answer` ready to submit, or per-field inline
  errors from :func:`parse_field` and :func:`services.core.form.validate_answer` (RFC: "invalid input
  is shown inline and blocks Submit").
- :func:`field_kind`, :func:`field_hints`, :func:`format_hint`, :func:`constraint_texts`, :func:`filter_options`,
  :func:`plain_text`, :func:`format_time_left`, :func:`round_summary` — display helpers.

Messages never quote the value the user typed (it may be a secret).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TypeAlias

from services.core.form import (
    Action,
    Answer,
    BooleanField,
    Field,
    Form,
    FormError,
    FormErrorReason,
    FormValue,
    MultiSelectField,
    NumberField,
    Option,
    SingleSelectField,
    StringField,
    StringFormat,
    validate_answer,
)
from surfaces.common.untrusted import display_text

RawInput: TypeAlias = str | bool | tuple[str, ...] | None
"""What a widget holds: text (string/number/integer/date fields), ``bool | None`` (boolean), the chosen
option value ``str | None`` (single select), the picked option values ``tuple[str, ...]`` (multi select)."""

MAX_SAFE_INTEGER = 2**53
"""Integers must lie within ±2^53 (MCP/JSON interoperable range)."""

_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_JSON_INTEGER = re.compile(r"-?(?:0|[1-9]\d*)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")

# Bidi embeddings/overrides/isolates and other invisible format controls that could reorder or hide
# untrusted text (Unicode TR9 explicit formatting characters).


class FieldInputError(ValueError):
    """A raw input cannot be turned into a value of its field; the message is user-facing and value-free."""


def field_kind(field: Field) -> str:
    """The field's kind name: ``string``, ``email``, ``uri``, ``date``, ``date-time``, ``number``, ``integer``,
    ``boolean``, ``single_select`` or ``multi_select``."""
    if isinstance(field, StringField):
        return field.format.value if field.format is not None else "string"
    if isinstance(field, NumberField):
        return "integer" if field.integer else "number"
    if isinstance(field, BooleanField):
        return "boolean"
    if isinstance(field, SingleSelectField):
        return "single_select"
    return "multi_select"


def format_hint(field: Field) -> str:
    """A short placeholder showing the expected shape (``YYYY-MM-DD``, ``name@example.com``, ...); empty when none."""
    if isinstance(field, StringField):
        return {
            StringFormat.EMAIL: "name@example.com",
            StringFormat.URI: "https://example.com/path",
            StringFormat.DATE: "YYYY-MM-DD",
            StringFormat.DATE_TIME: "YYYY-MM-DDTHH:MM:SSZ (or +HH:MM)",
            None: "",
        }[field.format]
    if isinstance(field, NumberField):
        return "a whole number" if field.integer else "a number"
    return ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else repr(float(value))


def _bounds(low: str | None, high: str | None, both: str, at_least: str, at_most: str) -> list[str]:
    """One text for an optional lower and upper bound: ``both`` / ``at_least`` / ``at_most`` formatted with
    ``{low}`` and ``{high}``; nothing when neither is set."""
    if low is not None and high is not None:
        return [both.format(low=low, high=high)]
    if low is not None:
        return [at_least.format(low=low)]
    if high is not None:
        return [at_most.format(high=high)]
    return []


def _text(value: int | float | None, render: Callable[[int | float], str] = str) -> str | None:
    return None if value is None else render(value)


def constraint_texts(field: Field) -> list[str]:
    """Human-readable constraints of ``field`` (lengths in characters, ranges, item counts)."""
    if isinstance(field, StringField):
        return _bounds(
            _text(field.min_length), _text(field.max_length),
            "{low} to {high} characters", "at least {low} characters", "at most {high} characters",
        )  # fmt: skip
    if isinstance(field, NumberField):
        return _bounds(
            _text(field.minimum, _num), _text(field.maximum, _num),
            "between {low} and {high}", "at least {low}", "at most {high}",
        )  # fmt: skip
    if isinstance(field, MultiSelectField):
        return _bounds(
            _text(field.min_items), _text(field.max_items),
            "pick {low} to {high}", "pick at least {low}", "pick at most {high}",
        )  # fmt: skip
    return []


def field_hints(field: Field) -> list[str]:
    """Plain-language hints for a field's kind and constraints, for people rather than programs, e.g.
    ``["Choose one"]``, ``["Pick 1 to 3"]``, ``["Whole number between 1 and 10"]``, ``["Email address"]``,
    ``["Date (YYYY-MM-DD)"]``, ``["Text", "at most 20 characters"]``, ``["Yes or no"]``. Internal kind names
    (``single_select``, ...) never appear; see :func:`field_kind` for those."""
    if isinstance(field, StringField):
        kind = {
            StringFormat.EMAIL: "Email address",
            StringFormat.URI: "Web address (URL)",
            StringFormat.DATE: "Date (YYYY-MM-DD)",
            StringFormat.DATE_TIME: "Date and time (YYYY-MM-DDTHH:MM:SS with Z or +HH:MM)",
            None: "Text",
        }[field.format]
        return [kind, *constraint_texts(field)]
    if isinstance(field, NumberField):
        kind = "Whole number" if field.integer else "Number"
        ranges = constraint_texts(field)
        return [f"{kind} {ranges[0]}" if ranges else kind]
    if isinstance(field, BooleanField):
        return ["Yes or no"]
    if isinstance(field, SingleSelectField):
        return ["Choose one"]
    picks = constraint_texts(field)
    return [picks[0][:1].upper() + picks[0][1:] if picks else "Pick any"]


def constraints_dict(field: Field) -> dict[str, object]:
    """The field's constraints as JSON-ready data (``minLength``, ``maxLength``, ``format``, ``minimum``, ``maximum``,
    ``minItems``, ``maxItems``), using the MCP schema keyword names; absent constraints are left out."""
    out: dict[str, object] = {}
    if isinstance(field, StringField):
        if field.min_length is not None:
            out["minLength"] = field.min_length
        if field.max_length is not None:
            out["maxLength"] = field.max_length
        if field.format is not None:
            out["format"] = field.format.value
    elif isinstance(field, NumberField):
        if field.minimum is not None:
            out["minimum"] = field.minimum
        if field.maximum is not None:
            out["maximum"] = field.maximum
    elif isinstance(field, MultiSelectField):
        if field.min_items is not None:
            out["minItems"] = field.min_items
        if field.max_items is not None:
            out["maxItems"] = field.max_items
    return out


def field_options(field: Field) -> tuple[Option, ...]:
    """The options of a select field (empty for other kinds)."""
    if isinstance(field, SingleSelectField | MultiSelectField):
        return field.options
    return ()


def default_value(field: Field) -> FormValue | None:
    """The field's schema default as a typed value, or ``None``."""
    return field.default


def initial_raw(field: Field) -> RawInput:
    """What the field's widget starts with: its default in raw form (text for text-like kinds, ``bool | None``
    for boolean, option value or ``None`` for single select, a tuple for multi select — ``None`` while a
    multi select without a default is untouched, so an optional one is left out unless the user picks)."""
    if isinstance(field, StringField):
        return field.default or ""
    if isinstance(field, NumberField):
        if field.default is None:
            return ""
        return _num(field.default) if field.integer or float(field.default).is_integer() else repr(field.default)
    if isinstance(field, BooleanField):
        return field.default
    if isinstance(field, SingleSelectField):
        return field.default
    return None if field.default is None else tuple(field.default)


def initial_raws(form: Form) -> list[RawInput]:
    """:func:`initial_raw` for every field, in form order."""
    return [initial_raw(f) for f in form.fields]


def _parse_text(field: StringField, raw: str) -> str | None:
    if raw == "":
        return None
    if field.format is StringFormat.DATE:
        text = raw.strip()
        if not _DATE.fullmatch(text):
            raise FieldInputError("enter a date as YYYY-MM-DD")
        try:
            date.fromisoformat(text)
        except ValueError:
            raise FieldInputError("not a real calendar date") from None
        return text
    if field.format is StringFormat.DATE_TIME:
        text = raw.strip()
        if not _DATE_TIME.fullmatch(text):
            raise FieldInputError("enter a date-time as YYYY-MM-DDTHH:MM:SS with Z or an offset like +02:00")
        try:
            datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
        except ValueError:
            raise FieldInputError("not a real date and time") from None
        return text
    if field.format in (StringFormat.EMAIL, StringFormat.URI):
        return raw.strip()
    return raw


def _parse_number(field: NumberField, raw: str) -> int | float | None:
    text = raw.strip()
    if text == "":
        return None
    if field.integer:
        if not _JSON_INTEGER.fullmatch(text):
            raise FieldInputError("enter a whole number (digits, optional leading -)")
        value = int(text)
        if abs(value) > MAX_SAFE_INTEGER:
            raise FieldInputError("number is too large")
        return value
    if not _JSON_NUMBER.fullmatch(text):
        raise FieldInputError("enter a number like 42 or -3.5")
    number = float(text)
    if not math.isfinite(number):
        raise FieldInputError("number is too large")
    return number


def parse_field(field: Field, raw: RawInput) -> FormValue | None:
    """Turn one widget's raw input into a typed value; ``None`` means "left empty" (omitted from the answer).

    - string: the text as typed (empty → ``None``); ``date`` must be ``YYYY-MM-DD`` and a real date,
      ``date-time`` an RFC 3339 date-time with ``Z`` or an offset; email/uri are trimmed (their syntax is
      checked by ``validate_answer``).
    - number: a JSON number → ``float``; integer: JSON integer digits within ±2^53 → ``int``.
    - boolean: ``bool`` (``None`` → omitted). single select: the option value, which must be one of the
      options. multi select: the picked values in option order, each an option, no duplicates.

    Raises :class:`FieldInputError` (message without the value) on malformed input or a mismatched raw type.
    """
    if isinstance(field, StringField):
        if not isinstance(raw, str | None):
            raise FieldInputError("expected text")
        return _parse_text(field, raw or "")
    if isinstance(field, NumberField):
        if not isinstance(raw, str | None):
            raise FieldInputError("expected a number")
        return _parse_number(field, raw or "")
    if isinstance(field, BooleanField):
        if raw is None:
            return None
        if not isinstance(raw, bool):
            raise FieldInputError("expected yes or no")
        return raw
    if isinstance(field, SingleSelectField):
        if raw is None or raw == "":
            return None
        if not isinstance(raw, str) or raw not in {o.value for o in field.options}:
            raise FieldInputError("choose one of the listed options")
        return raw
    if raw is None:
        return None
    if isinstance(raw, str | bool):
        raise FieldInputError("expected a list of picks")
    allowed = [o.value for o in field.options]
    picks = set(raw)
    if len(picks) != len(raw):
        raise FieldInputError("each option may be picked once")
    if not picks <= set(allowed):
        raise FieldInputError("choose only listed options")
    ordered = tuple(v for v in allowed if v in picks)
    return ordered if ordered else ()


@dataclass(frozen=True)
class FormCheck:
    """The outcome of :func:`check_form_input`: an ``answer`` ready to submit, or errors.

    ``errors`` maps a field index to its inline message; ``form_errors`` holds problems not tied to a field.
    """

    answer: Answer | None
    errors: dict[int, str] = field(default_factory=lambda: dict[int, str]())
    form_errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the answer may be submitted."""
        return self.answer is not None and not self.errors and not self.form_errors


def _pointer(name: str) -> str:
    return "/" + name.replace("~", "~0").replace("/", "~1")


def _field_index(form: Form, path: str) -> int | None:
    for index, f in enumerate(form.fields):
        for candidate in (_pointer(f.name), "/" + f.name):
            if path == candidate or path.startswith(candidate + "/"):
                return index
    return None


def _describe(reason: FormErrorReason, description: str) -> str:
    if reason is FormErrorReason.ANSWER_MISSING_REQUIRED:
        return "required"
    return description or reason.value.lower().replace("_", " ")


def check_form_input(form: Form, raws: Sequence[RawInput] | Mapping[int, RawInput]) -> FormCheck:
    """Parse every field's raw input (by field index) and validate the resulting ``accept`` answer.

    One rule for every surface (docs/acceptance.md#protocol-and-form-correctness; the
    authority applies the same one):

    - a field left empty (text cleared, no option chosen, an untouched boolean or multi select without a
      default) is omitted — never refilled with its default — and an empty *required* field is reported as
      ``"required"``; so a required boolean without a default needs an explicit Yes or No;
    - a required multi select is answered with the picks, ``[]`` included (``minItems`` decides);
    - every other rule is :func:`services.core.form.validate_answer`'s (RFC: core owns validation).

    Returns a :class:`FormCheck`; never raises for bad input.
    """
    values: dict[str, FormValue] = {}
    errors: dict[int, str] = {}
    for index, f in enumerate(form.fields):
        raw = raws.get(index) if isinstance(raws, Mapping) else (raws[index] if index < len(raws) else None)
        if raw is None and f.required and isinstance(f, MultiSelectField):
            raw = ()  # nothing picked is an answer for a required multi select: [] (minItems decides)
        try:
            value = parse_field(f, raw)
        except FieldInputError as error:
            errors[index] = str(error)
            continue
        if value is None:
            if f.required:
                errors[index] = "required"
            continue
        values[f.name] = value
    answer = Answer(action=Action.ACCEPT, values=values)
    form_errors: list[str] = []
    try:
        normalized = validate_answer(form, answer)
    except FormError as error:
        for violation in error.violations:
            where = _field_index(form, violation.path)
            message = _describe(violation.reason, violation.description)
            if where is None:
                form_errors.append(message)
            elif where not in errors:
                errors[where] = message
        return FormCheck(answer=None, errors=errors, form_errors=tuple(form_errors))
    if errors:
        return FormCheck(answer=None, errors=errors)
    return FormCheck(answer=normalized)


def filter_options(options: Sequence[Option], query: str) -> list[Option]:
    """Options whose label or value contains ``query`` (case-insensitive, NFKC-normalized); all when empty."""
    needle = unicodedata.normalize("NFKC", query).casefold().strip()
    if not needle:
        return list(options)
    return [
        o
        for o in options
        if needle in unicodedata.normalize("NFKC", o.label).casefold()
        or needle in unicodedata.normalize("NFKC", o.value).casefold()
    ]


def plain_text(text: str, *, keep_newlines: bool = True) -> str:
    """Untrusted server text made safe to show as plain text: the one rule of
    :func:`surfaces.common.untrusted.display_text` (control, C1, bidi and zero-width characters replaced by a
    visible marker, runs of blank lines collapsed), newlines kept when ``keep_newlines``. Markup is *not*
    escaped here (see the surface's own escaping, e.g. ``rich.markup.escape`` or HTML escaping)."""
    return display_text(text, multiline=keep_newlines)


def format_time_left(expires_at: datetime | None, now: datetime) -> str:
    """How long a form stays open, e.g. ``"4m 05s left"``, ``"1h 02m left"``, ``"45s left"``; ``"expired"``
    when past; ``"no time limit"`` when ``expires_at`` is ``None``. Both datetimes must be timezone-aware."""
    if expires_at is None:
        return "no time limit"
    left = expires_at - now
    if left <= timedelta(0):
        return "expired"
    seconds = math.ceil(left.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m left"
    if minutes:
        return f"{minutes}m {secs:02d}s left"
    return f"{secs}s left"


def round_summary(position: int, size: int, deadline: datetime | None, now: datetime) -> str:
    """One line about a form's MRTR round, e.g. ``"form 1 of 2 · the round ends 14:05:09 UTC (4m 05s left)"``.

    The round's forms are answered together in one retry that the server accepts only until its
    ``requestState`` expires (``deadline``), so every form of the round shows the same deadline. Empty when
    the form is not part of a round (``size`` 0); the position is left out for a one-form round.
    """
    if size <= 0:
        return ""
    parts: list[str] = []
    if size > 1:
        parts.append(f"form {position} of {size}")
    if deadline is not None:
        ends = deadline.astimezone(UTC).strftime("%H:%M:%S UTC")
        parts.append(f"the round ends {ends} ({format_time_left(deadline, now)})")
    return " · ".join(parts)


def value_to_json(value: FormValue) -> object:
    """A typed value as JSON-ready data (multi-select tuple → list)."""
    return list(value) if isinstance(value, tuple) else value


def field_to_json(field: Field) -> dict[str, object]:
    """A field as JSON-ready data for machine output (``maka pending --json``): name, kind, label, description,
    required, constraints, default and options (``[{"value", "label"}]``)."""
    default = default_value(field)
    return {
        "name": field.name,
        "kind": field_kind(field),
        "label": field.label,
        "description": field.description,
        "required": field.required,
        "constraints": constraints_dict(field),
        "default": value_to_json(default) if default is not None else None,
        "options": [{"value": o.value, "label": o.label} for o in field_options(field)],
    }


def values_from_json(form: Form, data: object, *, untouched_defaults: bool = False) -> dict[str, FormValue]:
    """Values given as a JSON object (``maka answer ID accept --values JSON``, the web page's answer) → typed
    values by field.

    Numbers for integer fields must be integral; lists become tuples; ``null`` means "cleared" and the key is
    left out. With ``untouched_defaults`` (``maka answer``: a key the user did not mention is a field left
    untouched, like a pre-filled widget) every field absent from ``data`` that has a default gets it; a field
    given as ``null`` stays cleared. Unknown keys are kept as given so ``validate_answer`` reports them. Raises
    :class:`FieldInputError` when ``data`` is not an object or a value has a JSON type no field kind accepts.
    """
    if not isinstance(data, dict):
        raise FieldInputError("values must be a JSON object")
    by_name = {f.name: f for f in form.fields}
    out: dict[str, FormValue] = {}
    if untouched_defaults:
        for untouched in form.fields:
            if untouched.name not in data and untouched.default is not None:
                out[untouched.name] = untouched.default
    for key, value in data.items():
        f = by_name.get(key)
        if value is None:
            continue
        if isinstance(value, bool | str):
            out[key] = value
        elif isinstance(value, int | float):
            if isinstance(f, NumberField) and not f.integer:
                out[key] = float(value)
            elif isinstance(f, NumberField) and f.integer and isinstance(value, float) and value.is_integer():
                out[key] = int(value)
            else:
                out[key] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[key] = tuple(value)
        else:
            raise FieldInputError(f"value of {key!r} has an unsupported JSON type")
    return out

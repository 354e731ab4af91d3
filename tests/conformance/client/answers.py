"""The automatic answer of the conformance surface: accept every form with its defaults, or the
smallest value each field's constraints allow.

Pure logic over :mod:`services.core.form`; no I/O. The result is meant to pass
:func:`services.core.form.validate_answer` for every form the form contract can hold
(MCP 2026-07-28 elicitation "Requested Schema": string, number/integer, boolean, single-select,
multi-select).
"""

from __future__ import annotations

import math

from services.core.form import (
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

FORMAT_SAMPLES: dict[StringFormat, str] = {
    StringFormat.EMAIL: "conformance@example.com",
    StringFormat.URI: "https://example.com/",
    StringFormat.DATE: "2026-07-28",
    StringFormat.DATE_TIME: "2026-07-28T00:00:00Z",
}
"""The value given to a string field with a ``format`` and no default."""


def _string_value(field: StringField) -> str:
    if field.default is not None:
        return field.default
    if field.format is not None:
        return FORMAT_SAMPLES[field.format]
    length = max(field.min_length or 0, 1)
    if field.max_length is not None:
        length = min(length, field.max_length)
    return "x" * length


def _number_value(field: NumberField) -> int | float:
    if field.default is not None:
        return int(field.default) if field.integer else field.default
    if field.minimum is not None:
        value: float = field.minimum
        return math.ceil(value) if field.integer else value
    if field.maximum is not None and field.maximum < 0:
        return math.floor(field.maximum) if field.integer else field.maximum
    return 0


def _multi_value(field: MultiSelectField) -> tuple[str, ...]:
    if field.default is not None:
        return field.default
    count = max(field.min_items or 0, 1)
    if field.max_items is not None:
        count = min(count, field.max_items)
    return tuple(option.value for option in field.options[:count])


def field_value(field: Field) -> FormValue:
    """The automatic value of one field: its default when it has one, else the minimal valid value.

    string → its default, a sample of its ``format`` (:data:`FORMAT_SAMPLES`), or ``"x"`` repeated
    ``max(minLength, 1)`` times (capped by ``maxLength``); number/integer → default, ``minimum`` (rounded
    up for integers), a negative ``maximum``, or 0; boolean → default or ``True`` (the consent an
    automatic *accept* stands for); single-select → default or the first option; multi-select →
    default or the first ``max(minItems, 1)`` options (capped by ``maxItems``).
    """
    if isinstance(field, StringField):
        return _string_value(field)
    if isinstance(field, NumberField):
        return _number_value(field)
    if isinstance(field, BooleanField):
        return True if field.default is None else field.default
    if isinstance(field, SingleSelectField):
        return field.default if field.default is not None else field.options[0].value
    return _multi_value(field)


def automatic_answer(form: Form) -> Answer:
    """``accept`` with a value for every field of ``form`` (see :func:`field_value`), in form order.

    Source rule: the conformance harness's client scenarios expect the client to accept each form-mode
    ``elicitation/create`` (the harness expects a client that accepts with the defaults).
    Never raises for a form the form contract admits (select fields always have an option).
    """
    return Answer(action=Action.ACCEPT, values={field.name: field_value(field) for field in form.fields})

"""The form contract ⇄ MCP 2026-07-28 JSON shapes (parsed JSON: ``dict``/``list``/scalars).

- :func:`answer_to_elicit_result` / :func:`answer_from_elicit_result` — :class:`Answer` ⇄ bare MCP ``ElicitResult``.
- :func:`form_to_requested_schema` — :class:`Form` → canonical MCP ``requestedSchema`` (the inverse of
  :func:`~services.core.form.schema.decode_requested_schema`, which decodes a server's schema).

The ``maka.form.v1`` protobuf conversions are :mod:`services.core.form.protobuf`'s.
"""

from __future__ import annotations

import math
from typing import Any

from services.core.form.answer import int_if_integral
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
)

# --------------------------------------------------------------------------- Answer ⇄ MCP ElicitResult


def answer_to_elicit_result(answer: Answer) -> dict[str, Any]:
    """:class:`Answer` → the bare MCP ``ElicitResult`` JSON object (an ``inputResponses`` entry).

    Shapes: ``{"action": "accept", "content": {name: str | int | float | bool | list[str]}}`` or
    ``{"action": "decline"}`` / ``{"action": "cancel"}`` (no ``content``, no ``_meta``/``resultType``: in
    2026-07-28 ``ElicitResult`` does not extend ``Result``). Integers stay Python ``int`` so the JSON has no
    ``.0``; multi-select tuples become lists. Raises :class:`FormError` ``ANSWER_INVALID_ACTION`` when a
    decline/cancel carries values. Source: MCP 2026-07-28 ``schema.ts`` ``ElicitResult``; ``client/elicitation.mdx``
    "Response Actions".
    """
    if answer.action is not Action.ACCEPT:
        if answer.values:
            raise FormError(
                [Violation("$", FormErrorReason.ANSWER_INVALID_ACTION, f"{answer.action.value} carries no values")]
            )
        return {"action": answer.action.value}
    content: dict[str, Any] = {}
    for name, value in answer.values.items():
        content[name] = list(value) if isinstance(value, tuple | list) else value
    return {"action": Action.ACCEPT.value, "content": content}


def _content_value(value: object) -> FormValue | None:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def answer_from_elicit_result(result: object) -> Answer:
    """Exact-shape decode of a bare MCP ``ElicitResult`` (parsed JSON) into an :class:`Answer`.

    Accepts exactly ``{"action": "accept" | "decline" | "cancel", "content"?: {name: string | number | boolean |
    string[]}}``; ``content`` only with ``accept`` (an ``accept`` without it has no values). Arrays become tuples.

    Raises :class:`FormError`: ``ANSWER_INVALID_ACTION`` (not an object, unknown keys, missing/unknown action,
    ``content`` on decline/cancel); ``ANSWER_WRONG_TYPE`` (``content`` not an object; a value that is ``null``,
    an object, a non-string array item, NaN/Infinity — path ``/<name>``). Field-level rules are
    :func:`~services.core.form.answer.validate_answer`'s job. Source: MCP 2026-07-28 ``schema.ts``
    ``ElicitResult``; ``client/elicitation.mdx`` "Response Actions".
    """
    if not isinstance(result, dict):
        raise FormError(
            [Violation("$", FormErrorReason.ANSWER_INVALID_ACTION, "an ElicitResult must be a JSON object")]
        )
    extra = sorted(str(key) for key in result if key not in ("action", "content"))
    if extra:
        raise FormError(
            [
                Violation(pointer(key), FormErrorReason.ANSWER_INVALID_ACTION, "is not an ElicitResult key")
                for key in extra
            ]
        )
    raw_action = result.get("action")
    try:
        action = Action(raw_action) if isinstance(raw_action, str) else None
    except ValueError:
        action = None
    if action is None:
        raise FormError(
            [Violation(pointer("action"), FormErrorReason.ANSWER_INVALID_ACTION, "must be accept, decline or cancel")]
        )
    if "content" not in result:
        return Answer(action)
    if action is not Action.ACCEPT:
        raise FormError(
            [Violation(pointer("content"), FormErrorReason.ANSWER_INVALID_ACTION, f"{action.value} carries no content")]
        )
    content = result["content"]
    if not isinstance(content, dict):
        raise FormError([Violation(pointer("content"), FormErrorReason.ANSWER_WRONG_TYPE, "content must be an object")])
    values: dict[str, FormValue] = {}
    violations: list[Violation] = []
    for name, raw in content.items():
        if not isinstance(name, str):
            violations.append(
                Violation(pointer("content"), FormErrorReason.ANSWER_WRONG_TYPE, "content keys must be strings")
            )
            continue
        value = _content_value(raw)
        if value is None:
            violations.append(
                Violation(
                    pointer(name),
                    FormErrorReason.ANSWER_WRONG_TYPE,
                    "must be a string, number, boolean or string array",
                )
            )
        else:
            values[name] = value
    if violations:
        raise FormError(violations)
    return Answer(Action.ACCEPT, values)


# --------------------------------------------------------------------------- Form → requestedSchema


def _titled(field: SingleSelectField | MultiSelectField) -> bool:
    return any(option.label != option.value for option in field.options)


def _annotations(field: Field) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if field.label != field.name:
        out["title"] = field.label
    if field.description:
        out["description"] = field.description
    return out


def _bound_json(value: float, integer: bool) -> int | float:
    return int_if_integral(value) if integer and isinstance(value, float) else value


def field_to_property_schema(field: Field) -> dict[str, Any]:
    """One :class:`Field` → its canonical MCP ``PrimitiveSchemaDefinition`` (see :func:`form_to_requested_schema`).

    Never raises for a :class:`Field` built by this package. Source: MCP 2026-07-28 ``client/elicitation.mdx``
    "Requested Schema".
    """
    schema: dict[str, Any]
    if isinstance(field, StringField):
        schema = {"type": "string", **_annotations(field)}
        if field.min_length is not None:
            schema["minLength"] = field.min_length
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
        if field.format is not None:
            schema["format"] = field.format.value
    elif isinstance(field, NumberField):
        schema = {"type": "integer" if field.integer else "number", **_annotations(field)}
        if field.minimum is not None:
            schema["minimum"] = _bound_json(field.minimum, field.integer)
        if field.maximum is not None:
            schema["maximum"] = _bound_json(field.maximum, field.integer)
    elif isinstance(field, BooleanField):
        schema = {"type": "boolean", **_annotations(field)}
    elif isinstance(field, SingleSelectField):
        schema = {"type": "string", **_annotations(field)}
        if _titled(field):
            schema["oneOf"] = [{"const": option.value, "title": option.label} for option in field.options]
        else:
            schema["enum"] = [option.value for option in field.options]
    else:
        schema = {"type": "array", **_annotations(field)}
        if field.min_items is not None:
            schema["minItems"] = field.min_items
        if field.max_items is not None:
            schema["maxItems"] = field.max_items
        if _titled(field):
            schema["items"] = {"anyOf": [{"const": option.value, "title": option.label} for option in field.options]}
        else:
            schema["items"] = {"type": "string", "enum": [option.value for option in field.options]}
    if field.default is not None:
        default = field.default
        if isinstance(field, NumberField) and field.integer and isinstance(default, float):
            default = int_if_integral(default)
        schema["default"] = list(default) if isinstance(default, tuple) else default
    return schema


def form_to_requested_schema(form: Form) -> dict[str, Any]:
    """:class:`Form` → the canonical MCP 2026-07-28 form-mode ``requestedSchema`` (the inverse of
    :func:`~services.core.form.schema.decode_requested_schema`).

    Shape: ``{"type": "object", "properties": {name: PrimitiveSchemaDefinition}, "required"?: [name]}``, property
    order kept. ``title`` is emitted only when the label differs from the name; single-selects use ``enum`` when
    every label equals its value, else titled ``oneOf``; multi-selects ``items.enum`` / ``items.anyOf`` likewise.
    Integer bounds and defaults are JSON integers. Usable with a JSON Schema library (Draft 2020-12) to validate
    an ``ElicitResult.content``. Never raises for a :class:`Form` built by this package.
    Source: MCP 2026-07-28 ``client/elicitation.mdx`` "Requested Schema".
    """
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {field.name: field_to_property_schema(field) for field in form.fields},
    }
    required = [field.name for field in form.fields if field.required]
    if required:
        schema["required"] = required
    return schema

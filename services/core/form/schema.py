"""Decode an MCP 2026-07-28 form-mode ``requestedSchema`` into the form contract, and re-check forms.

Source rules: MCP 2026-07-28 ``client/elicitation.mdx`` "Requested Schema" (flat objects of primitive
properties: ``StringSchema``, ``NumberSchema``, ``BooleanSchema``, the single/multi-select ``EnumSchema``
shapes and the legacy ``enum`` + ``enumNames``), ``schema.ts`` ``ElicitRequestFormParams``; RFC criterion 5
("Core owns exact-shape decoding and repository caps ...").
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from services.core.form.answer import check_value, is_valid_unicode, safe_number
from services.core.form.errors import FormError, FormErrorReason, Violation, pointer
from services.core.form.mcp_json import form_to_requested_schema
from services.core.form.model import (
    BooleanField,
    Field,
    Form,
    MultiSelectField,
    NumberField,
    Option,
    Requester,
    SingleSelectField,
    StringField,
    StringFormat,
)
from services.core.limits import DEFAULT_LIMITS, Limits

UINT32_MAX = 2**32 - 1
"""``minLength``/``maxLength``/``minItems``/``maxItems`` travel as protobuf ``uint32``."""

_ROOT_KEYS = frozenset(
    {
        "$schema",
        "type",
        "properties",
        "required",
        "title",
        "description",
        "additionalProperties",
        "$id",
        "$comment",
        "examples",
    }
)
"""Root keys accepted. ``$id``, ``$comment`` and ``examples`` are annotations that cannot change what is valid
(JSON Schema 2020-12 core §8.2.1; JSON Schema 2020-12 validation §9): accepted and ignored
(docs/acceptance.md#protocol-and-form-correctness)."""

SUPPORTED_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
    }
)
"""``$schema`` values accepted (a trailing ``#`` is ignored): JSON Schema 2020-12 (MCP's default dialect) and the
two earlier drafts whose meaning for the flat primitive subset is the same. Anything else is an error: MCP
2026-07-28 ``basic/index`` "JSON Schema Usage" — an unsupported dialect MUST be reported, never validated as
2020-12 (docs/acceptance.md#protocol-and-form-correctness)."""
_COMMON_KEYS = frozenset({"type", "title", "description", "default"})
_STRING_KEYS = _COMMON_KEYS | {"minLength", "maxLength", "format"}
_NUMBER_KEYS = _COMMON_KEYS | {"minimum", "maximum"}
_ENUM_KEYS = _COMMON_KEYS | {"enum", "enumNames"}
_ONE_OF_KEYS = _COMMON_KEYS | {"oneOf"}
_ARRAY_KEYS = _COMMON_KEYS | {"items", "minItems", "maxItems"}
_TITLED_OPTION_KEYS = frozenset({"const", "title"})
_FORMATS: frozenset[object] = frozenset(StringFormat)

_Add = Callable[[str, FormErrorReason, str], None]

log = logging.getLogger("maka.form.schema")


class _Collector:
    """Accumulates violations so one error lists every problem found."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []

    def add(self, path: str, reason: FormErrorReason, description: str) -> None:
        self.violations.append(Violation(path, reason, description))

    def raise_if_any(self) -> None:
        if self.violations:
            raise FormError(self.violations)


def _request_bytes(message: object, requested_schema: object) -> int:
    """UTF-8 bytes of ``{"message": ..., "requestedSchema": ...}`` as JSON; raises ``FormError`` if not JSON."""
    try:
        text = json.dumps(
            {"message": message, "requestedSchema": requested_schema}, ensure_ascii=False, allow_nan=False
        )
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise FormError(
            [Violation("$", FormErrorReason.SCHEMA_INVALID_VALUE, "contains text that is not valid Unicode")]
        ) from None
    except (TypeError, ValueError, RecursionError):
        raise FormError(
            [Violation("$", FormErrorReason.SCHEMA_INVALID_VALUE, "is not a JSON value (or nests too deeply)")]
        ) from None


def _cap_text(add: _Add, path: str, text: str, cap: int, what: str) -> None:
    if len(text) > cap:
        add(path, FormErrorReason.LIMIT_EXCEEDED, f"{what} is {len(text)} characters; the cap is {cap}")


def _count(add: _Add, schema: Mapping[str, Any], key: str, parts: Sequence[str]) -> int | None:
    if key not in schema:
        return None
    value: object = schema[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINT32_MAX:
        add(
            pointer(*parts, key), FormErrorReason.SCHEMA_INVALID_VALUE, f"{key} must be a non-negative integer (uint32)"
        )
        return None
    return value


def _bound(add: _Add, schema: Mapping[str, Any], key: str, parts: Sequence[str]) -> int | float | None:
    """A ``minimum``/``maximum``: any finite JSON number. An integer beyond ±2^53 (``9223372036854775807``) is
    kept as the nearest double: answers stay within ±2^53 anyway, and the server's own schema is checked
    exactly before the retry (docs/acceptance.md#protocol-and-form-correctness)."""
    if key not in schema:
        return None
    raw = schema[key]
    value = safe_number(raw)
    if value is None and isinstance(raw, int) and not isinstance(raw, bool):
        try:
            value = float(raw)
        except OverflowError:
            value = None
    if value is None:
        add(pointer(*parts, key), FormErrorReason.SCHEMA_INVALID_VALUE, f"{key} must be a finite number")
    return value


class _PropertyDecoder:
    """Decodes one property schema at ``/properties/<name>``."""

    def __init__(self, name: str, schema: object, required: bool, collector: _Collector, limits: Limits) -> None:
        self.name = name
        self.schema = schema
        self.required = required
        self.add = collector.add
        self.limits = limits
        self.parts: tuple[str, ...] = ("properties", name)
        self.options_parts: tuple[str, ...] | None = None
        """Where this property's options were (``enum``, ``oneOf``, ``items/enum``, ``items/anyOf``)."""

    def path(self, *more: str) -> str:
        return pointer(*self.parts, *more)

    def decode(self) -> Field | None:
        schema = self.schema
        if not isinstance(schema, dict):
            self.add(self.path(), FormErrorReason.SCHEMA_INVALID_VALUE, "a property schema must be a JSON object")
            return None
        if not all(isinstance(key, str) for key in schema):
            self.add(self.path(), FormErrorReason.SCHEMA_INVALID_VALUE, "schema keys must be strings")
            return None
        kind = self._kind(schema)
        if kind is None:
            return None
        allowed = {
            "string": _STRING_KEYS,
            "number": _NUMBER_KEYS,
            "integer": _NUMBER_KEYS,
            "boolean": _COMMON_KEYS,
            "enum": _ENUM_KEYS,
            "oneOf": _ONE_OF_KEYS,
            "array": _ARRAY_KEYS,
        }[kind]
        unsupported = [key for key in schema if key not in allowed]
        for key in unsupported:
            self.add(
                self.path(key), FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD, f"{key} is not allowed in a {kind} property"
            )
        title = self._text("title")
        description = self._text("description")
        if unsupported:
            return None
        common: dict[str, Any] = {
            "name": self.name,
            "label": self.name if title is None else title,
            "description": description or "",
            "required": self.required,
        }
        field: Field | None
        if kind == "string":
            field = self._string(common)
        elif kind in ("number", "integer"):
            field = self._number(common, integer=kind == "integer")
        elif kind == "boolean":
            field = BooleanField(**common)
        elif kind == "enum":
            field = self._enum(common)
        elif kind == "oneOf":
            field = self._one_of(common)
        else:
            field = self._array(common)
        if field is None or "default" not in schema:
            return field
        default, problems = check_value(field, schema["default"], limits=self.limits)
        if problems or default is None:
            # A default the user could not submit is dropped, not fatal: the field is asked without a
            # pre-filled value (docs/acceptance.md#protocol-and-form-correctness). Never logged
            # with the value.
            log.info("form_default_dropped", extra={"path": self.path("default")})
            return field
        return _with_default(field, default)

    def _kind(self, schema: Mapping[str, Any]) -> str | None:
        if "type" not in schema:
            if "oneOf" in schema:
                return "oneOf"
            if "enum" in schema:
                return "enum"
            structural = [key for key in schema if key not in _COMMON_KEYS]
            for key in structural:
                self.add(
                    self.path(key), FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD, f"{key} is not allowed in form mode"
                )
            if not structural:
                self.add(self.path("type"), FormErrorReason.SCHEMA_UNSUPPORTED_TYPE, "type is required")
            return None
        kind = schema["type"]
        if isinstance(kind, list):
            self.add(self.path("type"), FormErrorReason.SCHEMA_UNSUPPORTED_TYPE, "union types are not allowed")
            return None
        if kind == "string":
            if "oneOf" in schema:
                return "oneOf"
            if "enum" in schema:
                return "enum"
            return "string"
        if kind in ("number", "integer", "boolean", "array"):
            return str(kind)
        if kind in ("object", "null"):
            self.add(
                self.path("type"), FormErrorReason.SCHEMA_UNSUPPORTED_TYPE, f"type {kind} is not allowed in form mode"
            )
            return None
        self.add(self.path("type"), FormErrorReason.SCHEMA_INVALID_VALUE, "type is not a JSON Schema primitive type")
        return None

    def _text(self, key: str) -> str | None:
        assert isinstance(self.schema, dict)
        if key not in self.schema:
            return None
        value = self.schema[key]
        if not isinstance(value, str):
            self.add(self.path(key), FormErrorReason.SCHEMA_INVALID_VALUE, f"{key} must be a string")
            return None
        return value

    def _string(self, common: dict[str, Any]) -> StringField | None:
        assert isinstance(self.schema, dict)
        min_length = _count(self.add, self.schema, "minLength", self.parts)
        max_length = _count(self.add, self.schema, "maxLength", self.parts)
        fmt: StringFormat | None = None
        if "format" in self.schema:
            raw = self.schema["format"]
            try:
                fmt = StringFormat(raw) if isinstance(raw, str) else None
            except ValueError:
                fmt = None
            if fmt is None:
                self.add(
                    self.path("format"),
                    FormErrorReason.SCHEMA_INVALID_VALUE,
                    "format must be one of email, uri, date, date-time",
                )
                return None
        if ("minLength" in self.schema and min_length is None) or ("maxLength" in self.schema and max_length is None):
            return None
        return StringField(**common, min_length=min_length, max_length=max_length, format=fmt)

    def _number(self, common: dict[str, Any], *, integer: bool) -> NumberField | None:
        assert isinstance(self.schema, dict)
        minimum = _bound(self.add, self.schema, "minimum", self.parts)
        maximum = _bound(self.add, self.schema, "maximum", self.parts)
        if ("minimum" in self.schema and minimum is None) or ("maximum" in self.schema and maximum is None):
            return None
        return NumberField(**common, integer=integer, minimum=minimum, maximum=maximum)

    def _string_list(self, value: object, parts: tuple[str, ...], what: str) -> list[str] | None:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.add(pointer(*parts), FormErrorReason.SCHEMA_INVALID_VALUE, f"{what} must be an array of strings")
            return None
        return value

    def _enum(self, common: dict[str, Any]) -> SingleSelectField | None:
        assert isinstance(self.schema, dict)
        self.options_parts = (*self.parts, "enum")
        values = self._string_list(self.schema["enum"], self.options_parts, "enum")
        if values is None:
            return None
        labels = values
        if "enumNames" in self.schema:
            names = self._string_list(self.schema["enumNames"], (*self.parts, "enumNames"), "enumNames")
            if names is None:
                return None
            if len(names) == len(values):  # legacy labels are used only when they line up with the values
                labels = names
        options = tuple(Option(value, label) for value, label in zip(values, labels, strict=True))
        return SingleSelectField(**common, options=options)

    def _titled(self, value: object, parts: tuple[str, ...]) -> tuple[Option, ...] | None:
        if not isinstance(value, list):
            self.add(pointer(*parts), FormErrorReason.SCHEMA_INVALID_VALUE, "must be an array of {const, title}")
            return None
        options: list[Option] = []
        ok = True
        for index, entry in enumerate(value):
            here = (*parts, str(index))
            if not isinstance(entry, dict):
                self.add(pointer(*here), FormErrorReason.SCHEMA_INVALID_VALUE, "an option must be {const, title}")
                ok = False
                continue
            extra = [key for key in entry if key not in _TITLED_OPTION_KEYS]
            for key in extra:
                self.add(
                    pointer(*here, str(key)),
                    FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD,
                    f"{key} is not allowed in an option",
                )
            const, title = entry.get("const"), entry.get("title")
            if not isinstance(const, str) or not isinstance(title, str):
                self.add(
                    pointer(*here), FormErrorReason.SCHEMA_INVALID_VALUE, "an option needs a string const and title"
                )
                ok = False
                continue
            ok = ok and not extra
            options.append(Option(const, title))
        return tuple(options) if ok else None

    def _one_of(self, common: dict[str, Any]) -> SingleSelectField | None:
        assert isinstance(self.schema, dict)
        self.options_parts = (*self.parts, "oneOf")
        options = self._titled(self.schema["oneOf"], self.options_parts)
        return None if options is None else SingleSelectField(**common, options=options)

    def _array(self, common: dict[str, Any]) -> MultiSelectField | None:
        assert isinstance(self.schema, dict)
        min_items = _count(self.add, self.schema, "minItems", self.parts)
        max_items = _count(self.add, self.schema, "maxItems", self.parts)
        bad_counts = ("minItems" in self.schema and min_items is None) or (
            "maxItems" in self.schema and max_items is None
        )
        items_parts = (*self.parts, "items")
        items = self.schema.get("items")
        if not isinstance(items, dict):
            self.add(
                pointer(*items_parts),
                FormErrorReason.SCHEMA_UNSUPPORTED_TYPE,
                "an array must have items with enum or anyOf of {const, title}",
            )
            return None
        item_type = items.get("type", "string")
        if item_type != "string" or isinstance(item_type, list):
            self.add(
                pointer(*items_parts, "type"),
                FormErrorReason.SCHEMA_UNSUPPORTED_TYPE,
                "only arrays of enum strings are allowed",
            )
            return None
        options: tuple[Option, ...] | None
        if "enum" in items and "anyOf" not in items:
            allowed = {"type", "enum"}
            self.options_parts = (*items_parts, "enum")
            values = self._string_list(items["enum"], (*items_parts, "enum"), "items.enum")
            options = None if values is None else tuple(Option(value, value) for value in values)
        elif "anyOf" in items and "enum" not in items:
            allowed = {"type", "anyOf"}
            self.options_parts = (*items_parts, "anyOf")
            options = self._titled(items["anyOf"], (*items_parts, "anyOf"))
        else:
            self.add(
                pointer(*items_parts),
                FormErrorReason.SCHEMA_UNSUPPORTED_TYPE,
                "array items must have exactly one of enum or anyOf of {const, title}",
            )
            return None
        extra = [key for key in items if key not in allowed]
        for key in extra:
            self.add(
                pointer(*items_parts, str(key)),
                FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD,
                f"{key} is not allowed in items",
            )
        if options is None or extra or bad_counts:
            return None
        return MultiSelectField(**common, options=options, min_items=min_items, max_items=max_items)


_DEFAULT_TYPES: dict[type, type | tuple[type, ...]] = {
    StringField: str,
    NumberField: (int, float),
    BooleanField: bool,
    SingleSelectField: str,
    MultiSelectField: tuple,
}
"""The Python type a (normalized) default has for each field kind."""


def _with_default(field: Field, default: object) -> Field:
    if not isinstance(default, _DEFAULT_TYPES[type(field)]):
        raise AssertionError("default does not match its field kind")  # check_value normalizes to the field's type
    return dataclasses.replace(field, default=cast(Any, default))  # type checked against the kind just above


def _options_path(field: SingleSelectField | MultiSelectField) -> tuple[str, ...]:
    """Where the options sit in the canonical schema (``form_to_requested_schema``)."""
    titled = any(option.label != option.value for option in field.options)
    if isinstance(field, SingleSelectField):
        return ("oneOf",) if titled else ("enum",)
    return ("items", "anyOf") if titled else ("items", "enum")


def _check_field_semantics(
    field: Field, add: _Add, limits: Limits, *, options_parts: tuple[str, ...] | None = None
) -> None:
    """The rules shared by decode and :func:`check_form`: caps, ranges, options, satisfiable counts."""
    parts = ("properties", field.name)
    if not field.name:
        add(pointer(*parts), FormErrorReason.SCHEMA_INVALID_VALUE, "a property name must not be empty")
    _cap_text(add, pointer(*parts), field.name, limits.max_label_chars, "property name")
    if field.label != field.name:  # a label that is the name was capped as the name
        _cap_text(add, pointer(*parts, "title"), field.label, limits.max_label_chars, "title")
    _cap_text(add, pointer(*parts, "description"), field.description, limits.max_description_chars, "description")
    if isinstance(field, StringField):
        if field.min_length is not None and field.min_length > limits.max_string_value_chars:
            add(
                pointer(*parts, "minLength"),
                FormErrorReason.LIMIT_EXCEEDED,
                f"minLength is above the string value cap {limits.max_string_value_chars}",
            )
        if field.min_length is not None and field.max_length is not None and field.min_length > field.max_length:
            add(
                pointer(*parts, "minLength"),
                FormErrorReason.SCHEMA_INVALID_VALUE,
                "minLength is greater than maxLength",
            )
    elif isinstance(field, NumberField):
        if field.minimum is not None and field.maximum is not None and field.minimum > field.maximum:
            add(pointer(*parts, "minimum"), FormErrorReason.SCHEMA_INVALID_VALUE, "minimum is greater than maximum")
    elif isinstance(field, SingleSelectField | MultiSelectField):
        options_parts = options_parts or (*parts, *_options_path(field))
        if not field.options:
            add(pointer(*options_parts), FormErrorReason.SCHEMA_INVALID_VALUE, "a select needs at least one option")
        if len(field.options) > limits.max_options:
            add(
                pointer(*options_parts),
                FormErrorReason.LIMIT_EXCEEDED,
                f"{len(field.options)} options; the cap is {limits.max_options}",
            )
            return
        seen: set[str] = set()
        for index, option in enumerate(field.options):
            here = pointer(*options_parts, str(index))
            if option.value in seen:
                add(here, FormErrorReason.SCHEMA_DUPLICATE_OPTION, "two options share one value")
            seen.add(option.value)
            _cap_text(add, here, option.value, limits.max_option_value_chars, "option value")
            if option.label != option.value:  # a label that is the value was capped as the value
                _cap_text(add, here, option.label, limits.max_label_chars, "option label")
        if isinstance(field, MultiSelectField):
            if field.min_items is not None and field.max_items is not None and field.min_items > field.max_items:
                add(
                    pointer(*parts, "minItems"),
                    FormErrorReason.SCHEMA_INVALID_VALUE,
                    "minItems is greater than maxItems",
                )
            if field.min_items is not None and field.min_items > len(field.options):
                add(
                    pointer(*parts, "minItems"),
                    FormErrorReason.SCHEMA_INVALID_VALUE,
                    "minItems is more than the options",
                )


def _check_form_bytes(form: Form, limits: Limits) -> None:
    size = _request_bytes(form.message, form_to_requested_schema(form))
    if size > limits.max_request_bytes:
        raise FormError(
            [
                Violation(
                    "$", FormErrorReason.LIMIT_EXCEEDED, f"form is {size} bytes; the cap is {limits.max_request_bytes}"
                )
            ]
        )


def _check_requester(requester: Requester, add: _Add, limits: Limits) -> None:
    for name in ("provider_id", "provider_display_name", "claimed_server", "claimed_tool"):
        value = getattr(requester, name)
        if not isinstance(value, str):
            add(pointer("requester", name), FormErrorReason.SCHEMA_INVALID_VALUE, f"{name} must be a string")
        else:
            _cap_text(add, pointer("requester", name), value, limits.max_label_chars, name)


def decode_requested_schema(
    requested_schema: object,
    *,
    message: str,
    requester: Requester | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Form:
    """Decode an MCP ``requestedSchema`` (parsed JSON) and its ``message`` into a :class:`Form`.

    Shapes: ``requested_schema`` is ``{"type": "object", "properties": {name: PrimitiveSchemaDefinition},
    "required"?: [name], "$schema"?: str}``. Property kinds: ``string`` (``minLength``, ``maxLength``, ``format``
    email|uri|date|date-time), ``number``/``integer`` (``minimum``, ``maximum``), ``boolean``, single-select
    (``enum``; titled ``oneOf`` of ``{const, title}``, with or without ``type: "string"``; legacy ``enum`` +
    ``enumNames``, whose labels are used only when the lengths match, otherwise the raw values), multi-select
    (``type: "array"`` with ``items.enum`` or ``items.anyOf`` of ``{const, title}``, ``minItems``, ``maxItems``).
    ``title``/``description`` become label/help (label falls back to the name); ``default`` is checked against
    its field with the same rule answers use, and dropped when it fails. Fields keep the server's property order.

    Tolerated and ignored at the root (cannot change meaning): ``title``, ``description``, ``$id``, ``$comment``
    (each must be a string), ``examples`` (an array), ``$schema`` (a string naming one of
    :data:`SUPPORTED_DIALECTS`; any other dialect is ``SCHEMA_UNSUPPORTED_KEYWORD``) and
    ``additionalProperties: false`` (undeclared answer keys are rejected anyway). Every other key, at the root
    or in a property, is rejected. ``minimum``/``maximum`` may be any finite number (wide integer bounds become
    the nearest double). A ``default`` that its own field would refuse (``""`` with ``minLength: 1``, a wrong
    type) is dropped and the field asked without it.

    Errors: always :class:`FormError` (never another exception, whatever ``requested_schema`` is), listing every
    violation with a JSON-Pointer path (``$`` = whole request): ``LIMIT_EXCEEDED`` (request bytes — checked first,
    on ``json.dumps({"message", "requestedSchema"}, ensure_ascii=False)`` UTF-8 bytes — message length, field
    count, option count, name/label/description/option lengths; the decoded form must also fit the byte cap in
    its canonical :func:`~services.core.form.mcp_json.form_to_requested_schema` shape so :func:`check_form` accepts
    it), ``SCHEMA_NOT_OBJECT``, ``SCHEMA_UNSUPPORTED_KEYWORD`` (``$ref``, ``$defs``, ``pattern``, property-level
    ``anyOf``, ...), ``SCHEMA_UNSUPPORTED_TYPE`` (nested object, union, arrays of anything but enum strings),
    ``SCHEMA_INVALID_VALUE``, ``SCHEMA_UNKNOWN_REQUIRED``, ``SCHEMA_DUPLICATE_OPTION``, ``SCHEMA_INVALID_DEFAULT``.

    Source: MCP 2026-07-28 ``client/elicitation.mdx`` "Requested Schema"; RFC criterion 5.
    """
    try:
        return _decode(requested_schema, message=message, requester=requester or Requester(), limits=limits)
    except FormError:
        raise
    except Exception:  # defensive: weird input must surface as a FormError, never as another exception
        raise FormError(
            [Violation("$", FormErrorReason.SCHEMA_INVALID_VALUE, "the request could not be decoded")]
        ) from None


def _required_names(schema: dict[Any, Any], properties: dict[Any, Any] | None, add: _Add) -> set[str]:
    """The names the root's ``required`` lists (reporting a malformed list, repeats and unknown names)."""
    required_names: set[str] = set()
    if "required" in schema:
        required = schema["required"]
        if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
            add(pointer("required"), FormErrorReason.SCHEMA_INVALID_VALUE, "required must be an array of strings")
        else:
            for index, name in enumerate(required):
                if name in required_names:
                    add(pointer("required", str(index)), FormErrorReason.SCHEMA_INVALID_VALUE, "required names repeat")
                elif properties is not None and name not in properties:
                    add(pointer("required", str(index)), FormErrorReason.SCHEMA_UNKNOWN_REQUIRED, "names no property")
                required_names.add(name)
    return required_names


def _decode(requested_schema: object, *, message: object, requester: Requester, limits: Limits) -> Form:
    size = _request_bytes(message, requested_schema)
    if size > limits.max_request_bytes:
        raise FormError(
            [
                Violation(
                    "$",
                    FormErrorReason.LIMIT_EXCEEDED,
                    f"request is {size} bytes; the cap is {limits.max_request_bytes}",
                )
            ]
        )
    collector = _Collector()
    add = collector.add
    if not isinstance(message, str):
        raise FormError(
            [Violation(pointer("message"), FormErrorReason.SCHEMA_INVALID_VALUE, "message must be a string")]
        )
    _cap_text(add, pointer("message"), message, limits.max_message_chars, "message")
    _check_requester(requester, add, limits)
    schema = requested_schema
    if not isinstance(schema, dict):
        raise FormError([Violation("$", FormErrorReason.SCHEMA_NOT_OBJECT, "requestedSchema must be a JSON object")])
    if schema.get("type") != "object":
        add(pointer("type"), FormErrorReason.SCHEMA_NOT_OBJECT, 'requestedSchema must have type "object"')
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        add(pointer("properties"), FormErrorReason.SCHEMA_NOT_OBJECT, "requestedSchema must have a properties object")
        properties = None
    for key in schema:
        if key not in _ROOT_KEYS:
            add(pointer(str(key)), FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD, f"{key} is not allowed in form mode")
    for key in ("$schema", "title", "description", "$id", "$comment"):
        if key in schema and not isinstance(schema[key], str):
            add(pointer(key), FormErrorReason.SCHEMA_INVALID_VALUE, f"{key} must be a string")
    dialect = schema.get("$schema")
    if isinstance(dialect, str) and dialect.removesuffix("#") not in SUPPORTED_DIALECTS:
        add(
            pointer("$schema"),
            FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD,
            "this JSON Schema dialect is not supported (use 2020-12, 2019-09 or draft-07)",
        )
    if "examples" in schema and not isinstance(schema["examples"], list):
        add(pointer("examples"), FormErrorReason.SCHEMA_INVALID_VALUE, "examples must be an array")
    if "additionalProperties" in schema and schema["additionalProperties"] is not False:
        add(
            pointer("additionalProperties"),
            FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD,
            "only additionalProperties: false is allowed",
        )
    required_names = _required_names(schema, properties, add)
    fields: list[Field] = []
    if properties is not None:
        if len(properties) > limits.max_fields:
            add(
                pointer("properties"),
                FormErrorReason.LIMIT_EXCEEDED,
                f"{len(properties)} properties; the cap is {limits.max_fields}",
            )
        else:
            for name, property_schema in properties.items():
                if not isinstance(name, str):
                    add(pointer("properties"), FormErrorReason.SCHEMA_INVALID_VALUE, "property names must be strings")
                    continue
                before = len(collector.violations)
                decoder = _PropertyDecoder(name, property_schema, name in required_names, collector, limits)
                field = decoder.decode()
                if field is not None:
                    _check_field_semantics(field, add, limits, options_parts=decoder.options_parts)
                    if len(collector.violations) == before:
                        fields.append(field)
    collector.raise_if_any()
    form = Form(message=message, fields=tuple(fields), requester=requester)
    _check_form_bytes(form, limits)
    return form


def check_form(form: Form, *, limits: Limits = DEFAULT_LIMITS) -> Form:
    """Re-check a :class:`Form` (e.g. decoded from an untrusted provider's ``maka.form.v1.Form``) and return it.

    Checks every cap and structural rule :func:`decode_requested_schema` enforces: message, name, label,
    description and option lengths; field and option counts; non-empty unique property names; unique option
    values and at least one option per select; ``minLength <= maxLength``, ``minimum <= maximum`` (finite),
    ``minItems <= maxItems`` and ``minItems`` satisfiable; counts within ``uint32``; every ``default`` valid for
    its field (same rule as answers); the whole form within ``max_request_bytes`` in its canonical
    ``requestedSchema`` shape.

    Errors: :class:`FormError` with every violation (``LIMIT_EXCEEDED``, ``SCHEMA_INVALID_VALUE``,
    ``SCHEMA_DUPLICATE_OPTION``, ``SCHEMA_INVALID_DEFAULT``; paths as in the canonical ``requestedSchema``).

    Source: MCP 2026-07-28 ``client/elicitation.mdx`` "Requested Schema"; RFC criterion 5 ("validated again by the
    Interaction service before it is published").
    """
    try:
        return _check_form(form, limits)
    except FormError:
        raise
    except Exception:  # defensive: a malformed Form must surface as a FormError, never as another exception
        raise FormError(
            [Violation("$", FormErrorReason.SCHEMA_INVALID_VALUE, "the form could not be checked")]
        ) from None


def _check_form(form: Form, limits: Limits) -> Form:
    collector = _Collector()
    add = collector.add
    if not isinstance(form.message, str):
        raise FormError(
            [Violation(pointer("message"), FormErrorReason.SCHEMA_INVALID_VALUE, "message must be a string")]
        )
    _cap_text(add, pointer("message"), form.message, limits.max_message_chars, "message")
    _check_requester(form.requester, add, limits)
    if len(form.fields) > limits.max_fields:
        add(
            pointer("properties"),
            FormErrorReason.LIMIT_EXCEEDED,
            f"{len(form.fields)} properties; the cap is {limits.max_fields}",
        )
        collector.raise_if_any()
    names: set[str] = set()
    for field in form.fields:
        parts = ("properties", field.name)
        if field.name in names:
            add(pointer(*parts), FormErrorReason.SCHEMA_INVALID_VALUE, "property names repeat")
        names.add(field.name)
        _check_field_semantics(field, add, limits)
        for key, value in _uint32_attrs(field):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINT32_MAX
            ):
                add(pointer(*parts, key), FormErrorReason.SCHEMA_INVALID_VALUE, f"{key} must be a non-negative integer")
        if isinstance(field, NumberField):
            for key, bound in (("minimum", field.minimum), ("maximum", field.maximum)):
                if bound is not None and safe_number(bound) is None:
                    add(pointer(*parts, key), FormErrorReason.SCHEMA_INVALID_VALUE, f"{key} must be a finite number")
        if isinstance(field, StringField) and field.format is not None and field.format not in _FORMATS:
            add(pointer(*parts, "format"), FormErrorReason.SCHEMA_INVALID_VALUE, "format is not supported")
        for text in (field.name, field.label, field.description):
            if isinstance(text, str) and not is_valid_unicode(text):
                add(pointer(*parts), FormErrorReason.SCHEMA_INVALID_VALUE, "text is not valid Unicode")
        if field.default is not None:
            _, problems = check_value(field, field.default, limits=limits)
            for _, detail in problems:
                add(pointer(*parts, "default"), FormErrorReason.SCHEMA_INVALID_DEFAULT, f"default {detail}")
    collector.raise_if_any()
    _check_form_bytes(form, limits)
    return form


def _uint32_attrs(field: Field) -> list[tuple[str, object]]:
    if isinstance(field, StringField):
        return [("minLength", field.min_length), ("maxLength", field.max_length)]
    if isinstance(field, MultiSelectField):
        return [("minItems", field.min_items), ("maxItems", field.max_items)]
    return []

"""Loss-free conversions between the form contract and the ``maka.form.v1`` protobuf messages.

- :func:`form_to_proto` / :func:`form_from_proto` — :class:`Form` ⇄ ``maka.form.v1.Form``.
- :func:`answer_to_proto` / :func:`answer_from_proto` — :class:`Answer` ⇄ ``maka.form.v1.Answer``.
- :func:`violations_to_proto` / :func:`violations_from_proto` — :class:`Violation` ⇄ ``maka.form.v1.FieldViolation``.

The MCP JSON shapes (``ElicitResult``, ``requestedSchema``) are :mod:`services.core.form.mcp_json`'s.
Conversions do not validate semantics: use :func:`~services.core.form.schema.check_form` and
:func:`~services.core.form.answer.validate_answer` on anything that came from an untrusted peer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from maka.form.v1 import form_pb2
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
    Option,
    Requester,
    SingleSelectField,
    StringField,
    StringFormat,
)

_FORMAT_TO_PROTO: dict[StringFormat, form_pb2.StringFormat.ValueType] = {
    StringFormat.EMAIL: form_pb2.STRING_FORMAT_EMAIL,
    StringFormat.URI: form_pb2.STRING_FORMAT_URI,
    StringFormat.DATE: form_pb2.STRING_FORMAT_DATE,
    StringFormat.DATE_TIME: form_pb2.STRING_FORMAT_DATE_TIME,
}
_FORMAT_FROM_PROTO = {value: key for key, value in _FORMAT_TO_PROTO.items()}

_ACTION_TO_PROTO: dict[Action, form_pb2.Action.ValueType] = {
    Action.ACCEPT: form_pb2.ACTION_ACCEPT,
    Action.DECLINE: form_pb2.ACTION_DECLINE,
    Action.CANCEL: form_pb2.ACTION_CANCEL,
}
_ACTION_FROM_PROTO = {value: key for key, value in _ACTION_TO_PROTO.items()}

_REASON_PREFIX = "FORM_ERROR_REASON_"


# --------------------------------------------------------------------------- Form ⇄ protobuf


def _options_to_proto(options: Iterable[Option]) -> list[form_pb2.Option]:
    return [form_pb2.Option(value=option.value, label=option.label) for option in options]


def _options_from_proto(options: Iterable[form_pb2.Option]) -> tuple[Option, ...]:
    return tuple(Option(option.value, option.label) for option in options)


def field_to_proto(field: Field) -> form_pb2.Field:
    """One :class:`Field` → ``maka.form.v1.Field`` (the ``kind`` oneof names the field kind).

    Raises ``ValueError`` from protobuf only for a field that :func:`~services.core.form.schema.check_form` would
    reject (e.g. a count beyond ``uint32``). Source: ``protos/maka/form/v1/form.proto``; RFC criterion 5.
    """
    message = form_pb2.Field(name=field.name, label=field.label, description=field.description, required=field.required)
    if isinstance(field, StringField):
        string = message.string
        string.SetInParent()
        if field.min_length is not None:
            string.min_length = field.min_length
        if field.max_length is not None:
            string.max_length = field.max_length
        if field.format is not None:
            string.format = _FORMAT_TO_PROTO[field.format]
        if field.default is not None:
            string.default_value = field.default
    elif isinstance(field, NumberField):
        number = message.integer if field.integer else message.number
        number.SetInParent()
        if field.minimum is not None:
            number.minimum = field.minimum
        if field.maximum is not None:
            number.maximum = field.maximum
        if field.default is not None:
            number.default_value = field.default
    elif isinstance(field, BooleanField):
        message.boolean.SetInParent()
        if field.default is not None:
            message.boolean.default_value = field.default
    elif isinstance(field, SingleSelectField):
        message.single_select.SetInParent()
        message.single_select.options.extend(_options_to_proto(field.options))
        if field.default is not None:
            message.single_select.default_value = field.default
    else:
        multi = message.multi_select
        multi.SetInParent()
        multi.options.extend(_options_to_proto(field.options))
        if field.min_items is not None:
            multi.min_items = field.min_items
        if field.max_items is not None:
            multi.max_items = field.max_items
        if field.default is not None:
            multi.default_value.SetInParent()  # an empty default ``[]`` still has presence
            multi.default_value.values.extend(field.default)
    return message


def field_from_proto(message: form_pb2.Field) -> Field:
    """``maka.form.v1.Field`` → :class:`Field`. Raises :class:`FormError` ``SCHEMA_UNSUPPORTED_TYPE`` when
    ``kind`` is unset and ``SCHEMA_INVALID_VALUE`` for an unknown ``StringFormat``. Does not check caps
    (use :func:`~services.core.form.schema.check_form`). Source: ``protos/maka/form/v1/form.proto``."""
    common: dict[str, Any] = {
        "name": message.name,
        "label": message.label,
        "description": message.description,
        "required": message.required,
    }
    kind = message.WhichOneof("kind")
    path = pointer("properties", message.name)
    if kind == "string":
        string = message.string
        fmt: StringFormat | None = None
        if string.format != form_pb2.STRING_FORMAT_UNSPECIFIED:
            if string.format not in _FORMAT_FROM_PROTO:
                raise FormError([Violation(path + "/format", FormErrorReason.SCHEMA_INVALID_VALUE, "unknown format")])
            fmt = _FORMAT_FROM_PROTO[string.format]
        return StringField(
            **common,
            min_length=string.min_length if string.HasField("min_length") else None,
            max_length=string.max_length if string.HasField("max_length") else None,
            format=fmt,
            default=string.default_value if string.HasField("default_value") else None,
        )
    if kind in ("number", "integer"):
        integer = kind == "integer"
        number = message.integer if integer else message.number

        def bound(value: float) -> int | float:
            return int_if_integral(value) if integer else value

        return NumberField(
            **common,
            integer=integer,
            minimum=bound(number.minimum) if number.HasField("minimum") else None,
            maximum=bound(number.maximum) if number.HasField("maximum") else None,
            default=bound(number.default_value) if number.HasField("default_value") else None,
        )
    if kind == "boolean":
        boolean = message.boolean
        return BooleanField(**common, default=boolean.default_value if boolean.HasField("default_value") else None)
    if kind == "single_select":
        single = message.single_select
        return SingleSelectField(
            **common,
            options=_options_from_proto(single.options),
            default=single.default_value if single.HasField("default_value") else None,
        )
    if kind == "multi_select":
        multi = message.multi_select
        return MultiSelectField(
            **common,
            options=_options_from_proto(multi.options),
            min_items=multi.min_items if multi.HasField("min_items") else None,
            max_items=multi.max_items if multi.HasField("max_items") else None,
            default=tuple(multi.default_value.values) if multi.HasField("default_value") else None,
        )
    raise FormError([Violation(path, FormErrorReason.SCHEMA_UNSUPPORTED_TYPE, "field kind is not set")])


def form_to_proto(form: Form) -> form_pb2.Form:
    """:class:`Form` → ``maka.form.v1.Form`` (fields in order; optional keywords use proto3 ``optional``
    presence; integer fields use the ``integer`` kind). Loss-free: :func:`form_from_proto` gives back an
    equal :class:`Form` (integers are within ±2^53, so doubles hold them exactly). Raises as :func:`field_to_proto`.
    Source: ``protos/maka/form/v1/form.proto``; RFC criterion 5 ("validated again by the Interaction service")."""
    requester = form_pb2.Requester(
        provider_id=form.requester.provider_id,
        provider_display_name=form.requester.provider_display_name,
        claimed_server=form.requester.claimed_server,
        claimed_tool=form.requester.claimed_tool,
    )
    return form_pb2.Form(message=form.message, fields=[field_to_proto(f) for f in form.fields], requester=requester)


def form_from_proto(message: form_pb2.Form) -> Form:
    """``maka.form.v1.Form`` → :class:`Form`. Raises :class:`FormError` (``SCHEMA_UNSUPPORTED_TYPE``: a field
    without a kind; ``SCHEMA_INVALID_VALUE``: unknown format), listing every bad field. Untrusted input must
    then pass :func:`~services.core.form.schema.check_form` (caps, uniqueness, defaults).
    Source: ``protos/maka/form/v1/form.proto``; RFC criterion 5."""
    fields: list[Field] = []
    violations: list[Violation] = []
    for field in message.fields:
        try:
            fields.append(field_from_proto(field))
        except FormError as error:
            violations.extend(error.violations)
    if violations:
        raise FormError(violations)
    requester = Requester(
        provider_id=message.requester.provider_id,
        provider_display_name=message.requester.provider_display_name,
        claimed_server=message.requester.claimed_server,
        claimed_tool=message.requester.claimed_tool,
    )
    return Form(message=message.message, fields=tuple(fields), requester=requester)


# --------------------------------------------------------------------------- Answer ⇄ protobuf


def value_to_proto(value: FormValue) -> form_pb2.Value:
    """One answer value → ``maka.form.v1.Value``: ``bool`` → ``boolean_value``, ``int`` → ``integer_value``,
    ``float`` → ``number_value``, ``str`` → ``string_value``, ``tuple``/``list`` of ``str`` →
    ``string_list_value``. Raises :class:`FormError` ``ANSWER_WRONG_TYPE`` for anything else (or an ``int``
    outside int64). Source: ``maka.form.v1.Value``; MCP 2026-07-28 ``ElicitResult.content`` value types."""
    if isinstance(value, bool):
        return form_pb2.Value(boolean_value=value)
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise FormError([Violation("$", FormErrorReason.ANSWER_WRONG_TYPE, "integer is outside int64")])
        return form_pb2.Value(integer_value=value)
    if isinstance(value, float):
        return form_pb2.Value(number_value=value)
    if isinstance(value, str):
        return form_pb2.Value(string_value=value)
    if isinstance(value, tuple | list) and all(isinstance(item, str) for item in value):
        return form_pb2.Value(string_list_value=form_pb2.StringList(values=list(value)))
    raise FormError([Violation("$", FormErrorReason.ANSWER_WRONG_TYPE, "value is not a form value")])


def value_from_proto(message: form_pb2.Value) -> FormValue:
    """``maka.form.v1.Value`` → answer value (the inverse of :func:`value_to_proto`; lists become tuples).
    Raises :class:`FormError` ``ANSWER_WRONG_TYPE`` when ``kind`` is unset. Source: ``maka.form.v1.Value``."""
    kind = message.WhichOneof("kind")
    if kind == "string_value":
        return message.string_value
    if kind == "number_value":
        return message.number_value
    if kind == "integer_value":
        return message.integer_value
    if kind == "boolean_value":
        return message.boolean_value
    if kind == "string_list_value":
        return tuple(message.string_list_value.values)
    raise FormError([Violation("$", FormErrorReason.ANSWER_WRONG_TYPE, "value kind is not set")])


def answer_to_proto(answer: Answer) -> form_pb2.Answer:
    """:class:`Answer` → ``maka.form.v1.Answer`` (integers use ``integer_value``, numbers ``number_value``).

    Raises :class:`FormError` ``ANSWER_WRONG_TYPE`` (path ``/<name>``) for a value with no proto kind and
    ``ANSWER_INVALID_ACTION`` for an action outside :class:`Action`. Loss-free with :func:`answer_from_proto`.
    Source: ``maka.form.v1.Answer``; MCP 2026-07-28 ``client/elicitation.mdx`` "Response Actions".
    """
    if answer.action not in _ACTION_TO_PROTO:
        raise FormError([Violation("$", FormErrorReason.ANSWER_INVALID_ACTION, "unknown action")])
    message = form_pb2.Answer(action=_ACTION_TO_PROTO[answer.action])
    violations: list[Violation] = []
    for name, value in answer.values.items():
        try:
            message.values[name].CopyFrom(value_to_proto(value))
        except FormError as error:
            violations.extend(Violation(pointer(name), v.reason, v.description) for v in error.violations)
        except (TypeError, ValueError):  # e.g. text that is not valid Unicode
            violations.append(Violation(pointer(str(name)), FormErrorReason.ANSWER_WRONG_TYPE, "cannot be encoded"))
    if violations:
        raise FormError(violations)
    return message


def answer_from_proto(message: form_pb2.Answer) -> Answer:
    """``maka.form.v1.Answer`` → :class:`Answer`.

    Raises :class:`FormError`: ``ANSWER_INVALID_ACTION`` for ``ACTION_UNSPECIFIED``/unknown actions or values
    on decline/cancel; ``ANSWER_WRONG_TYPE`` (path ``/<name>``) for a value without a kind. Field-level rules
    are :func:`~services.core.form.answer.validate_answer`'s job. Source: MCP 2026-07-28 ``client/elicitation.mdx``
    "Response Actions".
    """
    action = _ACTION_FROM_PROTO.get(message.action)
    if action is None:
        raise FormError([Violation("$", FormErrorReason.ANSWER_INVALID_ACTION, "action is unspecified or unknown")])
    if action is not Action.ACCEPT and message.values:
        raise FormError([Violation("$", FormErrorReason.ANSWER_INVALID_ACTION, f"{action.value} carries no values")])
    values: dict[str, FormValue] = {}
    violations: list[Violation] = []
    for name in sorted(message.values):
        try:
            values[name] = value_from_proto(message.values[name])
        except FormError as error:
            violations.extend(Violation(pointer(name), v.reason, v.description) for v in error.violations)
    if violations:
        raise FormError(violations)
    return Answer(action, values)


# --------------------------------------------------------------------------- violations ⇄ protobuf


def violations_to_proto(violations: Sequence[Violation]) -> list[form_pb2.FieldViolation]:
    """:class:`Violation` list → ``maka.form.v1.FieldViolation`` list (reason names match with the
    ``FORM_ERROR_REASON_`` prefix). Loss-free with :func:`violations_from_proto`. Never raises.
    Source: ``maka.form.v1.FieldViolation``; RFC criterion 5 (stable error codes)."""
    return [
        form_pb2.FieldViolation(
            path=violation.path,
            reason=form_pb2.FormErrorReason.Value(_REASON_PREFIX + violation.reason.value),
            description=violation.description,
        )
        for violation in violations
    ]


def violations_from_proto(messages: Iterable[form_pb2.FieldViolation]) -> list[Violation]:
    """``maka.form.v1.FieldViolation`` list → :class:`Violation` list. An unspecified or unknown reason becomes
    ``SCHEMA_INVALID_VALUE`` for ``/properties``/``/required`` paths and ``ANSWER_CONSTRAINT`` otherwise (the
    reason enum is closed; a newer peer's code must not crash an older reader). Never raises.
    Source: ``maka.form.v1.FieldViolation``."""
    out: list[Violation] = []
    for message in messages:
        try:
            name = form_pb2.FormErrorReason.Name(message.reason).removeprefix(_REASON_PREFIX)
            reason = FormErrorReason(name)
        except ValueError:
            schema_path = message.path.startswith(("/properties", "/required", "/type"))
            reason = FormErrorReason.SCHEMA_INVALID_VALUE if schema_path else FormErrorReason.ANSWER_CONSTRAINT
        out.append(Violation(message.path, reason, message.description))
    return out

"""The provider-neutral form contract: decode MCP form schemas, validate answers, convert shapes.

Public API (see each function's docstring for shapes, errors and the spec section):

- :func:`decode_requested_schema` — MCP 2026-07-28 ``requestedSchema`` → :class:`Form`.
- :func:`check_form` — re-check a :class:`Form` (e.g. received as protobuf) against the caps.
- :func:`validate_answer` — check an :class:`Answer` against a :class:`Form`; fill untouched defaults.
- :mod:`services.core.form.protobuf` — :class:`Form`/:class:`Answer`/:class:`Violation` ⇄ ``maka.form.v1``
  (re-exported here).
- :mod:`services.core.form.mcp_json` — :class:`Answer` ⇄ MCP ``ElicitResult`` and :class:`Form` → MCP
  ``requestedSchema`` (re-exported here).
"""

from services.core.form.answer import validate_answer
from services.core.form.errors import FormError, FormErrorReason, Violation
from services.core.form.mcp_json import answer_from_elicit_result, answer_to_elicit_result, form_to_requested_schema
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
from services.core.form.protobuf import (
    answer_from_proto,
    answer_to_proto,
    form_from_proto,
    form_to_proto,
    violations_from_proto,
    violations_to_proto,
)
from services.core.form.schema import check_form, decode_requested_schema

__all__ = [
    "Action",
    "Answer",
    "BooleanField",
    "Field",
    "Form",
    "FormError",
    "FormErrorReason",
    "FormValue",
    "MultiSelectField",
    "NumberField",
    "Option",
    "Requester",
    "SingleSelectField",
    "StringField",
    "StringFormat",
    "Violation",
    "answer_from_elicit_result",
    "answer_from_proto",
    "answer_to_elicit_result",
    "answer_to_proto",
    "check_form",
    "decode_requested_schema",
    "form_from_proto",
    "form_to_proto",
    "form_to_requested_schema",
    "validate_answer",
    "violations_from_proto",
    "violations_to_proto",
]

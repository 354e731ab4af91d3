"""Loss-free conversions between the form contract, ``maka.form.v1`` protobuf and MCP JSON shapes."""

from __future__ import annotations

from typing import Any

from maka.form.v1 import form_pb2
from services.core.form.model import Answer, Form


def form_to_proto(form: Form) -> form_pb2.Form:
    """STUB."""
    raise NotImplementedError


def form_from_proto(message: form_pb2.Form) -> Form:
    """STUB."""
    raise NotImplementedError


def answer_to_proto(answer: Answer) -> form_pb2.Answer:
    """STUB."""
    raise NotImplementedError


def answer_from_proto(message: form_pb2.Answer) -> Answer:
    """STUB."""
    raise NotImplementedError


def answer_to_elicit_result(answer: Answer) -> dict[str, Any]:
    """STUB: the bare MCP ``ElicitResult`` JSON object."""
    raise NotImplementedError


def answer_from_elicit_result(result: object) -> Answer:
    """STUB."""
    raise NotImplementedError

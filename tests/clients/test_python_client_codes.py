"""The Python client's code and reason enums are the protos' enums, name for name, and decoding keeps unknown ones."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import grpc
import pytest

from maka_client import BrokerErrorReason, Failure, FailureCode, InteractionErrorReason, MakaError
from maka_client._codes import parse_failure_code, parse_reason
from maka_client._gen.maka.broker.v1 import broker_pb2
from maka_client._gen.maka.interaction.v1 import interaction_pb2
from maka_client.events import decode
from services.core import reasons


def _names(keys: Iterable[str], prefix: str) -> list[str]:
    return [key.removeprefix(prefix) for key in keys if not key.endswith("_UNSPECIFIED")]


@pytest.mark.parametrize(
    ("python", "proto", "prefix"),
    [
        (FailureCode, broker_pb2.FailureCode.keys(), "FAILURE_CODE_"),
        (BrokerErrorReason, broker_pb2.ErrorReason.keys(), "ERROR_REASON_"),
        (InteractionErrorReason, interaction_pb2.ErrorReason.keys(), "ERROR_REASON_"),
    ],
)
def test_each_client_enum_has_exactly_the_proto_enum_names_as_values(
    python: type[StrEnum], proto: list[str], prefix: str
) -> None:
    assert [member.name for member in python] == _names(proto, prefix)
    assert all(member.value == member.name for member in python)


def test_a_failure_event_decodes_to_its_failure_code_member() -> None:
    event = broker_pb2.CallToolResponse(
        sequence=3, failure=broker_pb2.CallFailure(code=broker_pb2.FAILURE_CODE_UNKNOWN_TOOL, message="no such Tool")
    )
    decoded = decode(event)
    assert isinstance(decoded, Failure)
    assert decoded.code is FailureCode.UNKNOWN_TOOL
    assert decoded.code == "UNKNOWN_TOOL"  # the string the TypeScript client exposes


def test_a_newer_servers_unknown_failure_code_is_kept_instead_of_failing_the_stream() -> None:
    event = broker_pb2.CallToolResponse(
        sequence=1, failure=broker_pb2.CallFailure(code=broker_pb2.FailureCode.ValueType(999), message="new")
    )
    decoded = decode(event)
    assert isinstance(decoded, Failure)
    assert decoded.code == "999"
    assert parse_failure_code("SOMETHING_NEW") == "SOMETHING_NEW"


def test_reasons_decode_by_their_error_info_domain_and_unknown_ones_stay_strings() -> None:
    assert parse_reason("maka.broker.v1", "CALL_NOT_FOUND") is BrokerErrorReason.CALL_NOT_FOUND
    assert parse_reason("maka.interaction.v1", "ALREADY_SETTLED") is InteractionErrorReason.ALREADY_SETTLED
    assert parse_reason("maka.interaction.v1", "SOMETHING_NEW") == "SOMETHING_NEW"
    assert parse_reason("example.other", "CALL_NOT_FOUND") == "CALL_NOT_FOUND"


def test_a_maka_error_carries_the_status_code_and_its_name() -> None:
    error = MakaError(grpc.StatusCode.NOT_FOUND, "gone", reason=BrokerErrorReason.CALL_NOT_FOUND)
    assert error.grpc_status_code is grpc.StatusCode.NOT_FOUND
    assert error.code == "NOT_FOUND"
    assert str(error) == "CALL_NOT_FOUND: gone"
    assert MakaError(grpc.StatusCode.UNAVAILABLE, "down").reason == "UNAVAILABLE"


@pytest.mark.parametrize(
    ("client", "runtime"),
    [
        (BrokerErrorReason, reasons.BrokerErrorReason),
        (InteractionErrorReason, reasons.InteractionErrorReason),
    ],
)
def test_the_client_and_the_runtime_define_the_same_reasons_member_for_member(
    client: type[StrEnum], runtime: type[StrEnum]
) -> None:
    # The protos are the one definition; the library ships alone, so it mirrors them instead of importing
    # the runtime's enums. Both mirrors are pinned to the proto above and in tests/services/core/test_reasons.py,
    # and to each other here, so a surface comparing a MakaError's reason with either gets the same answer.
    assert [(m.name, m.value) for m in client] == [(m.name, m.value) for m in runtime]


@pytest.mark.parametrize(
    ("domain", "reason"),
    [
        (reasons.BROKER_DOMAIN, "CALL_NOT_FOUND"),
        (reasons.INTERACTION_DOMAIN, "ALREADY_SETTLED"),
        (reasons.AUTH_DOMAIN, "UNAUTHENTICATED"),
        (reasons.AUTH_DOMAIN, "PERMISSION_DENIED"),
        (reasons.INTERACTION_DOMAIN, "SOMETHING_NEW"),
        ("maka.unknown", "CLOSED"),
    ],
)
def test_the_client_decodes_every_reason_to_what_the_runtime_decodes_it_to(domain: str, reason: str) -> None:
    assert parse_reason(domain, reason) == reasons.parse_reason(domain, reason)

"""The Python reason enums are the proto ``ErrorReason`` enums, name for name, and decoding keeps unknown ones."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import pytest

from maka.broker.v1 import broker_pb2
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.form.errors import FormErrorReason
from services.core.reasons import (
    AUTH_DOMAIN,
    BROKER_DOMAIN,
    INTERACTION_DOMAIN,
    AuthErrorReason,
    BrokerErrorReason,
    InteractionErrorReason,
    parse_reason,
)


def _proto_names(names: Iterable[str], prefix: str) -> list[str]:
    """The proto enum's value names in declaration order, without the prefix and the zero value."""
    return [name.removeprefix(prefix) for name in names if not name.endswith("_UNSPECIFIED")]


@pytest.mark.parametrize(
    ("python", "proto", "prefix"),
    [
        (InteractionErrorReason, interaction_pb2.ErrorReason.keys(), "ERROR_REASON_"),
        (BrokerErrorReason, broker_pb2.ErrorReason.keys(), "ERROR_REASON_"),
        (FormErrorReason, form_pb2.FormErrorReason.keys(), "FORM_ERROR_REASON_"),
    ],
)
def test_each_python_reason_enum_has_exactly_the_proto_enum_names_as_values(
    python: type[StrEnum], proto: list[str], prefix: str
) -> None:
    assert [member.name for member in python] == _proto_names(proto, prefix)
    assert all(member.value == member.name for member in python)


def test_the_auth_reasons_are_in_every_services_error_reason() -> None:
    auth = {member.value for member in AuthErrorReason}
    assert auth <= set(_proto_names(interaction_pb2.ErrorReason.keys(), "ERROR_REASON_"))
    assert auth <= set(_proto_names(broker_pb2.ErrorReason.keys(), "ERROR_REASON_"))


def test_a_known_reason_decodes_to_its_domains_member() -> None:
    assert parse_reason(INTERACTION_DOMAIN, "ALREADY_SETTLED") is InteractionErrorReason.ALREADY_SETTLED
    assert parse_reason(BROKER_DOMAIN, "NOT_FOUND") is BrokerErrorReason.NOT_FOUND
    assert parse_reason(AUTH_DOMAIN, "UNAUTHENTICATED") is AuthErrorReason.UNAUTHENTICATED


def test_a_newer_servers_reason_or_domain_stays_the_string_it_is() -> None:
    unknown = parse_reason(INTERACTION_DOMAIN, "SOMETHING_NEW")
    assert unknown == "SOMETHING_NEW"
    assert not isinstance(unknown, StrEnum)
    foreign = parse_reason("other.v9", "ALREADY_SETTLED")
    assert not isinstance(foreign, StrEnum)
    assert foreign == InteractionErrorReason.ALREADY_SETTLED  # still equal by name
    assert parse_reason("", "") == ""

"""Stable error codes map one-to-one onto ``maka.broker.v1.FailureCode``."""

from __future__ import annotations

from maka.broker.v1 import broker_pb2
from services.mcp_provider.errors import FAILURE_CODES, CallErrorCode, McpToolCallError


def test_every_call_error_code_has_a_broker_failure_code() -> None:
    assert set(FAILURE_CODES) == set(CallErrorCode)
    assert broker_pb2.FAILURE_CODE_UNSPECIFIED not in FAILURE_CODES.values()


def test_the_issue_codes_map_to_their_named_failure_codes() -> None:
    expected = {
        CallErrorCode.UNSUPPORTED_INPUT_REQUEST: "FAILURE_CODE_UNSUPPORTED_INPUT_REQUEST",
        CallErrorCode.UNSUPPORTED_METHOD: "FAILURE_CODE_UNSUPPORTED_INPUT_REQUEST",
        CallErrorCode.LIMITS_EXCEEDED: "FAILURE_CODE_LIMITS_EXCEEDED",
        CallErrorCode.ROUNDS_EXHAUSTED: "FAILURE_CODE_ROUNDS_EXHAUSTED",
        CallErrorCode.BINDING_CHANGED: "FAILURE_CODE_BINDING_CHANGED",
        CallErrorCode.CONNECTION_LOST: "FAILURE_CODE_CONNECTION_LOST",
        CallErrorCode.SERVER_ERROR: "FAILURE_CODE_SERVER_ERROR",
        CallErrorCode.REQUEST_STATE_REJECTED: "FAILURE_CODE_REQUEST_STATE_REJECTED",
        CallErrorCode.MISSING_CLIENT_CAPABILITY: "FAILURE_CODE_MISSING_CLIENT_CAPABILITY",
    }
    for code, name in expected.items():
        assert broker_pb2.FailureCode.Name(McpToolCallError(code, "m").failure_code) == name

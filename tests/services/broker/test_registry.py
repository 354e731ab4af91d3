"""Unit tests of the provider registry (`services/broker/registry.py`): routing, replacement, sign-in."""

from __future__ import annotations

import pytest

from maka.broker.v1 import broker_pb2
from services.broker.errors import CallRefused
from services.broker.model import Notifier, ProviderStream, Registration
from services.broker.registry import ProviderRegistry
from services.broker.servers import ServerTable
from services.core.status import NotFound
from tests.services.broker.harness import provider_frames, tool_descriptor

URL = "https://as.example.com/authorize?response_type=code&state=STATE-1"


def _queue(stream: ProviderStream, frame: broker_pb2.ConnectResponse) -> None:
    stream.outbox.push(frame)


def _registry(max_invocations: int = 4) -> ProviderRegistry:
    return ProviderRegistry(_queue, ServerTable(), max_invocations=max_invocations)


def _add(registry: ProviderRegistry, provider_id: str, *names: str) -> Registration:
    stream = ProviderStream(connection_id=f"conn_{provider_id}", outbox=Notifier(16))
    tools = {f"examples:{name}": tool_descriptor(name) for name in names or ("deploy",)}
    return registry.add(stream, provider_id, "", tools)


def _call(tool: str = "examples:deploy") -> broker_pb2.CallToolRequest:
    return broker_pb2.CallToolRequest(session_id="s1", turn_id="t1", tool_use_id="tu1", tool_name=tool)


def _refusal(registry: ProviderRegistry, tool: str = "examples:deploy") -> CallRefused:
    with pytest.raises(CallRefused) as refused:
        registry.route(_call(tool), {})
    return refused.value


def test_a_server_held_by_a_live_registration_is_a_conflict_for_any_other_provider_until_it_retires() -> None:
    registry = _registry()
    first = _add(registry, "mcp:a")
    assert first.display_name == "mcp:a"  # no display name: the provider id
    tools = {"examples:other": tool_descriptor("other")}
    conflict = "server examples is already registered by provider mcp:a"
    assert registry.claim_conflict("mcp:b", tools) == conflict
    assert registry.claim_conflict("mcp:b", sign_in_server="examples") == conflict
    assert registry.claim_conflict("mcp:a", tools) is None  # its own name: a replacement
    assert registry.claim_conflict("mcp:b", {"elsewhere:x": tool_descriptor("x", "elsewhere")}) is None
    registry.remove(first)
    assert not first.live
    assert registry.get("mcp:a") is None
    assert registry.claim_conflict("mcp:b", tools) is None
    second = _add(registry, "mcp:b")
    assert registry.route(_call(), {}) is second
    assert [t.provider_id for t in registry.list_tools()] == ["mcp:b"]


def test_replacing_tools_reports_the_changed_and_removed_ones_and_routes_the_new_set() -> None:
    registry = _registry()
    registration = _add(registry, "mcp:a", "deploy", "keep", "drop")
    changed_deploy = broker_pb2.ToolDescriptor(name="deploy", description="new", claimed_server="examples")
    changed = registry.replace_tools(
        registration, {"examples:deploy": changed_deploy, "examples:keep": tool_descriptor("keep")}
    )
    assert changed == {"examples:deploy", "examples:drop"}
    assert [t.qualified_name for t in registry.list_tools()] == ["examples:deploy", "examples:keep"]
    assert _refusal(registry, "examples:drop").code == broker_pb2.FAILURE_CODE_UNKNOWN_TOOL


def test_routing_refuses_a_full_provider_and_arguments_that_break_the_input_schema() -> None:
    registry = _registry(max_invocations=1)
    registration = _add(registry, "mcp:a")
    registration.tools["examples:deploy"].input_schema_json = '{"type":"object","required":["artifact"]}'
    assert _refusal(registry).code == broker_pb2.FAILURE_CODE_INVALID_ARGUMENTS
    skipped = _call()
    skipped.skip_argument_validation = True
    assert registry.route(skipped, {}) is registration
    registration.invocations.add("inv_1")
    assert _refusal(registry).code == broker_pb2.FAILURE_CODE_RESOURCE_EXHAUSTED


def test_a_server_waiting_for_sign_in_refuses_calls_with_the_hint_and_takes_the_matching_redirect() -> None:
    registry = _registry()
    registration = _add(registry, "mcp:a")
    provider_frames(registration.stream)
    registry.set_sign_in(
        registration,
        broker_pb2.SignInStatus(server="examples", state=broker_pb2.SIGN_IN_STATE_REQUIRED, authorization_url=URL),
    )
    refused = _refusal(registry)
    assert refused.code == broker_pb2.FAILURE_CODE_AUTH_REQUIRED
    assert URL in refused.message
    assert [s.server for s in registry.list_sign_ins()] == ["examples"]

    with pytest.raises(NotFound):
        registry.complete_sign_in(broker_pb2.CompleteSignInRequest(state="STATE-2", code="c"))
    assert provider_frames(registration.stream) == []
    assert registry.complete_sign_in(broker_pb2.CompleteSignInRequest(state="STATE-1", code="c")) == "examples"
    [frame] = provider_frames(registration.stream)
    assert frame.sign_in_callback.code == "c"

    registry.set_sign_in(registration, broker_pb2.SignInStatus(server="examples"))  # UNSPECIFIED clears it
    assert registry.list_sign_ins() == []
    assert registry.route(_call(), {}) is registration
    with pytest.raises(NotFound):
        registry.sign_out("examples")


def test_silent_since_lists_only_registrations_quiet_since_the_deadline() -> None:
    registry = _registry()
    quiet, heard = _add(registry, "mcp:quiet"), _add(registry, "mcp:heard")
    quiet.stream.last_seen, heard.stream.last_seen = 10.0, 30.0
    assert registry.silent_since(20.0) == [quiet]
    assert len(registry) == 2

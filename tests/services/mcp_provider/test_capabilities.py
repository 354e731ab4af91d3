"""Per-call capability advertisement, on the wire per era, and guards against SDK upgrades."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession, _make_modern_stamp
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from services.core.form import Action, Answer
from services.mcp_provider import capabilities
from services.mcp_provider.config import Era
from services.mcp_provider.connection import MakaDispatcher
from tests.helpers.mcp_servers import ALL_SERVERS, ScriptedForms, accept, serve_mcp

CAPS = CLIENT_CAPABILITIES_META_KEY


def _caps(request: dict[str, Any]) -> Any:
    return request["params"].get("_meta", {}).get(CAPS, "absent")


# --- the pure adapter -------------------------------------------------------------------------


def _stamped(caps: dict[str, Any]) -> dict[str, Any]:
    return {"name": "t", "_meta": {PROTOCOL_VERSION_META_KEY: "2026-07-28", CAPS: caps}}


def test_form_call_adds_form_only_elicitation_to_a_modern_tools_call() -> None:
    with capabilities.form_call(True):
        params = capabilities.apply_call_capabilities("tools/call", _stamped({"roots": {}}))

    assert params is not None
    assert params["_meta"][CAPS] == {"roots": {}, "elicitation": {"form": {}}}


def test_url_mode_and_session_elicitation_are_stripped_from_every_request() -> None:
    session_caps: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
    with capabilities.form_call(True):
        call = capabilities.apply_call_capabilities("tools/call", _stamped(session_caps))
        listing = capabilities.apply_call_capabilities("tools/list", _stamped(session_caps))
    plain = capabilities.apply_call_capabilities("tools/call", _stamped(session_caps))

    assert call is not None
    assert call["_meta"][CAPS] == {"elicitation": {"form": {}}}
    assert listing is not None
    assert listing["_meta"][CAPS] == {}
    assert plain is not None
    assert plain["_meta"][CAPS] == {}


def test_legacy_requests_without_a_capability_stamp_pass_through_unchanged() -> None:
    params = {"name": "t", "arguments": {}}
    with capabilities.form_call(True):
        assert capabilities.apply_call_capabilities("tools/call", params) is params
    assert capabilities.apply_call_capabilities("tools/call", None) is None


def test_the_caller_params_object_is_not_mutated() -> None:
    params = _stamped({})
    with capabilities.form_call(True):
        capabilities.apply_call_capabilities("tools/call", params)

    assert params["_meta"][CAPS] == {}


# --- SDK upgrade guards -------------------------------------------------------------------------


def test_sdk_still_sends_stamped_params_through_dispatcher_send_raw_request() -> None:
    """The hook: ``ClientSession.send_request`` stamps, then awaits ``self._dispatcher.send_raw_request``.

    If this fails after an SDK upgrade, per-call capabilities and the resultType workaround no longer
    apply: re-check ``services/mcp_provider/capabilities.py`` and ``connection.MakaDispatcher``.
    """
    source = inspect.getsource(ClientSession.send_request)
    assert source.index("self._stamp(data, opts)") < source.index("self._dispatcher.send_raw_request(")
    assert "send_raw_request" in JSONRPCDispatcher.__dict__
    assert issubclass(MakaDispatcher, JSONRPCDispatcher)
    assert inspect.signature(MakaDispatcher.send_raw_request).parameters.keys() == (
        inspect.signature(JSONRPCDispatcher.send_raw_request).parameters.keys()
    )


def test_sdk_modern_stamp_still_overrides_caller_meta_capabilities() -> None:
    """Why the hook exists: the session stamp overwrites capabilities after the caller's ``meta``.

    If this starts failing, the SDK gained per-call capabilities: prefer its public API.
    """
    stamp = _make_modern_stamp("2026-07-28", {"name": "x", "version": "1"}, {"sampling": {}}, lambda n, a: {})
    data: dict[str, Any] = {"method": "tools/call", "params": {"name": "t", "_meta": {CAPS: {"mine": {}}}}}
    stamp(data, {})

    assert data["params"]["_meta"][CAPS] == {"sampling": {}}


# --- on the wire --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("server", ALL_SERVERS)
async def test_modern_call_with_a_form_handler_advertises_form_only_on_every_leg(
    server: tuple[str, str], tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        forms = ScriptedForms(lambda form, index: Answer(Action.ACCEPT, {"name": "A"} if index == 0 else {"count": 2}))
        await served.manager.call_tool("fx", "two_rounds", {}, form_handler=forms)

        legs = served.wire.tool_calls("two_rounds")
        assert len(legs) == 3
        assert all(_caps(leg) == {"elicitation": {"form": {}}} for leg in legs)
        others = [m for d, m in served.wire.messages() if d == "C->S" and m.get("method") != "tools/call"]
        assert others, "discover and tools/list were captured"
        assert all("elicitation" not in (_caps(m) if isinstance(_caps(m), dict) else {}) for m in others)


@pytest.mark.slow
@pytest.mark.parametrize("server", ALL_SERVERS)
async def test_modern_call_without_a_form_handler_advertises_no_elicitation(
    server: tuple[str, str], tmp_path: Path
) -> None:
    kind, transport = server
    async with serve_mcp(tmp_path, kind=kind, transport=transport) as served:
        await served.manager.call_tool("fx", "caps", {})

        [leg] = served.wire.tool_calls("caps")
        assert _caps(leg) == {}


@pytest.mark.slow
async def test_concurrent_calls_with_and_without_a_handler_each_carry_their_own_claim(tmp_path: Path) -> None:
    import asyncio

    async with serve_mcp(tmp_path) as served:
        handler = ScriptedForms(lambda form, index: Answer(Action.DECLINE))
        await asyncio.gather(
            served.manager.call_tool("fx", "caps", {"who": "with"}, form_handler=handler),
            served.manager.call_tool("fx", "caps", {"who": "without"}),
        )

        by_who = {leg["params"]["arguments"]["who"]: _caps(leg) for leg in served.wire.tool_calls("caps")}
        assert by_who == {"with": {"elicitation": {"form": {}}}, "without": {}}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["low", "high"])
async def test_legacy_connection_advertises_no_elicitation_in_initialize_or_calls(kind: str, tmp_path: Path) -> None:
    async with serve_mcp(tmp_path, kind=kind, era=Era.LEGACY) as served:
        outcome = await served.manager.call_tool(
            "fx", "echo", {"text": "hi"}, form_handler=ScriptedForms(accept(name="A"))
        )

        assert served.connection.protocol_version == "2025-11-25"
        [initialize] = served.wire.requests("initialize")
        assert "elicitation" not in initialize["params"]["capabilities"]
        assert served.wire.requests("server/discover") == []
        [leg] = served.wire.tool_calls("echo")
        assert _caps(leg) == "absent"
        assert outcome.result["isError"] is False


@pytest.mark.slow
async def test_auto_era_against_a_dual_era_server_negotiates_modern_and_probes_without_elicitation(
    tmp_path: Path,
) -> None:
    async with serve_mcp(tmp_path, kind="high", era=Era.AUTO) as served:
        assert served.connection.modern
        [discover] = served.wire.requests("server/discover")
        assert _caps(discover) == {}
        assert served.wire.requests("initialize") == []

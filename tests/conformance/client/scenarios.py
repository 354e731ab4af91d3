"""What each client scenario of the MCP conformance harness expects the client to do.

The harness (``@modelcontextprotocol/conformance@0.2.0-alpha.12``) starts a scenario server and runs
``python -m tests.conformance.client <server URL>`` with ``MCP_CONFORMANCE_SCENARIO`` and
``MCP_CONFORMANCE_PROTOCOL_VERSION`` set. Each :class:`Scenario` here is read from that scenario's
server code (``dist/index.js`` of the package): the Tools it offers, which to call in what order, and
the complete result each call must end with. Pure data; :mod:`tests.conformance.client.runner` executes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Era = Literal["auto", "modern", "legacy"]

MODERN_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"


@dataclass(frozen=True, slots=True)
class Step:
    """One logical Tool call through the broker (``CallTool``) and the outcome it must have."""

    tool: str
    """The bare MCP Tool name (the runner qualifies it as ``SERVER:TOOL``)."""
    arguments: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())
    expect_text: str = ""
    """A substring the final result's text content must contain (empty: any complete result)."""
    expect_forms: int = 0
    """How many forms (``input_required`` rounds with an ``elicitation/create``) the call must show."""
    during_form: tuple[Step, ...] = ()
    """Calls made, to completion, while this call's first form is pending (before it is answered)."""
    arguments_from_context: bool = False
    """Take the arguments from ``MCP_CONFORMANCE_CONTEXT`` ``toolCalls`` (the entry naming this Tool)."""
    echo_schema_of: str = ""
    """Pass ``{"schema": <input schema of this Tool as the broker's ListTools shows it>}`` as the arguments:
    proves the schema crossed provider and broker unchanged (json-schema-2020-12-preservation)."""
    allow_error: bool = False
    """Any complete result passes, ``isError: true`` included (the auth scenarios' Tools vary)."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """One harness client scenario: the Tools the server must register and the calls to make."""

    name: str
    versions: tuple[str, ...]
    """Protocol versions (``MCP_CONFORMANCE_PROTOCOL_VERSION``) this plan supports."""
    expect_tools: tuple[str, ...]
    """Bare Tool names the provider must have registered from the server's ``tools/list``."""
    steps: tuple[Step, ...]
    call_first_tool: bool = False
    """Call the first listed Tool with ``{}`` (the auth scenarios: each serves different Tools)."""
    reject_tools: tuple[str, ...] = ()
    """Bare Tool names that must NOT be registered with the broker (invalid ``x-mcp-header``)."""
    preserve_schema_refs: bool = False
    """Every registered input schema must be byte-for-byte what the server listed (``$ref`` never resolved)."""


AUTH_PLAN_VERSIONS = (MODERN_VERSION, LEGACY_VERSION)
"""Every ``auth/*`` scenario runs the same plan: OAuth sign-in (completed by the automatic surface),
``tools/list``, then the first Tool with ``{}`` (what the SDK's own conformance client does)."""

INVALID_HEADER_TOOLS = (
    "invalid_empty_header",
    "invalid_object_header",
    "invalid_array_header",
    "invalid_null_header",
    "invalid_number_header",
    "invalid_duplicate_same_case",
    "invalid_duplicate_diff_case",
    "invalid_space_in_name",
    "invalid_colon_in_name",
    "invalid_non_ascii_name",
    "invalid_control_char_name",
)
"""The Tools of ``http-invalid-tool-headers`` whose ``x-mcp-header`` annotations are invalid (SEP-2243)."""


SCENARIOS: dict[str, Scenario] = {
    # Server: one Tool `add_numbers(a: number, b: number)` returning "The sum of {a} and {b} is {a+b}".
    # Check `tool-add-numbers`: a tools/call arrived with numeric a and b (plus `wire-schema-valid`).
    # Server (legacy): answers initialize and tools/list. Connecting the provider is the whole exchange.
    "initialize": Scenario(name="initialize", versions=(LEGACY_VERSION,), expect_tools=(), steps=()),
    "tools_call": Scenario(
        name="tools_call",
        versions=(MODERN_VERSION, LEGACY_VERSION),
        expect_tools=("add_numbers",),
        steps=(Step("add_numbers", {"a": 2, "b": 3}, expect_text="The sum of 2 and 3 is 5"),),
    ),
    # Server (SEP-2575): rejects the first request with HTTP 400 / -32022 "Unsupported protocol version"
    # (data.supported = ["2026-07-28"]), then answers server/discover, tools/list (no Tools) and tools/call.
    # Checks: version header on every POST, `_meta` protocolVersion + clientCapabilities (+ clientInfo)
    # on every request, header matches `_meta`, valid declared capabilities, retry after the rejection.
    # Connecting the provider (discover probe, retry, tools/list) is the whole exchange.
    "request-metadata": Scenario(
        name="request-metadata",
        versions=(MODERN_VERSION,),
        expect_tools=(),
        steps=(),
    ),
    # Server (SEP-2322, mrtr-mock-server): four Tools. Checks: requestState echoed byte-exact on the
    # retry, a different JSON-RPC id on the retry, no requestState when none was given, no
    # inputResponses/requestState on an unrelated call made between rounds, and an absent resultType
    # treated as "complete" (no retry).
    "sep-2322-client-request-state": Scenario(
        name="sep-2322-client-request-state",
        versions=(MODERN_VERSION,),
        expect_tools=("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"),
        steps=(
            Step(
                "test_mrtr_echo_state",
                expect_text="echo-state-ok",
                expect_forms=1,
                during_form=(Step("test_mrtr_unrelated", expect_text="unrelated-ok"),),
            ),
            Step("test_mrtr_no_state", expect_text="no-state-ok", expect_forms=1),
            Step("test_mrtr_no_result_type", expect_text="no-result-type-test-ok"),
        ),
    ),
    # Server (SEP-1699, legacy): the tools/call SSE stream sends a priming event with `retry: 500` and
    # closes; the result arrives on the GET stream the client must open after waiting `retry` ms with
    # Last-Event-ID. The SDK's Streamable HTTP transport does the reconnect.
    "sse-retry": Scenario(
        name="sse-retry",
        versions=(LEGACY_VERSION,),
        expect_tools=("test_reconnection",),
        steps=(Step("test_reconnection", expect_text="Reconnection test completed successfully"),),
    ),
    # Server (SEP-2243): Mcp-Method on every POST, Mcp-Name on tools/call (the SDK stamps both).
    "http-standard-headers": Scenario(
        name="http-standard-headers",
        versions=(MODERN_VERSION,),
        expect_tools=("test_headers", "my-hyphenated-tool"),
        steps=(
            Step("test_headers", expect_text="Headers test completed"),
            Step("my-hyphenated-tool", expect_text="Headers test completed"),
        ),
    ),
    # Server (SEP-2243): Tools with `x-mcp-header` annotations; the arguments come in the context.
    # The SDK mirrors the annotated arguments into Mcp-Param-* headers from the schema it listed.
    "http-custom-headers": Scenario(
        name="http-custom-headers",
        versions=(MODERN_VERSION,),
        expect_tools=("test_custom_headers", "test_custom_headers_null"),
        steps=(
            Step("test_custom_headers", arguments_from_context=True, expect_text="Custom headers test completed"),
            Step("test_custom_headers_null", arguments_from_context=True, expect_text="Custom headers test completed"),
        ),
    ),
    # Server (SEP-2243): one valid Tool and eleven with invalid `x-mcp-header`; the SDK drops the
    # invalid ones from tools/list, so they are never registered with the broker nor callable.
    "http-invalid-tool-headers": Scenario(
        name="http-invalid-tool-headers",
        versions=(MODERN_VERSION,),
        expect_tools=("valid_tool",),
        reject_tools=INVALID_HEADER_TOOLS,
        steps=(Step("valid_tool", {"region": "us-west1"}, expect_text="Tool call received"),),
    ),
    # Server (SEP-2106): `lookup_user`'s inputSchema has a `$ref` to a canary URL; fetching it fails.
    "json-schema-ref-no-deref": Scenario(
        name="json-schema-ref-no-deref",
        versions=(MODERN_VERSION,),
        expect_tools=("lookup_user",),
        preserve_schema_refs=True,
        steps=(),
    ),
    # Server (SEP-1613, SEP-2106): echo the focal Tool's inputSchema, as the broker lists it, back.
    "json-schema-2020-12-preservation": Scenario(
        name="json-schema-2020-12-preservation",
        versions=(MODERN_VERSION, LEGACY_VERSION),
        expect_tools=("json_schema_2020_12_tool", "json_schema_echo"),
        preserve_schema_refs=True,
        steps=(Step("json_schema_echo", echo_schema_of="json_schema_2020_12_tool", expect_text="echoed"),),
    ),
}
"""Every supported scenario by its ``MCP_CONFORMANCE_SCENARIO`` name (``auth/*``: :func:`auth_plan`)."""

NOT_SUPPORTED: dict[str, str] = {
    "elicitation-sep1034-client-defaults": (
        "legacy push-style elicitation (a server-initiated elicitation/create on a 2025-11-25 session) "
        "is an RFC non-goal: forms reach users only through input_required"
    ),
}
"""Scenarios deliberately not supported, with the reason (also in tests/conformance/expected-failures.yml)."""


def auth_plan(name: str) -> Scenario:
    """The plan of an ``auth/*`` scenario: sign in, list, call the first Tool (see :data:`AUTH_PLAN_VERSIONS`)."""
    return Scenario(name=name, versions=AUTH_PLAN_VERSIONS, expect_tools=(), steps=(), call_first_tool=True)


class UnsupportedScenario(ValueError):
    """The scenario name or protocol version has no plan here (the CLI exits 2)."""


def scenario_for(name: str, version: str) -> Scenario:
    """The plan of scenario ``name`` at protocol ``version``.

    Raises :class:`UnsupportedScenario` (with the supported names) for an unknown scenario or a
    version the scenario does not run at.
    """
    if name in NOT_SUPPORTED:
        raise UnsupportedScenario(f"unsupported scenario {name!r}: {NOT_SUPPORTED[name]}")
    scenario = auth_plan(name) if name.startswith("auth/") else SCENARIOS.get(name)
    if scenario is None:
        raise UnsupportedScenario(f"unsupported scenario {name!r} (supported: {', '.join(sorted(SCENARIOS))})")
    if version not in scenario.versions:
        raise UnsupportedScenario(
            f"scenario {name!r} does not run at protocol version {version!r}"
            f" (supported: {', '.join(scenario.versions)})"
        )
    return scenario


def era_for(version: str) -> Era:
    """The ``mcpServers`` ``era`` for a harness protocol version.

    ``2026-07-28`` → ``auto``: the SDK's dual-era probe sends ``server/discover`` stamped with per-request
    ``_meta`` and retries once at a mutual version on ``-32022`` (the request-metadata scenario rejects
    the first request on purpose; a pinned modern session would send no probe and could not recover).
    Anything older (``2025-11-25``) → ``legacy``: the ``initialize`` handshake only, so no 2026
    ``server/discover`` probe reaches a legacy-era harness server.
    """
    return "auto" if version == MODERN_VERSION else "legacy"

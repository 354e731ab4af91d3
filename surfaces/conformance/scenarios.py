"""What each client scenario of the MCP conformance harness expects the client to do.

The harness (``@modelcontextprotocol/conformance@0.2.0-alpha.12``) starts a scenario server and runs
``maka conformance-client <server URL>`` with ``MCP_CONFORMANCE_SCENARIO`` and
``MCP_CONFORMANCE_PROTOCOL_VERSION`` set. Each :class:`Scenario` here is read from that scenario's
server code (``dist/index.js`` of the package): the Tools it offers, which to call in what order, and
the complete result each call must end with. Pure data; :mod:`surfaces.conformance.runner` executes it.
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


@dataclass(frozen=True, slots=True)
class Scenario:
    """One harness client scenario: the Tools the server must register and the calls to make."""

    name: str
    versions: tuple[str, ...]
    """Protocol versions (``MCP_CONFORMANCE_PROTOCOL_VERSION``) this plan supports."""
    expect_tools: tuple[str, ...]
    """Bare Tool names the provider must have registered from the server's ``tools/list``."""
    steps: tuple[Step, ...]


SCENARIOS: dict[str, Scenario] = {
    # Server: one Tool `add_numbers(a: number, b: number)` returning "The sum of {a} and {b} is {a+b}".
    # Check `tool-add-numbers`: a tools/call arrived with numeric a and b (plus `wire-schema-valid`).
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
}
"""Every supported scenario by its ``MCP_CONFORMANCE_SCENARIO`` name."""


class UnsupportedScenario(ValueError):
    """The scenario name or protocol version has no plan here (the CLI exits 2)."""


def scenario_for(name: str, version: str) -> Scenario:
    """The plan of scenario ``name`` at protocol ``version``.

    Raises :class:`UnsupportedScenario` (with the supported names) for an unknown scenario or a
    version the scenario does not run at.
    """
    scenario = SCENARIOS.get(name)
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

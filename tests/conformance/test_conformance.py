"""The official MCP conformance harness (``@modelcontextprotocol/conformance@0.2.0-alpha.12`` on
Node 22) against ``python -m tests.conformance.client``, which drives the whole stack (issue 5, "Done when" 2).

Each scenario must pass every check with the client exiting 0; the checks a scenario is known to
emit are named so that a harness that silently stopped checking fails too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance.harness import HarnessRun, require_tools, run_harness

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

PASSING = {"SUCCESS", "INFO", "SKIPPED"}

REQUIRED_CHECKS: dict[str, set[str]] = {
    "sep-2322-client-request-state": {
        "sep-2322-client-request-state-echoed",
        "sep-2322-client-jsonrpc-id-different",
        "sep-2322-client-no-state-omitted",
        "sep-2322-client-parallel-isolation",
        "sep-2322-default-result-type-complete",
    },
    "request-metadata": {
        "sep-2575-http-client-sends-version-header",
        "sep-2575-client-populates-meta",
        "sep-2575-client-sends-client-info",
        "sep-2575-http-version-header-matches-meta",
        "sep-2575-client-retry-supported-version",
    },
    "tools_call": {"tool-add-numbers", "wire-schema-valid"},
    "initialize": {"mcp-client-initialization"},
    "sse-retry": {"client-sse-graceful-reconnect", "client-sse-last-event-id", "client-sse-retry-timing"},
    "http-standard-headers": {"sep-2243-client-includes-standard-headers"},
    "http-custom-headers": {
        "sep-2243-client-base64-unsafe",
        "sep-2243-client-encode-values",
        "sep-2243-client-mirrors-designated-params",
        "sep-2243-client-omit-null",
        "sep-2243-client-supports-custom-headers",
    },
    "http-invalid-tool-headers": {
        "sep-2243-client-reject-invalid-tool",
        "sep-2243-x-mcp-header-charset",
        "sep-2243-x-mcp-header-not-empty",
        "sep-2243-x-mcp-header-primitive-only",
        "sep-2243-x-mcp-header-unique",
    },
    "json-schema-ref-no-deref": {"sep-2106-no-network-ref-deref"},
    "json-schema-2020-12-preservation": {
        "json-schema-2020-12-client-$defs-preserved",
        "json-schema-2020-12-client-$schema-preserved",
        "json-schema-2020-12-client-additionalProperties-preserved",
        "json-schema-2020-12-client-echo-completed",
        "json-schema-2020-12-client-tool-found",
        "sep-2106-client-anchor-keyword-preserved",
        "sep-2106-client-composition-keywords-preserved",
        "sep-2106-client-conditional-keywords-preserved",
    },
}
"""Checks that must be present with status SUCCESS (read from the harness's scenario code)."""

STEPS: dict[str, list[str]] = {
    "sep-2322-client-request-state": [
        "test_mrtr_unrelated",
        "test_mrtr_echo_state",
        "test_mrtr_no_state",
        "test_mrtr_no_result_type",
    ],
    "request-metadata": [],
    "tools_call": ["add_numbers"],
    "initialize": [],
    "sse-retry": ["test_reconnection"],
    "http-standard-headers": ["test_headers", "my-hyphenated-tool"],
    "http-custom-headers": ["test_custom_headers", "test_custom_headers_null"],
    "http-invalid-tool-headers": ["valid_tool"],
    "json-schema-ref-no-deref": [],
    "json-schema-2020-12-preservation": ["json_schema_echo"],
}
"""The calls the conformance client reports, in completion order (unrelated ends inside echo_state)."""


def _explain(run: HarnessRun) -> str:
    return (
        f"harness stderr:\n{run.stderr[-4000:]}\n"
        f"client stdout:\n{run.client_stdout}\n"
        f"client stderr:\n{run.client_stderr[-4000:]}"
    )


@pytest.mark.parametrize(
    ("scenario", "spec_version"),
    [
        ("sep-2322-client-request-state", "2026-07-28"),
        ("request-metadata", "2026-07-28"),
        ("tools_call", "2026-07-28"),
        ("tools_call", "2025-11-25"),
        ("initialize", "2025-11-25"),
        ("sse-retry", "2025-11-25"),
        ("http-standard-headers", "2026-07-28"),
        ("http-custom-headers", "2026-07-28"),
        ("http-invalid-tool-headers", "2026-07-28"),
        ("json-schema-ref-no-deref", "2026-07-28"),
        ("json-schema-2020-12-preservation", "2026-07-28"),
        ("json-schema-2020-12-preservation", "2025-11-25"),
    ],
)
def test_harness_scenario_passes_every_check_through_the_whole_stack(
    scenario: str, spec_version: str, tmp_path: Path
) -> None:
    require_tools()
    run = run_harness(scenario, spec_version, tmp_path)

    assert "Client exited with code" not in run.stderr, _explain(run)
    assert "OVERALL: PASSED" in run.stderr, _explain(run)
    assert run.returncode == 0, _explain(run)
    failing = [(check["id"], check["status"]) for check in run.checks if check["status"] not in PASSING]
    assert failing == [], _explain(run)
    succeeded = {check["id"] for check in run.checks if check["status"] == "SUCCESS"}
    assert REQUIRED_CHECKS[scenario] - succeeded == set(), _explain(run)

    lines = run.client_lines()
    assert (lines[0]["scenario"], lines[0]["protocol_version"]) == (scenario, spec_version), _explain(run)
    steps = [line for line in lines if "step" in line]
    assert [line["step"] for line in steps] == STEPS[scenario], _explain(run)
    assert all(line["ok"] for line in steps), _explain(run)


def test_request_state_from_the_harness_never_reaches_the_clients_output_or_logs(tmp_path: Path) -> None:
    require_tools()
    run = run_harness("sep-2322-client-request-state", "2026-07-28", tmp_path)
    assert run.returncode == 0, _explain(run)

    [echoed] = [check for check in run.checks if check["id"] == "sep-2322-client-request-state-echoed"]
    assert echoed["status"] == "SUCCESS", _explain(run)
    sent = echoed["details"]["requestStateSent"]
    nonce = json.loads(sent)["nonce"]
    assert echoed["details"]["requestStateReceived"] == sent
    assert '"level": "info"' in run.client_stderr, "the client must log at INFO for this check to mean anything"
    for where, text in (("stdout", run.client_stdout), ("stderr", run.client_stderr)):
        assert nonce not in text, f"requestState leaked into the client's {where}"

"""The official MCP conformance harness (``@modelcontextprotocol/conformance@0.2.0-alpha.12`` on
Node 22) against ``python -m tests.conformance.client``, which drives the whole stack.

``make conformance`` runs every client scenario of the pinned harness at 2025-11-25 and 2026-07-28
(``--suite all``, the scenarios of one version concurrently) with tests/conformance/expected-failures.yml
as the baseline, which lists only the legacy push-style elicitation non-goal. Each other scenario must
pass every check; the checks a scenario is known to emit are named so that a harness that silently
stopped checking fails too.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conformance.harness import EXPECTED_FAILURES, SuiteRun, client_scenarios, require_tools, run_suite

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


VERSIONS = ("2025-11-25", "2026-07-28")
NON_GOALS = {"elicitation-sep1034-client-defaults"}
"""The only entries of tests/conformance/expected-failures.yml (legacy push-style elicitation)."""


@pytest.fixture(scope="module", params=VERSIONS)
def suite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, SuiteRun]:
    """Every client scenario of the pinned harness at one spec version, run once per module."""
    require_tools()
    version: str = request.param
    run = run_suite(version, tmp_path_factory.mktemp(f"suite-{version}"))
    print(f"conformance suite {version}: {len(run.scenarios)} scenarios in {run.seconds:.0f} s")  # noqa: T201
    return version, run


def _explain_suite(run: SuiteRun, scenario: str | None = None) -> str:
    text = f"harness stdout:\n{run.stdout[-6000:]}\nharness stderr:\n{run.stderr[-3000:]}"
    if scenario is not None and scenario in run.scenarios:
        result = run.scenarios[scenario]
        text += f"\nclient stdout:\n{result.client_stdout}\nclient stderr:\n{result.client_stderr[-4000:]}"
    return text


def test_the_expected_failures_file_lists_only_the_legacy_elicitation_non_goal() -> None:
    document = yaml.safe_load(EXPECTED_FAILURES.read_text())
    assert document == {"client": sorted(NON_GOALS)}
    assert "RFC non-goal" in EXPECTED_FAILURES.read_text()


@pytest.mark.timeout(600)
def test_every_client_scenario_of_the_harness_passes_through_the_whole_stack(suite: tuple[str, SuiteRun]) -> None:
    version, run = suite
    assert run.returncode == 0, _explain_suite(run)
    assert "Baseline check passed" in run.stdout, _explain_suite(run)
    expected = set(client_scenarios(version))
    assert len(expected) >= (19 if version == "2025-11-25" else 33)
    assert set(run.scenarios) == expected, _explain_suite(run)
    for scenario, result in run.scenarios.items():
        failing = [(check["id"], check["status"]) for check in result.checks if check["status"] not in PASSING]
        if scenario in NON_GOALS:
            assert failing, f"{scenario} passes now: remove it from the expected failures"
            continue
        assert failing == [], _explain_suite(run, scenario)
        succeeded = {check["id"] for check in result.checks if check["status"] == "SUCCESS"}
        assert REQUIRED_CHECKS.get(scenario, set()) - succeeded == set(), _explain_suite(run, scenario)
        if scenario.startswith("auth/"):
            continue
        lines = [json.loads(line) for line in result.client_stdout.splitlines() if line.startswith("{")]
        assert (lines[0]["scenario"], lines[0]["protocol_version"]) == (scenario, version), _explain_suite(
            run, scenario
        )
        steps = [line for line in lines if "step" in line]
        assert [line["step"] for line in steps] == STEPS[scenario], _explain_suite(run, scenario)
        assert all(line["ok"] for line in steps), _explain_suite(run, scenario)
        if scenario.startswith("json-schema-"):  # the schemas also went through `maka tools --json` unchanged
            [printed] = [line["listed_by_cli"] for line in lines if "listed_by_cli" in line]
            assert set(printed) >= set(lines[0]["tools"]), _explain_suite(run, scenario)
            assert not any("listing_problems" in line for line in lines), _explain_suite(run, scenario)


REFUSED_BEFORE_SIGN_IN = {"auth/resource-mismatch", "auth/metadata-issuer-mismatch"}
"""Scenarios whose metadata the client must refuse before any authorization request (RFC 8707, RFC 8414)."""


@pytest.mark.timeout(600)
def test_the_auth_scenarios_sign_in_through_the_host_owned_prompt(suite: tuple[str, SuiteRun]) -> None:
    _, run = suite
    auth = {name: result for name, result in run.scenarios.items() if name.startswith("auth/")}
    assert len(auth) >= 14
    without_sign_in = {
        name for name, result in auth.items() if '"event": "oauth_sign_in_completed"' not in result.client_stderr
    }
    # Every other scenario's code went prompt -> broker ListSignIns -> CompleteSignIn -> provider.
    assert without_sign_in <= REFUSED_BEFORE_SIGN_IN, _explain_suite(run)
    called = [name for name, result in auth.items() if '"step"' in result.client_stdout]
    assert len(called) >= 12, called


@pytest.mark.timeout(600)
def test_access_tokens_and_request_state_never_reach_the_clients_output_or_logs(suite: tuple[str, SuiteRun]) -> None:
    version, run = suite
    tokens: set[str] = set()
    for result in run.scenarios.values():
        for check in result.checks:
            body = (check.get("details") or {}).get("body")
            if check["id"] == "outgoing-auth-response" and isinstance(body, dict):
                tokens.update(str(body[key]) for key in ("access_token", "refresh_token") if body.get(key))
    assert len(tokens) >= 10, "the auth scenarios must have issued tokens for this check to mean anything"
    for scenario, result in run.scenarios.items():
        assert '"level": "info"' in result.client_stderr or scenario in NON_GOALS
        for token in tokens:
            assert token not in result.client_stdout, f"a token leaked into {scenario}'s stdout"
            assert token not in result.client_stderr, f"a token leaked into {scenario}'s logs"
    if version == "2026-07-28":
        mrtr = run.scenarios["sep-2322-client-request-state"]
        [echoed] = [check for check in mrtr.checks if check["id"] == "sep-2322-client-request-state-echoed"]
        sent = echoed["details"]["requestStateSent"]
        assert echoed["details"]["requestStateReceived"] == sent
        nonce = json.loads(sent)["nonce"]
        assert nonce not in mrtr.client_stdout, "requestState leaked into the client's stdout"
        assert nonce not in mrtr.client_stderr, "requestState leaked into the client's logs"

"""Scenario plans of the MCP conformance harness and the era each protocol version uses."""

from __future__ import annotations

import pytest

from tests.conformance.client.scenarios import SCENARIOS, UnsupportedScenario, era_for, scenario_for


def test_every_auth_scenario_signs_in_and_calls_the_first_tool_at_both_versions() -> None:
    for version in ("2026-07-28", "2025-11-25"):
        plan = scenario_for("auth/metadata-default", version)
        assert (plan.call_first_tool, plan.steps) == (True, ())


def test_the_invalid_header_plan_refuses_every_invalid_tool_and_calls_only_the_valid_one() -> None:
    plan = SCENARIOS["http-invalid-tool-headers"]
    assert len(plan.reject_tools) == 11
    assert [step.tool for step in plan.steps] == ["valid_tool"]


def test_the_four_required_scenario_version_pairs_have_plans() -> None:
    pairs = [
        ("sep-2322-client-request-state", "2026-07-28"),
        ("request-metadata", "2026-07-28"),
        ("tools_call", "2026-07-28"),
        ("tools_call", "2025-11-25"),
    ]
    assert [(scenario_for(name, version).name, version) for name, version in pairs] == pairs


def test_the_mrtr_plan_calls_the_unrelated_tool_while_the_echo_state_form_is_pending() -> None:
    plan = SCENARIOS["sep-2322-client-request-state"]
    first = plan.steps[0]
    assert (first.tool, first.expect_forms) == ("test_mrtr_echo_state", 1)
    assert [inner.tool for inner in first.during_form] == ["test_mrtr_unrelated"]
    assert [step.tool for step in plan.steps[1:]] == ["test_mrtr_no_state", "test_mrtr_no_result_type"]
    assert set(plan.expect_tools) == {"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated",
                                      "test_mrtr_no_result_type"}  # fmt: skip


def test_unknown_scenarios_and_versions_are_refused_with_the_supported_names() -> None:
    with pytest.raises(UnsupportedScenario, match="supported: http-custom-headers"):
        scenario_for("no-such-scenario", "2025-11-25")
    with pytest.raises(UnsupportedScenario, match="RFC non-goal"):
        scenario_for("elicitation-sep1034-client-defaults", "2025-11-25")
    with pytest.raises(UnsupportedScenario, match="does not run at protocol version '2025-11-25'"):
        scenario_for("request-metadata", "2025-11-25")


def test_modern_versions_probe_with_auto_and_older_versions_use_the_legacy_handshake() -> None:
    assert era_for("2026-07-28") == "auto"
    assert era_for("2025-11-25") == "legacy"
    assert era_for("2025-06-18") == "legacy"

"""Pure parts of the conformance runner: result text, step checks, the generated mcpServers file."""

from __future__ import annotations

import json
from pathlib import Path

from maka.broker.v1 import broker_pb2
from services.mcp_provider.config import Era, HttpServer, load_config
from tests.conformance.client.runner import (
    CallOutcome,
    check_step,
    cli_schema_problems,
    result_text,
    write_mcp_config,
)
from tests.conformance.client.scenarios import Step


def test_result_text_joins_only_text_blocks() -> None:
    result = {
        "content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "two"},
        ]
    }
    assert result_text(result) == "one\ntwo"
    assert result_text({"content": "not a list"}) == ""


def test_a_complete_result_with_the_expected_text_and_form_count_passes() -> None:
    step = Step("test_mrtr_no_state", expect_text="no-state-ok", expect_forms=1)
    outcome = CallOutcome(tool="conformance:test_mrtr_no_state", kind="result", text="no-state-ok", forms=1)
    assert check_step(step, outcome) == []


def test_failures_errors_wrong_text_and_wrong_form_counts_are_each_reported() -> None:
    step = Step("add_numbers", expect_text="is 5", expect_forms=0)
    failed = CallOutcome(tool="conformance:add_numbers", kind="failure", code="FAILURE_CODE_SERVER_ERROR", forms=1)
    assert check_step(step, failed) == [
        "ended with failure FAILURE_CODE_SERVER_ERROR",
        "result text does not contain 'is 5'",
        "showed 1 forms, expected 0",
    ]
    errored = CallOutcome(tool="conformance:add_numbers", kind="result", is_error=True, text="is 5")
    assert check_step(step, errored) == ["the result has isError: true"]


def test_the_generated_config_is_a_valid_mcp_servers_file_for_the_provider(tmp_path: Path) -> None:
    path = write_mcp_config(tmp_path, "http://localhost:4321/mcp", "legacy")

    assert json.loads(path.read_text()) == {
        "mcpServers": {"conformance": {"url": "http://localhost:4321/mcp", "era": "legacy"}}
    }
    [server] = load_config(path)
    assert (server.name, server.transport, server.era) == (
        "conformance",
        HttpServer("http://localhost:4321/mcp"),
        Era.LEGACY,
    )


def test_a_cli_listing_that_drops_or_changes_a_schema_is_reported() -> None:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"a": {"type": "string"}}}
    tools = [
        broker_pb2.Tool(
            qualified_name="s:echo", input_schema_json=json.dumps(schema), output_schema_json='{"type":"object"}'
        ),
        broker_pb2.Tool(qualified_name="s:plain", input_schema_json='{"type":"object"}'),
    ]
    same = {
        "s:echo": {"name": "s:echo", "inputSchema": schema, "outputSchema": {"type": "object"}},
        "s:plain": {"name": "s:plain", "inputSchema": {"type": "object"}},
    }
    assert cli_schema_problems(tools, same) == []

    changed = {"s:echo": {"name": "s:echo", "inputSchema": {"$defs": {"a": {"type": "string"}}}}}
    assert cli_schema_problems(tools, changed) == [
        "maka tools --json changed the input schema of s:echo",
        "maka tools --json changed the output schema of s:echo",
        "maka tools --json does not list s:plain",
    ]

"""What of an upstream ``CallToolResult`` the MCP client receives (pure logic; the calls themselves run through
real processes in test_front_door.py)."""

from __future__ import annotations

from surfaces.mcp.calls import UnknownTool, passed_result


def test_only_content_structured_content_and_is_error_pass_on() -> None:
    upstream = {
        "content": [{"type": "text", "text": "Deployed web to staging."}],
        "structuredContent": {"environment": "staging"},
        "isError": False,
        "resultType": "complete",
        "requestState": "v1.sealed-state",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "maka-examples", "version": ""}},
    }

    wire = passed_result(upstream).model_dump(by_alias=True, mode="json", exclude_none=True)

    assert "requestState" not in str(wire)
    assert "v1.sealed-state" not in str(wire)
    assert wire["content"] == [{"type": "text", "text": "Deployed web to staging."}]
    assert wire["structuredContent"] == {"environment": "staging"}
    assert "_meta" not in wire


def test_a_tool_error_result_passes_through_as_an_error() -> None:
    result = passed_result({"content": [{"type": "text", "text": "disk full"}], "isError": True})

    assert result.is_error
    assert result.content[0].text == "disk full"  # type: ignore[union-attr]


def test_a_result_the_sdk_cannot_type_becomes_an_invalid_result_error() -> None:
    result = passed_result({"content": [{"type": "no-such-block"}]})

    assert result.is_error
    assert result.content[0].text.startswith("INVALID_RESULT: ")  # type: ignore[union-attr]


def test_an_unknown_tool_with_a_colon_is_told_the_listed_name_it_resembles() -> None:
    listed = ["everything.get-sum", "everything.echo", "examples.deploy"]

    error = UnknownTool("everything:get-sum", listed)

    assert "did you mean everything.get-sum?" in error.error.message
    assert error.error.data == {"reason": "unknown_tool"}


def test_an_unknown_tool_like_no_listed_one_is_told_how_names_look_with_a_listed_example() -> None:
    error = UnknownTool("zzz", ["everything.echo"])

    assert "did you mean" not in error.error.message
    assert "front-door Tool names are SERVER.TOOL, e.g. everything.echo" in error.error.message

"""The user-facing text every service shows alike (services/core/messages.py)."""

from __future__ import annotations

from services.core import messages


def test_the_sign_in_hint_names_the_server_the_url_and_the_cli_command() -> None:
    assert messages.sign_in_hint("crm", "https://idp.example/authorize?x=1") == (
        "sign in to crm first: open https://idp.example/authorize?x=1 (or run `maka auth login crm`)"
    )


def test_a_failed_server_names_its_cause_and_the_next_retry() -> None:
    text = messages.server_unavailable("crm", "failed", "connection refused", 4.4)
    assert text == "MCP server crm failed to connect: connection refused; next retry in 4 s"


def test_a_connecting_server_names_its_last_cause_but_no_retry() -> None:
    assert (
        messages.server_unavailable("crm", "connecting", "timed out", 3.0) == "MCP server crm is connecting: timed out"
    )


def test_other_states_show_only_their_wording_and_an_unknown_state_reads_not_connected() -> None:
    assert messages.server_unavailable("crm", "draining", "ignored", 1.0) == (
        "MCP server crm was removed from the config (finishing its calls in flight)"
    )
    assert messages.server_unavailable("crm", "disabled") == "MCP server crm is disabled in the config"
    assert messages.server_unavailable("crm", "unknown") == "MCP server crm is not connected"


def test_a_retry_time_already_past_reads_zero_seconds() -> None:
    assert (
        messages.server_unavailable("crm", "failed", None, -3.0)
        == "MCP server crm failed to connect; next retry in 0 s"
    )

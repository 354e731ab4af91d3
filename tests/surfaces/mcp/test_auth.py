"""Pure pieces of the front door's bearer-token gate: reading the header and placing the RFC 9728 metadata URL."""

from __future__ import annotations

import pytest

from surfaces.mcp.auth import bearer_token, metadata_url


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc-123", "abc-123"),
        ("bearer abc-123", "abc-123"),
        ("BEARER  abc-123 ", "abc-123"),
        ("Basic abc-123", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("", None),
    ],
)
def test_a_bearer_token_is_read_from_the_authorization_header_with_any_scheme_case(
    header: str, token: str | None
) -> None:
    assert bearer_token({"authorization": header}) == token


def test_no_authorization_header_is_no_token() -> None:
    assert bearer_token({}) is None


@pytest.mark.parametrize(
    ("resource", "metadata"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"),
        ("http://127.0.0.1:8766/mcp", "http://127.0.0.1:8766/.well-known/oauth-protected-resource/mcp"),
        ("https://mcp.example.com", "https://mcp.example.com/.well-known/oauth-protected-resource"),
        ("https://h.example.com/a/mcp", "https://h.example.com/.well-known/oauth-protected-resource/a/mcp"),
    ],
)
def test_the_metadata_url_inserts_the_well_known_path_before_the_resources_path(resource: str, metadata: str) -> None:
    assert metadata_url(resource) == metadata

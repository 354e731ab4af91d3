"""The Host-owned OAuth parts: the encrypted token vault, the SDK TokenStorage over it, the sign-in flow."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from services.core.key_file import generate_key_file
from services.mcp_provider.config import OAuthClient, parse_config
from services.mcp_provider.oauth import (
    OAuthConfigError,
    SignInFlow,
    StoredTokens,
    TokenVault,
    read_key_file,
)

CANARY = "canary-access-token-6f1c0e"


def _vault(tmp_path: Path, host: str = "h1") -> TokenVault:
    key_file = tmp_path / "oauth.key"
    generate_key_file(key_file)
    return TokenVault(tmp_path / "tokens", read_key_file(key_file), host)


async def test_tokens_survive_a_new_storage_and_are_never_on_disk_in_plaintext(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    storage = StoredTokens("remote", "https://mcp.example.com/mcp", vault)
    await storage.set_tokens(OAuthToken(access_token=CANARY, refresh_token="canary-refresh-9a"))

    again = StoredTokens("remote", "https://mcp.example.com/mcp", _vault(tmp_path))
    tokens = await again.get_tokens()
    assert tokens is not None
    assert (tokens.access_token, tokens.refresh_token) == (CANARY, "canary-refresh-9a")
    _assert_no_plaintext(tmp_path)


def _assert_no_plaintext(directory: Path) -> None:
    files = [path for path in directory.rglob("*") if path.is_file()]
    assert len(files) == 2  # the key and one encrypted record
    for path in files:
        assert CANARY.encode() not in path.read_bytes(), path
        assert b"canary-refresh" not in path.read_bytes(), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


async def test_a_record_does_not_decrypt_for_another_host_server_url_or_key(tmp_path: Path) -> None:
    storage = StoredTokens("remote", "https://a/mcp", _vault(tmp_path))
    await storage.set_tokens(OAuthToken(access_token=CANARY))

    assert (await StoredTokens("remote", "https://b/mcp", _vault(tmp_path)).get_tokens()) is None
    assert (await StoredTokens("remote", "https://a/mcp", _vault(tmp_path, host="h2")).get_tokens()) is None
    (tmp_path / "oauth.key").unlink()
    assert (await StoredTokens("remote", "https://a/mcp", _vault(tmp_path)).get_tokens()) is None


async def test_sign_out_forgets_tokens_but_keeps_a_pre_registered_client(tmp_path: Path) -> None:
    client = OAuthClientInformationFull(client_id="pre", redirect_uris=[AnyUrl("http://127.0.0.1:8765/oauth/callback")])
    storage = StoredTokens("remote", "https://a/mcp", _vault(tmp_path), preregistered=client)
    await storage.set_tokens(OAuthToken(access_token=CANARY))
    signed_in_before = storage.signed_in

    storage.clear()
    assert (signed_in_before, storage.signed_in) == (True, False)
    assert (await storage.get_client_info()) == client
    assert (await StoredTokens("remote", "https://a/mcp", _vault(tmp_path)).get_tokens()) is None


def test_a_bad_key_file_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "short.key").write_text("c2hvcnQ=\n")
    with pytest.raises(OAuthConfigError, match="not 32 bytes"):
        read_key_file(tmp_path / "short.key")
    with pytest.raises(OAuthConfigError, match="cannot read"):
        read_key_file(tmp_path / "missing.key")


async def test_the_flow_publishes_the_url_and_accepts_only_the_pending_state() -> None:
    changes: list[str | None] = []
    flow: SignInFlow

    async def on_change() -> None:
        changes.append(flow.authorization_url)

    flow = SignInFlow("remote", on_change)
    url = "https://as/authorize?client_id=c&state=S-1&code_challenge=x"
    await flow.redirect(url)
    assert (flow.pending, changes) == (True, [url])

    assert not flow.complete("code", "FORGED")
    assert flow.complete("the-code", "S-1", iss="https://as")
    result = await flow.callback()
    assert (result.code, result.state, result.iss) == ("the-code", "S-1", "https://as")
    assert (flow.pending, changes[-1]) == (False, None)
    assert not flow.complete("the-code", "S-1")  # a replayed redirect changes nothing


async def test_a_refused_authorization_fails_the_sdk_flow() -> None:
    async def on_change() -> None:
        return None

    flow = SignInFlow("remote", on_change)
    await flow.redirect("https://as/authorize?state=S-2")
    assert flow.complete("", "S-2", error="access_denied")
    with pytest.raises(OAuthFlowError, match="access_denied"):
        await flow.callback()


def test_the_config_takes_a_pre_registered_client_and_an_authorization_header_turns_oauth_off() -> None:
    [pre, header, off] = parse_config(
        {
            "mcpServers": {
                "pre": {"url": "https://a/mcp", "oauth": {"clientId": "id", "clientSecret": "s", "scope": "read"}},
                "header": {"url": "https://b/mcp", "headers": {"Authorization": "Bearer x"}},
                "off": {"url": "https://c/mcp", "oauth": False},
            }
        }
    )
    assert pre.transport.oauth_client == OAuthClient("id", "s", "read")  # type: ignore[union-attr]
    assert (header.transport.oauth, off.transport.oauth) == (False, False)  # type: ignore[union-attr]

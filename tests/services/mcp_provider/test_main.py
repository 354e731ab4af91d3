"""``build(settings)``: the provider app from ``MAKA_*`` settings, without connecting anything."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.core.key_file import generate_key_file
from services.mcp_provider.config import ConfigError, Era, StdioServer, read_config
from services.mcp_provider.main import ProviderApp, build, quiet_sdk_loggers
from services.mcp_provider.oauth import OAuthConfigError
from services.mcp_provider.settings import Settings
from services.mcp_provider.status import MAX_RELOAD_PROBLEMS, reload_problems


async def test_build_reads_the_mcp_servers_file_and_applies_the_loop_settings(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"a": {"command": "python"}, "b": {"url": "http://h/mcp", "era": "legacy"}}})
    )
    settings = Settings(mcp_config=config, max_rounds=3, state_only_pacing_ms=20, call_timeout_seconds=7)

    app = await build(settings)

    assert isinstance(app, ProviderApp)
    assert list(app.manager.connections) == ["a", "b"]
    assert app.manager.connection("b").config.era is Era.LEGACY
    assert app.manager.max_rounds == 3
    assert app.manager.pacing_initial == pytest.approx(0.02)
    assert app.manager.call_timeout_seconds == 7
    assert not any(c.connected for c in app.manager.connections.values())


async def test_build_without_a_config_has_no_servers_and_a_bad_file_fails_with_its_path(tmp_path: Path) -> None:
    assert list((await build(Settings(mcp_config=None))).manager.connections) == []
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mcpServers": {"a": {"url": "ftp://x"}}}))

    with pytest.raises(ConfigError) as caught:
        await build(Settings(mcp_config=bad))
    assert caught.value.path == "mcpServers.a.url"


def test_settings_read_maka_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_BROKER_TARGET", "broker:1")
    monkeypatch.setenv("MAKA_MAX_ROUNDS", "4")
    monkeypatch.setenv("MAKA_BROKER_TOKEN", "t")

    settings = Settings()

    assert (settings.broker_target, settings.max_rounds, settings.broker_token) == ("broker:1", 4, "t")
    assert settings.state_only_pacing_ms == 50
    assert settings.call_timeout_seconds == 300


def test_sdk_loggers_are_pinned_to_info_even_when_the_service_runs_at_debug() -> None:
    logging.getLogger("mcp").setLevel(logging.DEBUG)

    quiet_sdk_loggers()

    assert logging.getLogger("mcp.client.streamable_http").getEffectiveLevel() >= logging.INFO


def test_a_rejected_reload_reports_at_most_twenty_one_line_problems_and_never_a_value() -> None:
    document = {
        "mcpServers": {
            "remote": {"url": "ftp://mcp.example/?token=${OPS_SECRET}"},
            **{f"bad{i:02}\n\x1b[31m": {"command": ""} for i in range(12)},  # a bad name and an empty command
        }
    }
    with pytest.raises(ConfigError) as raised:
        read_config(document, {"OPS_SECRET": "canary-4d1f"})
    lines = reload_problems(raised.value.problems)
    assert len(raised.value.problems) == 25
    assert len(lines) == MAX_RELOAD_PROBLEMS + 1
    assert lines[0] == "mcpServers.remote.url: must be an http:// or https:// URL"
    assert lines[1] == "mcpServers.bad00  [31m: server names are 1-64 characters of A-Z a-z 0-9 _ . -"
    assert lines[-1] == "... and 5 more problems"
    assert not any("\n" in line or "\x1b" in line or "canary-4d1f" in line for line in lines)


async def test_an_optional_oauth_key_that_is_absent_keeps_tokens_in_memory_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A Kubernetes Secret volume marked optional: true and not created mounts as an empty directory.
    key_file = tmp_path / "oauth-key" / "oauth.key"
    tokens = tmp_path / "oauth"
    settings = Settings(oauth_key_file=key_file, oauth_key_optional=True, oauth_token_dir=tokens)

    with caplog.at_level(logging.WARNING, logger="maka.mcp_provider.main"):
        app = await build(settings)

    assert app.oauth.vault is None
    assert [r.getMessage() for r in caplog.records] == ["oauth_key_absent"]
    assert not tokens.exists(), "nothing is written to disk without a key"


async def test_an_optional_oauth_key_that_is_present_is_used_and_a_bad_one_is_still_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "oauth.key"
    generate_key_file(key_file)
    tokens = tmp_path / "oauth"

    app = await build(Settings(oauth_key_file=key_file, oauth_key_optional=True, oauth_token_dir=tokens, host_id="h"))
    assert app.oauth.vault is not None
    app.oauth.vault.save("s", "https://s/mcp", {"tokens": {"access_token": "canary-at"}})
    assert [p.name for p in tokens.iterdir()] == ["h--s.tokens"]
    assert b"canary-at" not in (tokens / "h--s.tokens").read_bytes()

    key_file.write_text("not a key\n")
    with pytest.raises(OAuthConfigError):
        await build(Settings(oauth_key_file=key_file, oauth_key_optional=True))
    with pytest.raises(OAuthConfigError, match="cannot read"):
        await build(Settings(oauth_key_file=tmp_path / "absent.key"))  # not optional: refused


def test_the_provider_refuses_a_missing_oauth_key_with_exit_2_and_one_log_line_not_a_traceback(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MAKA_OAUTH_KEY_FILE": str(tmp_path / "absent.key"),
        "MAKA_LISTEN": "127.0.0.1:0",
        "MAKA_BROKER_TARGET": "127.0.0.1:9",
    }
    result = subprocess.run(
        [sys.executable, "-m", "services.mcp_provider.main"], env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 2, result.stderr
    assert "oauth_key_invalid" in result.stderr
    assert "Traceback" not in result.stderr


async def test_a_start_on_an_invalid_file_runs_the_last_applied_copy_which_keeps_its_variables_unexpanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APPLIED_CANARY", "canary-5e2b")
    config, applied = tmp_path / "mcp.json", tmp_path / "run" / "mcp-applied.json"
    applied.parent.mkdir()
    text = json.dumps({"mcpServers": {"ops": {"command": "python", "env": {"TOKEN": "${APPLIED_CANARY}"}}}})
    config.write_text(text)
    settings = Settings(mcp_config=config, mcp_config_applied=applied)

    first = await build(settings)
    assert list(first.servers) == ["ops"]
    assert applied.read_text() == text, "the copy is the file as written, ${VAR} unexpanded"
    assert applied.stat().st_mode & 0o777 == 0o600

    config.write_text(json.dumps({"mcpServers": {"other": {"command": ""}}}))
    second = await build(settings)
    assert list(second.servers) == ["ops"], "the last applied config runs"
    transport = second.servers["ops"].transport
    assert isinstance(transport, StdioServer)
    assert transport.env == {"TOKEN": "canary-5e2b"}
    assert applied.read_text() == text

    applied.unlink()
    with pytest.raises(ConfigError):
        await build(settings)  # no copy: a bad file stops the provider, as before

"""Both clients' ``from_env`` find the local stack as ``maka up`` leaves it (docs/security.md "Other local users"):
``endpoints.json`` naming a ``unix:///...sock`` target and the owner's tokens file. The real Interaction service
serves in-process on a unix socket with that tokens file, over real Redis; the owner's token goes only to the
address ``endpoints.json`` names, never to a target given explicitly."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from maka_client import MakaError, SurfaceClient
from services.interaction.settings import Settings as InteractionSettings
from stack.access import make_private, write_owner_token
from stack.state_dir import Endpoints, write_endpoints
from tests.helpers.clients import serving_interaction, ts_pending


@dataclass
class LocalStack:
    state_dir: Path
    target: str


@pytest.fixture
async def local_stack(tmp_path: Path, redis_url: str) -> AsyncIterator[LocalStack]:
    """The Interaction service on ``unix://STATE/sock/interaction.sock`` requiring the owner's token, and the
    ``endpoints.json`` naming both (what ``maka up`` writes)."""
    state_dir = tmp_path / "state"
    make_private(state_dir)
    tokens, _token = write_owner_token(state_dir)
    (state_dir / "sock").mkdir(mode=0o700)
    target = f"unix://{state_dir / 'sock' / 'interaction.sock'}"
    settings = InteractionSettings(
        redis_url=redis_url, host_id="local", listen=target, auth_tokens_file=tokens, grace_seconds=0.5
    )
    async with serving_interaction(settings):
        write_endpoints(state_dir, Endpoints(interaction=target, broker="", tokens=str(tokens)))
        yield LocalStack(state_dir, target)


async def test_the_python_client_from_env_reaches_the_unix_socket_with_the_owners_token(
    local_stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MAKA_INTERACTION_TARGET", "MAKA_SURFACE_TOKEN", "MAKA_TLS_CA_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MAKA_STATE_DIR", str(local_stack.state_dir))

    async with SurfaceClient.from_env() as surface:
        assert surface.target == local_stack.target
        assert await surface.pending() == []
    async with SurfaceClient.from_env(local_stack.target) as named:  # named explicitly: the token stays home
        with pytest.raises(MakaError) as refused:
            await named.pending(timeout=5)
    assert refused.value.grpc_status_code is grpc.StatusCode.UNAUTHENTICATED


async def _ts_pending(state_dir: Path, target: str = "") -> object:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKA_INTERACTION_TARGET", "MAKA_SURFACE_TOKEN")}
    return await ts_pending(target, {**env, "MAKA_STATE_DIR": str(state_dir)})


async def test_the_typescript_client_from_env_reaches_the_unix_socket_with_the_owners_token(
    local_stack: LocalStack,
) -> None:
    assert await _ts_pending(local_stack.state_dir) == []
    assert await _ts_pending(local_stack.state_dir, local_stack.target) == {"code": "UNAUTHENTICATED"}

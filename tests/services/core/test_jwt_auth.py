"""Bearer JWTs of an OpenID Connect issuer beside the tokens file, on a real gRPC server, with a real OpenID
provider (``oidc-provider-mock``): who a verified token is, and each refusal's stable message."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import grpc
import grpc.aio
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey
from pydantic import ValidationError

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core.auth import Role, acts_for_metadata, current_principal
from services.core.channels import open_channel
from services.core.jwt_auth import MIN_REFRESH_SECONDS, IssuerKeys, JwtRefused, JwtVerifier, OidcConfig, Refusal
from services.core.reasons import AuthErrorReason
from services.core.serving import RunningServer, start_server
from services.core.settings import ClientTlsSettings, GrpcServerSettings
from services.core.status import error_from_rpc
from tests.helpers.oidc import ALICE, BOB, Person, Provider, id_token, oidc_provider
from tests.helpers.tokens import write_tokens_file

LIST = "/maka.interaction.v1.InteractionService/ListPending"
AUDIENCE = "maka-web"


class EchoPrincipal(interaction_service_pb2_grpc.InteractionServiceServicer):
    """Answers with ``name|via|roles`` of the caller's principal as the interaction ids."""

    async def ListPending(
        self,
        request: interaction_service_pb2.ListPendingRequest,
        context: grpc.aio.ServicerContext[
            interaction_service_pb2.ListPendingRequest, interaction_service_pb2.ListPendingResponse
        ],
    ) -> interaction_service_pb2.ListPendingResponse:
        principal = current_principal()
        roles = ",".join(sorted(principal.roles))
        return interaction_service_pb2.ListPendingResponse(
            pending=[interaction_pb2.Interaction(interaction_id=f"{principal.name}|{principal.via}|{roles}")]
        )


class App:
    service_names: Sequence[str] = ("maka.interaction.v1.InteractionService",)
    method_roles = {LIST: frozenset({Role.SURFACE})}

    def register(self, server: grpc.aio.Server) -> None:
        interaction_service_pb2_grpc.add_InteractionServiceServicer_to_server(
            EchoPrincipal(),  # type: ignore[abstract]  # only the method under test
            server,
        )

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


MALLORY = Person("mallory", "alice@example.com", ("approvers",), email_verified=False, username="mallory")
"""Someone who put alice's address on their own account, which the issuer never verified."""


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, BOB, MALLORY]) as running:
        yield running


def _settings(tmp_path: Path, issuer: str) -> GrpcServerSettings:
    tokens = write_tokens_file(
        tmp_path / "tokens.json",
        [
            {"name": "web", "token": "web-service-token", "roles": ["surface"], "acts_for": True},
            {"name": "tui", "token": "tui-surface-token", "roles": ["surface"]},
            {"name": "root", "token": "root-admin-token", "roles": ["admin"]},
        ],
    )
    return GrpcServerSettings(
        listen="127.0.0.1:0",
        auth_tokens_file=tokens,
        oidc_issuer=issuer,
        oidc_audiences=[AUDIENCE],
        oidc_roles={"approvers": ["surface"]},
    )


@pytest.fixture
async def server(tmp_path: Path, provider: Provider) -> AsyncIterator[RunningServer]:
    running = await start_server(App(), _settings(tmp_path, provider.issuer))
    yield running
    await running.stop()


async def _whoami(port: int, token: str, metadata: tuple[tuple[str, str], ...] = ()) -> str:
    async with open_channel(f"127.0.0.1:{port}", token=token, tls=ClientTlsSettings()) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        response = await stub.ListPending(interaction_service_pb2.ListPendingRequest(), metadata=metadata)
        return response.pending[0].interaction_id


async def _refusal(port: int, token: str, metadata: tuple[tuple[str, str], ...] = ()) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _whoami(port, token, metadata)
    detail = error_from_rpc(caught.value)
    assert detail.reason in (AuthErrorReason.UNAUTHENTICATED, AuthErrorReason.PERMISSION_DENIED)
    return detail.code, detail.message


async def _id_token(provider: Provider, person: Person, audience: str = AUDIENCE, scope: str = "openid email") -> str:
    return await asyncio.to_thread(id_token, provider, person, audience, scope=scope)


async def test_a_token_whose_email_is_not_verified_is_unauthenticated_email_not_verified(
    server: RunningServer, provider: Provider
) -> None:
    token = await _id_token(provider, MALLORY)
    assert await _refusal(server.port, token) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "bearer token refused: email not verified",
    )


async def test_an_issuer_without_verified_emails_names_people_by_the_configured_claim(
    tmp_path: Path, provider: Provider
) -> None:
    settings = _settings(tmp_path, provider.issuer).model_copy(update={"oidc_name_claim": "preferred_username"})
    running = await start_server(App(), settings)
    try:
        token = await _id_token(provider, MALLORY, scope="openid email profile")
        assert await _whoami(running.port, token) == "mallory||surface"
    finally:
        await running.stop()


async def test_an_id_token_of_the_issuer_is_the_person_named_by_its_claim_with_the_roles_of_its_groups(
    server: RunningServer, provider: Provider
) -> None:
    token = await _id_token(provider, ALICE)
    assert await _whoami(server.port, token) == "alice@example.com||surface"


async def test_the_static_tokens_file_still_authenticates_beside_the_issuer(server: RunningServer) -> None:
    assert await _whoami(server.port, "tui-surface-token") == "tui||surface"


async def test_a_token_for_another_audience_is_unauthenticated_wrong_audience(
    server: RunningServer, provider: Provider
) -> None:
    token = await _id_token(provider, ALICE, audience="some-other-app")
    assert await _refusal(server.port, token) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "bearer token refused: wrong audience",
    )


async def test_an_expired_token_is_unauthenticated_expired(tmp_path: Path) -> None:
    with oidc_provider([ALICE], token_lifetime=timedelta(minutes=-5)) as stale:
        token = await _id_token(stale, ALICE)
        running = await start_server(App(), _settings(tmp_path, stale.issuer))
        try:
            assert await _refusal(running.port, token) == (
                grpc.StatusCode.UNAUTHENTICATED,
                "bearer token refused: expired",
            )
        finally:
            await running.stop()


def _forged(provider: Provider, kid: str) -> str:
    """A well-formed token for our audience, signed by a key the issuer never published."""
    key = RSAKey.generate_key(2048, parameters={"kid": kid})
    claims = {"iss": provider.issuer, "aud": AUDIENCE, "email": "mallory@example.com", "exp": 4_000_000_000}
    return jwt.encode({"alg": "RS256", "kid": kid}, claims, key)


async def test_a_token_signed_by_an_unknown_key_is_unauthenticated_unknown_signing_key(
    server: RunningServer, provider: Provider
) -> None:
    assert await _refusal(server.port, _forged(provider, "rogue")) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "bearer token refused: unknown signing key",
    )


async def test_an_unknown_kid_refetches_the_jwks_at_most_once_per_refresh_interval(provider: Provider) -> None:
    now = [1000.0]
    keys = IssuerKeys(provider.issuer, clock=lambda: now[0])
    verifier = JwtVerifier(OidcConfig(issuer=provider.issuer, audiences=frozenset({AUDIENCE})), keys=keys)
    good = await _id_token(provider, ALICE)
    assert (await verifier.claims(good))["email"] == "alice@example.com"
    assert keys.fetches == 1

    async def refused(kid: str) -> None:
        with pytest.raises(JwtRefused) as caught:
            await verifier.claims(_forged(provider, kid))
        assert caught.value.refusal is Refusal.UNKNOWN_KEY

    now[0] += MIN_REFRESH_SECONDS  # an hour-old cache meets a kid it does not hold: the issuer may have rotated
    await refused("rotated-1")
    assert keys.fetches == 2
    await refused("rotated-2")  # a flood of made-up kids does not hammer the issuer
    assert keys.fetches == 2
    now[0] += MIN_REFRESH_SECONDS
    await refused("rotated-3")
    assert keys.fetches == 3
    assert (await verifier.claims(good))["email"] == "alice@example.com"
    assert keys.fetches == 3


async def test_after_the_issuer_rotates_its_key_new_tokens_verify_and_old_ones_are_refused() -> None:
    with oidc_provider([ALICE]) as rotating:
        now = [1000.0]
        keys = IssuerKeys(rotating.issuer, clock=lambda: now[0])
        verifier = JwtVerifier(OidcConfig(issuer=rotating.issuer, audiences=frozenset({AUDIENCE})), keys=keys)
        old = await _id_token(rotating, ALICE)
        assert (await verifier.claims(old))["email"] == "alice@example.com"
        rotating.rotate_key()
        new = await _id_token(rotating, ALICE)
        now[0] += MIN_REFRESH_SECONDS
        assert (await verifier.claims(new))["email"] == "alice@example.com"
        assert keys.fetches == 2
        with pytest.raises(JwtRefused) as caught:
            await verifier.claims(old)
        assert caught.value.refusal is Refusal.BAD_SIGNATURE
        assert keys.fetches == 2


async def test_a_person_whose_groups_grant_no_role_is_permission_denied(
    server: RunningServer, provider: Provider
) -> None:
    token = await _id_token(provider, BOB)
    code, message = await _refusal(server.port, token)
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert message.startswith("bob@example.com may not call")


async def test_a_service_token_allowed_to_act_for_people_runs_the_call_as_the_named_person(
    server: RunningServer,
) -> None:
    person = acts_for_metadata("Zoë Ünicode@example.com")
    assert await _whoami(server.port, "web-service-token", person) == "Zoë Ünicode@example.com|web|surface"


async def test_a_token_without_acts_for_naming_a_person_is_permission_denied(server: RunningServer) -> None:
    assert await _refusal(server.port, "tui-surface-token", acts_for_metadata("alice@example.com")) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "tui may not act for people",
    )


async def test_a_person_signed_in_by_jwt_may_not_act_for_another(server: RunningServer, provider: Provider) -> None:
    token = await _id_token(provider, ALICE)
    code, message = await _refusal(server.port, token, acts_for_metadata("bob@example.com"))
    assert (code, message) == (grpc.StatusCode.PERMISSION_DENIED, "alice@example.com may not act for people")


async def test_an_admin_token_without_acts_for_naming_a_person_is_permission_denied(server: RunningServer) -> None:
    assert await _whoami(server.port, "root-admin-token") == "root||admin"
    assert await _refusal(server.port, "root-admin-token", acts_for_metadata("alice@example.com", ["ops"])) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "root may not act for people",
    )


async def test_bearer_tokens_never_reach_the_logs(
    server: RunningServer, provider: Provider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    good = await _id_token(provider, ALICE)
    other = await _id_token(provider, ALICE, audience="some-other-app")
    forged = _forged(provider, "rogue")
    await _whoami(server.port, good)
    await _refusal(server.port, other)
    await _refusal(server.port, forged)
    assert "auth.jwt_refused" in caplog.text
    for token in (good, other, forged):
        for part in token.split("."):
            assert part not in caplog.text


def test_an_http_issuer_off_loopback_and_an_unknown_role_are_configuration_errors() -> None:
    with pytest.raises(ValidationError, match="MAKA_OIDC_ISSUER must be an https:// URL"):
        GrpcServerSettings(oidc_issuer="http://id.example.com")
    with pytest.raises(ValidationError, match="unknown role 'wizard'"):
        GrpcServerSettings(oidc_issuer="https://id.example.com", oidc_roles={"ops": ["wizard"]})
    with pytest.raises(ValidationError, match=r"MAKA_OIDC_ROLES\['ops'\]: a group may not be granted 'admin'"):
        GrpcServerSettings(oidc_issuer="https://id.example.com", oidc_roles={"ops": ["surface", "admin"]})
    assert (
        GrpcServerSettings(oidc_issuer="http://localhost:8080/realms/x").oidc_issuer == "http://localhost:8080/realms/x"
    )


async def test_an_issuer_without_audiences_turns_nothing_on_for_a_service(provider: Provider) -> None:
    running = await start_server(App(), GrpcServerSettings(listen="127.0.0.1:0", oidc_issuer=provider.issuer))
    try:
        assert await _whoami(running.port, "") == "anonymous||admin"
    finally:
        await running.stop()

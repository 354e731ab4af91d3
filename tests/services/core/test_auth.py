"""Access control: bearer tokens by role, session scoping, TLS and mutual TLS (docs/design.md#tokens)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core import metrics
from services.core.auth import Role, TokenFileError, TokenTable, current_principal
from services.core.channels import open_channel
from services.core.reasons import AuthErrorReason
from services.core.serving import RunningServer, start_server
from services.core.settings import ClientTlsSettings, GrpcServerSettings
from services.core.status import error_from_rpc
from tests.helpers.certs import make_certs
from tests.helpers.tokens import write_tokens_file

LIST = "/maka.interaction.v1.InteractionService/ListPending"
ATTACH = "/maka.interaction.v1.InteractionService/Attach"


class EchoPrincipal(interaction_service_pb2_grpc.InteractionServiceServicer):
    """Answers with the caller's principal encoded in interaction ids (test double of the real service)."""

    async def ListPending(
        self,
        request: interaction_service_pb2.ListPendingRequest,
        context: grpc.aio.ServicerContext[
            interaction_service_pb2.ListPendingRequest, interaction_service_pb2.ListPendingResponse
        ],
    ) -> interaction_service_pb2.ListPendingResponse:
        principal = current_principal()
        visible = principal.visible(request.session_ids)
        return interaction_service_pb2.ListPendingResponse(
            pending=[interaction_pb2.Interaction(interaction_id=f"{principal.name}:{s}") for s in visible]
        )

    async def Attach(
        self,
        request_iterator: AsyncIterator[interaction_service_pb2.AttachRequest],
        context: grpc.aio.ServicerContext[
            interaction_service_pb2.AttachRequest, interaction_service_pb2.AttachResponse
        ],
    ) -> AsyncIterator[interaction_service_pb2.AttachResponse]:
        async for request in request_iterator:
            principal = current_principal()
            visible = principal.visible(request.subscribe.session_ids)
            yield interaction_service_pb2.AttachResponse(
                snapshot=interaction_service_pb2.Snapshot(
                    pending=[interaction_pb2.Interaction(interaction_id=f"{principal.name}:{s}") for s in visible]
                )
            )


class App:
    service_names: Sequence[str] = ("maka.interaction.v1.InteractionService",)
    method_roles = {LIST: frozenset({Role.SURFACE}), ATTACH: frozenset({Role.SURFACE})}

    def register(self, server: grpc.aio.Server) -> None:
        interaction_service_pb2_grpc.add_InteractionServiceServicer_to_server(
            EchoPrincipal(),  # type: ignore[abstract]  # only the two methods under test
            server,
        )

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def _tokens(tmp_path: Path) -> Path:
    return write_tokens_file(
        tmp_path / "tokens.json",
        [
            {"name": "tui", "token": "surface-token-1", "roles": ["surface"], "sessions": ["s1"]},
            {"name": "prov", "token": "provider-token-1", "roles": ["provider"]},
        ],
    )


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    running = await start_server(App(), GrpcServerSettings(listen="127.0.0.1:0", auth_tokens_file=_tokens(tmp_path)))
    yield running
    await running.stop()


async def _list(port: int, token: str | None, sessions: list[str]) -> list[str]:
    async with open_channel(f"127.0.0.1:{port}", token=token, tls=ClientTlsSettings()) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        response = await stub.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=sessions))
        return [i.interaction_id for i in response.pending]


async def test_a_call_without_a_token_is_unauthenticated(server: RunningServer) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _list(server.port, None, ["s1"])
    detail = error_from_rpc(caught.value)
    assert detail.code == grpc.StatusCode.UNAUTHENTICATED
    assert detail.reason == AuthErrorReason.UNAUTHENTICATED


async def test_an_unknown_token_is_unauthenticated(server: RunningServer) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _list(server.port, "not-a-real-token", ["s1"])
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_token_without_the_methods_role_is_permission_denied(server: RunningServer) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _list(server.port, "provider-token-1", ["s1"])
    detail = error_from_rpc(caught.value)
    assert detail.code == grpc.StatusCode.PERMISSION_DENIED
    assert detail.reason == AuthErrorReason.PERMISSION_DENIED


async def test_a_surface_token_sees_only_its_sessions(server: RunningServer) -> None:
    assert await _list(server.port, "surface-token-1", ["s1", "s2"]) == ["tui:s1"]


async def test_the_principal_is_bound_inside_a_streaming_handler(server: RunningServer) -> None:
    async with open_channel(f"127.0.0.1:{server.port}", token="surface-token-1", tls=ClientTlsSettings()) as channel:
        stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
        call = stub.Attach()
        await call.write(
            interaction_service_pb2.AttachRequest(subscribe=interaction_service_pb2.Subscribe(session_ids=["s1", "s9"]))
        )
        response = await call.read()
        assert isinstance(response, interaction_service_pb2.AttachResponse)
        assert [i.interaction_id for i in response.snapshot.pending] == ["tui:s1"]
        await call.done_writing()


async def test_health_stays_open_without_a_token(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = await stub.Check(health_pb2.HealthCheckRequest(service=""))  # type: ignore[attr-defined]
    assert response.status == health_pb2.HealthCheckResponse.SERVING


async def test_requests_are_counted_by_method_and_code(server: RunningServer) -> None:
    before = metrics.REGISTRY.get_sample_value("maka_grpc_requests_total", {"method": LIST, "code": "OK"}) or 0.0
    await _list(server.port, "surface-token-1", ["s1"])
    after = metrics.REGISTRY.get_sample_value("maka_grpc_requests_total", {"method": LIST, "code": "OK"})
    assert after == before + 1


async def test_without_a_tokens_file_everyone_is_the_anonymous_admin() -> None:
    running = await start_server(App(), GrpcServerSettings(listen="127.0.0.1:0"))
    try:
        assert await _list(running.port, None, ["s1", "s2"]) == ["anonymous:s1", "anonymous:s2"]
    finally:
        await running.stop()


def test_a_malformed_tokens_file_names_the_entry_but_not_the_token(tmp_path: Path) -> None:
    path = write_tokens_file(tmp_path / "t.json", [{"token": "abcdefgh-secret", "roles": ["wizard"]}])
    with pytest.raises(TokenFileError) as caught:
        TokenTable.from_file(path)
    assert "tokens[0]" in str(caught.value)
    assert "abcdefgh-secret" not in str(caught.value)


async def test_tls_serves_a_client_that_trusts_the_ca(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    settings = GrpcServerSettings(listen="127.0.0.1:0", tls_cert_file=certs.server_cert, tls_key_file=certs.server_key)
    running = await start_server(App(), settings)
    try:
        tls = ClientTlsSettings(tls_ca_file=certs.ca)
        async with open_channel(f"localhost:{running.port}", tls=tls) as channel:
            stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
            response = await stub.ListPending(interaction_service_pb2.ListPendingRequest(session_ids=["s1"]))
        assert [i.interaction_id for i in response.pending] == ["anonymous:s1"]
    finally:
        await running.stop()


async def test_mutual_tls_refuses_a_client_without_a_certificate_and_admits_one_with(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    settings = GrpcServerSettings(
        listen="127.0.0.1:0",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
    )
    running = await start_server(App(), settings)
    request = interaction_service_pb2.ListPendingRequest(session_ids=["s1"])
    try:
        async with open_channel(f"localhost:{running.port}", tls=ClientTlsSettings(tls_ca_file=certs.ca)) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await interaction_service_pb2_grpc.InteractionServiceStub(channel).ListPending(request, timeout=5)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        mtls = ClientTlsSettings(
            tls_ca_file=certs.ca, tls_client_cert_file=certs.client_cert, tls_client_key_file=certs.client_key
        )
        async with open_channel(f"localhost:{running.port}", tls=mtls) as channel:
            response = await interaction_service_pb2_grpc.InteractionServiceStub(channel).ListPending(request)
        assert len(response.pending) == 1
    finally:
        await running.stop()

"""Access control: bearer tokens by role, session scoping, TLS and mutual TLS (docs/design.md#tokens)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from maka.interaction.v1 import interaction_pb2, interaction_service_pb2, interaction_service_pb2_grpc
from services.core import metrics
from services.core.auth import (
    ACTS_FOR_GROUPS_HEADER,
    ACTS_FOR_ISSUER_HEADER,
    Principal,
    Role,
    TokenFileError,
    TokenTable,
    acts_for_metadata,
    authenticate,
    bearer_metadata,
    current_principal,
)
from services.core.channels import open_channel
from services.core.reasons import AuthErrorReason
from services.core.serving import RunningServer, start_server
from services.core.settings import ClientTlsSettings, GrpcServerSettings
from services.core.status import PermissionDenied, error_from_rpc
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


@pytest.mark.skipif(sys.version_info < (3, 12), reason="asyncio.eager_task_factory (Textual uses it) is 3.12+")
async def test_a_token_stream_works_under_an_eager_task_factory_as_textual_sets_it(server: RunningServer) -> None:
    # maka tui: Textual runs its loop with asyncio.eager_task_factory; grpc.aio's intercepted stream-stream
    # call cancelled itself there ("Locally cancelled by application"), so the token is not an interceptor
    loop = asyncio.get_running_loop()
    if sys.version_info >= (3, 12):
        loop.set_task_factory(asyncio.eager_task_factory)
    try:
        async with open_channel(
            f"127.0.0.1:{server.port}", token="surface-token-1", tls=ClientTlsSettings()
        ) as channel:
            stub = interaction_service_pb2_grpc.InteractionServiceStub(channel)
            call = stub.Attach()
            await call.write(
                interaction_service_pb2.AttachRequest(subscribe=interaction_service_pb2.Subscribe(session_ids=["s1"]))
            )
            response = await call.read()
            assert isinstance(response, interaction_service_pb2.AttachResponse)
            assert [i.interaction_id for i in response.snapshot.pending] == ["tui:s1"]
            await call.done_writing()
            assert await call.code() == grpc.StatusCode.OK
    finally:
        loop.set_task_factory(None)


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


def _unit(directory: Path, unit: str, entries: list[dict[str, object]]) -> None:
    (directory / unit).mkdir(parents=True)
    (directory / unit / "tokens.json").write_text(json.dumps({"tokens": entries}))


def test_a_tokens_directory_adds_each_units_tokens_to_the_file_and_skips_hidden_entries(tmp_path: Path) -> None:
    own = tmp_path / "tokens.json"
    own.write_text(json.dumps({"tokens": [{"name": "admin", "token": "admin-token-1", "roles": ["admin"]}]}))
    units = tmp_path / "tokens.d"
    _unit(units, "team-b", [{"name": "b", "token": "team-b-token", "roles": ["broker"], "hosts": ["b-0"]}])
    _unit(units, "team-a", [{"name": "a", "token": "team-a-token", "roles": ["broker"], "hosts": ["a-1", "a-0"]}])
    _unit(units, "..data", [{"name": "hidden", "token": "hidden-token", "roles": ["admin"]}])

    table = TokenTable.from_files(own, units)

    assert [p.name for p in table.principals] == ["admin", "a", "b"]
    assert table.lookup("hidden-token") is None
    assert table.hosts_named(Role.BROKER) == ["a-0", "a-1", "b-0"], "admin's every Host is not a Host list"


def test_a_tokens_directory_with_no_unit_left_refuses_everyone_rather_than_admitting_anonymous(tmp_path: Path) -> None:
    (tmp_path / "tokens.d").mkdir()
    table = TokenTable.from_files(None, tmp_path / "tokens.d")

    assert table.enabled
    assert table.lookup("anything-at-all") is None
    assert not TokenTable.from_files(None, None).enabled


def test_one_token_value_in_two_different_entries_or_a_broken_unit_is_refused_naming_the_entries_never_the_token(
    tmp_path: Path,
) -> None:
    units = tmp_path / "tokens.d"
    _unit(units, "team-a", [{"name": "a-web", "token": "shared-secret-1", "roles": ["surface"]}])
    _unit(units, "team-b", [{"name": "b-web", "token": "shared-secret-1", "roles": ["surface"]}])
    with pytest.raises(TokenFileError) as shared:
        TokenTable.from_files(None, units)
    assert "'a-web' and 'b-web' share one token value" in str(shared.value)
    assert "shared-secret-1" not in str(shared.value)
    moved = {"name": "b-web", "token": "b-web-token-1", "roles": ["surface"], "hosts": ["b-0"]}
    (units / "team-b" / "tokens.json").write_text(json.dumps({"tokens": [moved]}))
    own = tmp_path / "tokens.json"
    own.write_text(json.dumps({"tokens": [moved]}))  # the same entry in the tier's file, while it moves to its unit
    assert [p.name for p in TokenTable.from_files(own, units).principals] == ["b-web", "a-web"]
    (units / "team-b" / "tokens.json").write_text('{"tokens": [{"token": "short"}]}')
    with pytest.raises(TokenFileError, match=r"team-b/tokens.json: tokens\[0\]"):
        TokenTable.from_files(None, units)


PEOPLE_TABLE = TokenTable(
    [
        ("web-token-123", Principal(name="web", roles=frozenset({Role.SURFACE}), acts_for=True)),
        ("tui-token-123", Principal(name="tui", roles=frozenset({Role.SURFACE}))),
    ]
)


def _as(token: str, *metadata: tuple[str, str]) -> Principal:
    return authenticate(PEOPLE_TABLE, LIST, [*bearer_metadata(token), *metadata], {LIST: frozenset({Role.SURFACE})})


def test_a_service_that_acts_for_people_may_state_the_person_s_groups() -> None:
    principal = _as("web-token-123", *acts_for_metadata("bob@example.com", ["release-managers", "a,b c"]))
    assert (principal.name, principal.via, principal.person) == ("bob@example.com", "web", True)
    assert principal.groups == frozenset({"release-managers", "a,b c"})


def test_groups_from_a_token_that_may_not_act_for_people_or_without_a_person_are_refused() -> None:
    groups = (ACTS_FOR_GROUPS_HEADER, "release-managers")
    with pytest.raises(PermissionDenied) as refused:
        _as("tui-token-123", *acts_for_metadata("bob@example.com"), groups)
    assert refused.value.message == "tui may not act for people"
    with pytest.raises(PermissionDenied) as alone:
        _as("web-token-123", groups)
    assert alone.value.message == "x-maka-acts-for-groups needs x-maka-acts-for"
    with pytest.raises(PermissionDenied):
        _as("web-token-123", *acts_for_metadata("bob@example.com"), (ACTS_FOR_GROUPS_HEADER, ",".join(["g"] * 65)))


def test_a_service_that_acts_for_people_may_state_the_person_s_issuer() -> None:
    issuer = "https://id.example.com/realms/a b"
    principal = _as("web-token-123", *acts_for_metadata("bob@example.com", ["ops"], issuer=issuer))
    assert (principal.name, principal.via, principal.issuer, principal.groups) == (
        "bob@example.com",
        "web",
        issuer,
        frozenset({"ops"}),
    )
    assert _as("web-token-123", *acts_for_metadata("bob@example.com")).issuer == ""


def test_an_issuer_from_a_token_that_may_not_act_for_people_or_without_a_person_is_refused() -> None:
    issuer = (ACTS_FOR_ISSUER_HEADER, "https%3A%2F%2Fid.example.com")
    with pytest.raises(PermissionDenied) as refused:
        _as("tui-token-123", *acts_for_metadata("bob@example.com"), issuer)
    assert refused.value.message == "tui may not act for people"
    with pytest.raises(PermissionDenied) as alone:
        _as("web-token-123", issuer)
    assert alone.value.message == "x-maka-acts-for-issuer needs x-maka-acts-for"
    for malformed in ("", "%0A", "i" * 257):
        with pytest.raises(PermissionDenied) as bad:
            _as("web-token-123", *acts_for_metadata("bob@example.com"), (ACTS_FOR_ISSUER_HEADER, malformed))
        assert bad.value.message == "x-maka-acts-for-issuer must name an issuer"


def test_a_machine_token_is_not_a_person() -> None:
    assert not _as("tui-token-123").person
    assert not _as("web-token-123").person

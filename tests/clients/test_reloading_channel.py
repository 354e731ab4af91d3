"""The client's ``ReloadingChannel`` is the runtime's (``services.core.channels``) though the library ships its own
copy: the same code apart from docstrings and the log lines each names. Both log files that are not there once per
change of state, not on every call, and keep their channel meanwhile."""

from __future__ import annotations

import ast
import inspect
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from maka_client import TlsOptions
from maka_client import _channel as client_channel
from services.core import channels as runtime_channel
from services.core.serving import start_server
from services.core.settings import ClientTlsSettings, GrpcServerSettings
from tests.helpers.certs import make_certs

SHARED = ("Stamp", "_stamp", "_MISSING", "_Call", "ReloadingChannel")
"""The names both modules define alike."""


def _without_docstrings(node: ast.AST) -> ast.AST:
    for parent in ast.walk(node):
        body = getattr(parent, "body", None)
        if isinstance(body, list):
            kept = [
                child
                for child in body
                if not (
                    isinstance(child, ast.Expr)
                    and isinstance(child.value, ast.Constant)
                    and isinstance(child.value.value, str)
                )
            ]
            parent.body = kept or [ast.Pass()]  # type: ignore[attr-defined]
    return node


def _shared_code(module: ModuleType) -> dict[str, str]:
    tree = ast.parse(inspect.getsource(module))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            name = node.name
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
        else:
            continue
        if name in SHARED:
            found[name] = ast.dump(_without_docstrings(node))
    return found


def test_the_client_carries_the_runtimes_reloading_channel_code_unchanged() -> None:
    # The library may not import the runtime (an import contract): its copy must not drift from the services' one.
    client, runtime = _shared_code(client_channel), _shared_code(runtime_channel)
    assert sorted(runtime) == sorted(SHARED)
    for name in SHARED:
        assert client.get(name) == runtime[name], f"{name} differs between maka_client._channel and services.core"


class App:
    service_names: Sequence[str] = ("maka.test.Empty",)

    def register(self, server: grpc.aio.Server) -> None:
        return None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def _runtime(target: str, ca: Path) -> grpc.aio.Channel:
    return runtime_channel.open_channel(target, tls=ClientTlsSettings(tls_ca_file=ca))


def _client(target: str, ca: Path) -> grpc.aio.Channel:
    return client_channel.open_channel(target, TlsOptions(ca_file=ca))


@pytest.mark.parametrize(
    ("open_", "logger", "failed"),
    [
        (_runtime, "maka.channels", "tls_client_reload_failed"),
        (_client, "maka_client.channel", "tls_reload_failed: FileNotFoundError"),
    ],
    ids=["runtime", "client"],
)
async def test_a_missing_ca_file_is_logged_once_per_disappearance_and_calls_go_on_meanwhile(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    open_: Callable[[str, Path], grpc.aio.Channel],
    logger: str,
    failed: str,
) -> None:
    certs = make_certs(tmp_path)
    ca = tmp_path / "live-ca.crt"
    shutil.copyfile(certs.ca, ca)
    settings = GrpcServerSettings(listen="127.0.0.1:0", tls_cert_file=certs.server_cert, tls_key_file=certs.server_key)
    running = await start_server(App(), settings)
    channel = open_(f"localhost:{running.port}", ca)
    stub = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest(service="")

    async def check() -> int:
        return int((await stub.Check(request, timeout=5)).status)  # type: ignore[attr-defined]

    def failures() -> int:
        return sum(r.getMessage() == failed for r in caplog.records)

    serving = health_pb2.HealthCheckResponse.SERVING
    try:
        with caplog.at_level(logging.INFO, logger=logger):
            assert await check() == serving
            os.replace(ca, tmp_path / "away.crt")  # the mounted CA gone (a Secret volume mid-swap, a deleted file)
            for _ in range(3):
                assert await check() == serving, "the current channel goes on while the file is missing"
            assert failures() == 1, "one warning while it stays missing, not one per call"
            os.replace(tmp_path / "away.crt", ca)  # back, unchanged
            assert await check() == serving
            assert await check() == serving
            assert failures() == 1
            ca.unlink()  # missing again: a new change of state, logged again
            assert await check() == serving
            assert await check() == serving
            assert failures() == 2
    finally:
        await channel.close()
        await running.stop()

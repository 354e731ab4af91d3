"""Both clients speak mutual TLS to a real service (the Interaction service in-process over real Redis,
serving with a server certificate and a client CA): the Python client with ``TlsOptions``, the
TypeScript client from ``MAKA_TLS_*``; without a client certificate they are refused. Both clients re-read
a renewed CA and client certificate on their next call; the TypeScript client's streams already running keep
their connection, and files caught half written keep the current channel."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from maka_client import MakaError, SurfaceClient, TlsOptions
from services.core.channels import open_channel
from services.core.serving import RunningServer, start_server
from services.core.settings import ClientTlsSettings
from services.interaction.main import build
from services.interaction.settings import Settings as InteractionSettings
from tests.helpers.certs import CertFiles, make_certs
from tests.helpers.clients import serving_interaction, ts_pending
from tests.services.interaction.harness import Link

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".tools" / "bin" / "node22"
TS_ENTRY = ROOT / "clients" / "typescript" / "dist" / "src" / "index.js"

TS_RENEWED = (
    f"import {{ SurfaceClient }} from {json.dumps(str(TS_ENTRY))};"
    'import { createInterface } from "node:readline";'
    'process.on("warning", (w) => console.log(JSON.stringify({ warning: w.code, message: w.message })));'
    "const client = SurfaceClient.fromEnv(process.argv[1]);"
    "const pending = async () => {"
    "  try { return await client.pending([], 5000); } catch (error) { return { code: error.code }; } };"
    "console.log(JSON.stringify({ first: await pending() }));"
    "for await (const step of createInterface({ input: process.stdin })) {"
    "  console.log(JSON.stringify({ [step]: await pending(), again: await pending() })); }"
    "client.close();"
)
"""One SurfaceClient from ``MAKA_TLS_*`` for the whole run: a ``pending()`` at start, then two per line read
on stdin (the step's name), each printed as a JSON line; process warnings printed as they come."""

TS_ATTACHED = (
    f"import {{ SurfaceClient }} from {json.dumps(str(TS_ENTRY))};"
    'import { createInterface } from "node:readline";'
    "const client = SurfaceClient.fromEnv(process.argv[1]);"
    "const steps = createInterface({ input: process.stdin })[Symbol.asyncIterator]();"
    'const attached = client.attach(["s-renew"]);'
    "const next = async () => { const { value } = await attached.next();"
    "  return { kind: value.kind, form: value.form?.interactionId ?? null }; };"
    "console.log(JSON.stringify({ attach: await next() }));"
    "await steps.next();"
    "const pending = await client.pending([], 5000);"
    "console.log(JSON.stringify({ pending, reloads: client.stub.getChannel().reloads }));"
    "console.log(JSON.stringify({ attach: await next() }));"
    "await attached.return(undefined); client.close(); steps.return?.();"
)
"""One SurfaceClient from ``MAKA_TLS_*``: attached to session ``s-renew`` (its snapshot printed), then, after a
line on stdin, a ``pending()`` and the number of channels reloaded, then the attached stream's next event."""


@pytest.fixture
async def tls_service(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[str, CertFiles]]:
    certs = make_certs(tmp_path)
    settings = InteractionSettings(
        redis_url=redis_url,
        host_id="tls-clients",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
        grace_seconds=0.5,
    )
    async with serving_interaction(settings) as running:
        yield f"localhost:{running.port}", certs


async def test_the_python_client_speaks_mutual_tls(tls_service: tuple[str, CertFiles]) -> None:
    target, certs = tls_service
    mutual = TlsOptions(ca_file=certs.ca, client_cert_file=certs.client_cert, client_key_file=certs.client_key)
    async with SurfaceClient(target, tls=mutual) as surface:
        assert await surface.pending() == []
    async with SurfaceClient(target, tls=TlsOptions(ca_file=certs.ca)) as surface:
        with pytest.raises(MakaError) as refused:
            await surface.pending(timeout=5)
    assert refused.value.grpc_status_code is grpc.StatusCode.UNAVAILABLE


async def _ts_pending(target: str, env: dict[str, str]) -> object:
    return await ts_pending(target, {**os.environ, **env})


async def test_the_typescript_client_speaks_mutual_tls_from_the_environment(tls_service: tuple[str, CertFiles]) -> None:
    target, certs = tls_service
    ca = {"MAKA_TLS_CA_FILE": str(certs.ca)}
    mutual = {
        **ca,
        "MAKA_TLS_CLIENT_CERT_FILE": str(certs.client_cert),
        "MAKA_TLS_CLIENT_KEY_FILE": str(certs.client_key),
    }
    assert await _ts_pending(target, mutual) == []
    assert await _ts_pending(target, ca) == {"code": "UNAVAILABLE"}


def _install(source: Path, live: Path) -> None:
    """Replace ``live`` atomically, as a renewal written into a mounted Secret does."""
    staged = live.with_suffix(".new")
    shutil.copyfile(source, staged)
    os.replace(staged, live)


async def _tier(redis_url: str, port: int, certs: CertFiles) -> RunningServer:
    settings = InteractionSettings(
        redis_url=redis_url,
        host_id="tls-clients",
        listen=f"127.0.0.1:{port}",
        tls_cert_file=certs.server_cert,
        tls_key_file=certs.server_key,
        tls_client_ca_file=certs.ca,
        grace_seconds=0.5,
    )
    return await start_server(await build(settings), settings)


async def test_the_python_client_uses_a_renewed_ca_and_client_certificate_without_a_restart(
    tmp_path: Path, redis_url: str
) -> None:
    old, new = make_certs(_made(tmp_path / "a")), make_certs(_made(tmp_path / "b"))
    files = _client_files(_made(tmp_path / "live"), old)
    running = await _tier(redis_url, 0, old)
    port = running.port
    tls = TlsOptions(ca_file=files["ca"], client_cert_file=files["cert"], client_key_file=files["key"])
    try:
        async with SurfaceClient(f"localhost:{port}", tls=tls) as surface:
            assert await surface.pending(timeout=5) == []
            # Renewed from a new CA on both sides: the tier (restarted, trusting only the new CA), the files.
            await running.stop()
            running = await _tier(redis_url, port, new)
            for name, source in {"key": new.client_key, "cert": new.client_cert, "ca": new.ca}.items():
                _install(source, files[name])

            assert await surface.pending(timeout=5) == [], "the same client's next call, on the renewed files"
        async with SurfaceClient(f"localhost:{port}", tls=TlsOptions(ca_file=old.ca)) as stale:
            with pytest.raises(MakaError) as refused:
                await stale.pending(timeout=5)
        assert refused.value.grpc_status_code is grpc.StatusCode.UNAVAILABLE, "the old CA is no longer trusted"
    finally:
        await running.stop()


def _client_files(directory: Path, certs: CertFiles) -> dict[str, Path]:
    """A client's live TLS files ``ca``/``cert``/``key`` in ``directory``, installed from ``certs``."""
    files = {"ca": directory / "ca.crt", "cert": directory / "tls.crt", "key": directory / "tls.key"}
    for name, source in {"ca": certs.ca, "cert": certs.client_cert, "key": certs.client_key}.items():
        _install(source, files[name])
    return files


def _made(directory: Path) -> Path:
    directory.mkdir(parents=True)
    return directory


class _Node:
    """A Node process driven line by line: each ``step`` is written to its stdin, its JSON lines read back."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.warnings: list[dict[str, object]] = []

    @classmethod
    async def start(cls, script: str, target: str, files: dict[str, Path]) -> _Node:
        """Run ``script`` (an ES module) on ``target`` with the client's TLS files ``ca``/``cert``/``key``."""
        env = {
            "MAKA_TLS_CA_FILE": str(files["ca"]),
            "MAKA_TLS_CLIENT_CERT_FILE": str(files["cert"]),
            "MAKA_TLS_CLIENT_KEY_FILE": str(files["key"]),
        }
        process = await asyncio.create_subprocess_exec(
            str(NODE),
            "--input-type=module",
            "-e",
            script,
            target,
            env={**os.environ, **env},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def kill(self) -> None:
        """Kill the process if it still runs (a failed test's cleanup)."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def line(self) -> dict[str, object]:
        assert self.process.stdout is not None
        async with asyncio.timeout(60):
            while True:
                raw = await self.process.stdout.readline()
                assert raw, "the Node client ended early"
                data: dict[str, object] = json.loads(raw)
                if "warning" not in data:
                    return data
                self.warnings.append(data)

    async def step(self, name: str) -> dict[str, object]:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{name}\n".encode())
        await self.process.stdin.drain()
        return await self.line()

    async def end(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        async with asyncio.timeout(60):
            rest, err = await self.process.communicate()
        assert self.process.returncode == 0, err.decode()
        for raw in rest.decode().splitlines():
            self.warnings.append(json.loads(raw))


async def test_the_typescript_client_uses_a_renewed_ca_and_client_certificate_without_a_restart(
    tmp_path: Path, redis_url: str
) -> None:
    old, new = make_certs(_made(tmp_path / "a")), make_certs(_made(tmp_path / "b"))
    files = _client_files(_made(tmp_path / "live"), old)
    running = await _tier(redis_url, 0, old)
    port = running.port
    node = await _Node.start(TS_RENEWED, f"localhost:{port}", files)
    try:
        assert await node.line() == {"first": []}
        # Half renewed: the new certificate beside the old key. The current channel goes on, reported once.
        _install(new.client_cert, files["cert"])
        assert await node.step("half") == {"half": [], "again": []}
        assert [w["warning"] for w in node.warnings] == ["MAKA_TLS_RELOAD_FAILED"]
        assert "KEY_VALUES_MISMATCH" in str(node.warnings[0])
        _install(new.client_key, files["key"])
        files["ca"].write_bytes(b"-----BEGIN CERT")  # and the CA bundle caught half written
        assert await node.step("ca_half") == {"ca_half": [], "again": []}
        assert "ERR_MAKA_TLS_CA_INCOMPLETE" in str(node.warnings[1:])
        # Renewed from a new CA on both sides: the tier (restarted, trusting only the new CA), the files.
        await running.stop()
        running = await _tier(redis_url, port, new)
        _install(new.ca, files["ca"])

        assert await node.step("renewed") == {"renewed": [], "again": []}, "the same client, on the renewed files"
        await node.end()
        assert len(node.warnings) == 2, "one warning per change, not one per call"
        assert await _ts_pending(f"localhost:{port}", {"MAKA_TLS_CA_FILE": str(old.ca)}) == {"code": "UNAVAILABLE"}, (
            "the old CA is no longer trusted"
        )
    finally:
        await node.kill()
        await running.stop()


async def test_a_typescript_stream_running_through_a_renewal_keeps_its_connection_while_new_calls_reload(
    tmp_path: Path, redis_url: str
) -> None:
    old, new = make_certs(_made(tmp_path / "a")), make_certs(_made(tmp_path / "b"))
    server, client = _made(tmp_path / "server"), _made(tmp_path / "client")
    server_cert, server_key, client_ca = server / "tls.crt", server / "tls.key", server / "ca.crt"
    _install(old.server_cert, server_cert)
    _install(old.server_key, server_key)
    client_ca.write_bytes(old.ca.read_bytes() + new.ca.read_bytes())  # the tier trusts both CAs' clients
    files = _client_files(client, old)
    settings = InteractionSettings(
        redis_url=redis_url,
        host_id="tls-clients",
        tls_cert_file=server_cert,
        tls_key_file=server_key,
        tls_client_ca_file=client_ca,
        grace_seconds=0.5,
    )
    running = await start_server(await build(settings), settings)
    node = await _Node.start(TS_ATTACHED, f"localhost:{running.port}", files)
    broker = open_channel(
        f"localhost:{running.port}",
        tls=ClientTlsSettings(
            tls_ca_file=new.ca, tls_client_cert_file=new.client_cert, tls_client_key_file=new.client_key
        ),
    )
    try:
        assert await node.line() == {"attach": {"kind": "snapshot", "form": None}}
        # The tier's certificate renewed from the new CA (it re-reads it at the next handshake), and the client's files.
        _install(new.server_key, server_key)
        _install(new.server_cert, server_cert)
        for name, source in {"key": new.client_key, "cert": new.client_cert, "ca": new.ca}.items():
            _install(source, files[name])

        assert await node.step("renewed") == {"pending": [], "reloads": 1}, "a new call: a new channel"
        link = await Link.connect(broker)
        opened = await link.open("s-renew", "inv-renew")
        assert await node.line() == {"attach": {"kind": "opened", "form": opened.interaction_id}}, (
            "the stream attached before the renewal goes on, not reattached"
        )
        await link.close()
        await node.end()
        assert node.warnings == []
    finally:
        await node.kill()
        await broker.close()
        await running.stop()

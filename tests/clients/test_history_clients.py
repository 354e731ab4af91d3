"""Both clients list the settled forms (``ListHistory``) the same way: the Python ``SurfaceClient.list_history`` and
the TypeScript ``SurfaceClient.listHistory`` (run by Node 22 on the built client) read the same entries from the real
Interaction service over real Redis: ids, Tool, outcome, who answered (``via`` included), paging, never a value; and
the person a call was made for (``made_for``), in the TypeScript client's forms as in both clients' history."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from pathlib import Path
from typing import Any

from maka.interaction.v1 import interaction_pb2
from maka_client import SurfaceClient
from services.core.form import Action, Answer
from surfaces.common.interactions import Interactions
from tests.helpers.oidc import ALICE, id_token, oidc_provider
from tests.surfaces.helpers import deploy_form, interaction_service

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".tools" / "bin" / "node22"
TS_ENTRY = ROOT / "clients" / "typescript" / "dist" / "src" / "index.js"
TS_HISTORY = (
    f"import {{ SurfaceClient }} from {json.dumps(str(TS_ENTRY))};"
    "const [target, host, token, pageSize, pageToken] = process.argv.slice(1);"
    "const client = new SurfaceClient(target, { token, hostId: host });"
    "try { console.log(JSON.stringify(await client.listHistory([], { pageSize: Number(pageSize), pageToken }))); }"
    "catch (error) { console.log(JSON.stringify({ code: error.code })); } finally { client.close(); }"
)
TS_FORMS = (
    f"import {{ SurfaceClient }} from {json.dumps(str(TS_ENTRY))};"
    "const [target, host, token, answer] = process.argv.slice(1);"
    "const client = new SurfaceClient(target, { token, hostId: host });"
    "try {"
    " const pending = await client.pending();"
    " const answered = await client.answer(answer, 'decline');"
    " const history = await client.listHistory();"
    " console.log(JSON.stringify({ pending, answered, history }));"
    "} finally { client.close(); }"
)
"""Alice's view through the TypeScript client: her pending forms, her decline of one, then the history."""
AUDIENCE = "maka-cli"
BROKER_TOKEN = "history-clients-broker"
SURFACE_TOKEN = "history-clients-surface"
WEB_TOKEN = "history-clients-web"


async def _node(script: str, *args: str) -> Any:
    """Run the ES module ``script`` with ``args`` on Node 22 (no ``MAKA_*`` variables); its last JSON line."""
    process = await asyncio.create_subprocess_exec(
        str(NODE),
        "--input-type=module",
        "-e",
        script,
        *args,
        env={k: v for k, v in os.environ.items() if not k.startswith("MAKA_")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


async def _ts_history(target: str, host: str, token: str, page_size: int, page_token: str = "") -> Any:
    return await _node(TS_HISTORY, target, host, token, str(page_size), page_token)


async def test_the_typescript_client_lists_the_history_as_the_python_client_does(
    redis_url: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]},
                    {"token": SURFACE_TOKEN, "name": "ops", "roles": ["surface"]},
                    {"token": WEB_TOKEN, "name": "web-page", "roles": ["surface"], "acts_for": True},
                ]
            }
        )
    )
    host = f"hist-{secrets.token_hex(4)}"
    async with interaction_service(redis_url, broker_token=BROKER_TOKEN, host_id=host, auth_tokens_file=tokens) as live:
        closed = await live.link.open(deploy_form(), session_id="s1")
        await live.link.close(closed.interaction_id, interaction_pb2.CLOSE_REASON_STOPPED)
        answered = await live.link.open(deploy_form(), session_id="s2")
        async with Interactions.connect(live.address, token=WEB_TOKEN, host_id=host, surface_kind="web") as web:
            await web.answer(answered.interaction_id, Answer(Action.DECLINE), acting_for="alice@example.com")
        await live.link.deliver(answered.interaction_id, interaction_pb2.DELIVERY_STATE_DELIVERED)
        async with SurfaceClient(live.address, token=SURFACE_TOKEN, host_id=host) as surface:
            python = await surface.list_history(page_size=1)
            older = await surface.list_history(page_size=1, page_token=python.next_page_token)
        first = await _ts_history(live.address, host, SURFACE_TOKEN, 1)
        second = await _ts_history(live.address, host, SURFACE_TOKEN, 1, first["nextPageToken"])
        refused = await _ts_history(live.address, host, "not-a-token", 1)
    assert refused == {"code": "UNAUTHENTICATED"}
    (newest,) = first["entries"]
    (oldest,) = second["entries"]
    assert (first["nextPageToken"], second["nextPageToken"]) == (python.next_page_token, older.next_page_token)
    assert [newest["interactionId"], oldest["interactionId"]] == [answered.interaction_id, closed.interaction_id]
    assert [newest["interactionId"], oldest["interactionId"]] == [
        python.entries[0].interaction_id,
        older.entries[0].interaction_id,
    ]
    py_new = python.entries[0]
    assert py_new.answered_by is not None
    assert newest["answeredBy"] == {
        "principal": py_new.answered_by.principal,
        "principalKind": py_new.answered_by.principal_kind,
        "surfaceKind": py_new.answered_by.surface_kind,
        "issuer": py_new.answered_by.issuer,
        "via": py_new.answered_by.via,
    }
    assert newest["answeredBy"]["principal"] == "alice@example.com"
    assert newest["answeredBy"]["via"] == "web-page"
    assert (newest["state"], newest["action"], newest["delivery"], newest["toolName"]) == (
        "answered",
        "decline",
        "delivered",
        "deployer:deploy",
    )
    assert (newest["hostId"], newest["sessionId"], newest["provider"]) == (host, "s2", py_new.provider)
    assert (oldest["state"], oldest["action"], oldest["closeReason"], oldest["answeredBy"]) == (
        "closed",
        None,
        "stopped",
        None,
    )
    assert newest["settledAt"].endswith("Z")


async def test_both_clients_name_the_person_a_call_was_made_for_in_forms_and_history(
    redis_url: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"token": BROKER_TOKEN, "name": "broker", "roles": ["broker"]}]}))
    host = f"made-for-{secrets.token_hex(4)}"
    with oidc_provider([ALICE]) as provider:
        alice_token = id_token(provider, ALICE, AUDIENCE)
        async with interaction_service(
            redis_url,
            broker_token=BROKER_TOKEN,
            host_id=host,
            auth_tokens_file=tokens,
            oidc_issuer=provider.issuer,
            oidc_audiences=[AUDIENCE],
            oidc_roles={"approvers": ["surface"]},
        ) as live:
            alice = interaction_pb2.Person(principal=ALICE.email, issuer=provider.issuer)
            hers = await live.link.open(deploy_form("For alice?"), session_id="s-made", made_for=alice)
            machine = await live.link.open(deploy_form("For nobody?"), session_id="s-made")
            seen = await _node(TS_FORMS, live.address, host, alice_token, hers.interaction_id)
            async with SurfaceClient(live.address, token=alice_token, host_id=host) as surface:
                python = await surface.list_history()
                python_forms = {f.interaction_id: f.made_for for f in await surface.pending()}
                python_forms[hers.interaction_id] = (await surface.get(hers.interaction_id)).made_for
    pending = {form["interactionId"]: form["madeFor"] for form in seen["pending"]}
    assert pending == {hers.interaction_id: ALICE.email, machine.interaction_id: ""}
    assert (seen["answered"]["interactionId"], seen["answered"]["madeFor"]) == (hers.interaction_id, ALICE.email)
    assert [(e["interactionId"], e["madeFor"]) for e in seen["history"]["entries"]] == [
        (hers.interaction_id, ALICE.email)
    ]
    assert [(e.interaction_id, e.made_for) for e in python.entries] == [(hers.interaction_id, ALICE.email)]
    assert python_forms == pending, "the Python client's forms name the same person"
    assert seen["history"]["entries"][0]["answeredBy"]["principal"] == ALICE.email

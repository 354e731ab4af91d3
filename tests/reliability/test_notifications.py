"""Form notifications through real processes (docs/operations.md#notifications): the stack as ``maka up`` runs it
(embedded Redis, Interaction service, broker, MCP provider with the counting server, web surface) notifies a real
webhook receiver once per form opened with a link that opens the form on the running web page; a dead Slack
receiver (its URL's secret path in a targets file) shows in ``maka status`` by scheme and host only; the form
value, the ``requestState`` canary and the Slack URL's secret reach no notification, log or status output."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

import httpx
import pytest

from stack.ports import free_port
from stack.state_dir import notify_status_path
from tests.helpers.cli import maka
from tests.helpers.stack import running_stack
from tests.helpers.waiting import eventually
from tests.helpers.webhook import Receiver
from tests.reliability.harness import ToolCall, answer, calls, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

SECRET = "/services/T000/B000/slack-secret-canary"


async def test_each_form_opened_notifies_once_with_a_working_link_and_a_dead_receiver_shows_in_maka_status(
    tmp_path: Path,
) -> None:
    config, call_log = write_config(tmp_path / "mcp")
    state = tmp_path / "state"
    dead = free_port()  # nothing listens there
    targets = tmp_path / "notify-targets"
    targets.write_text(f"# the team's channel\nslack http://127.0.0.1:{dead}{SECRET}\n")
    form_canary = f"fv-canary-{secrets.token_hex(6)}"
    tag = f"nudge-{secrets.token_hex(4)}"
    outputs: list[str] = []
    with Receiver() as receiver:
        env = {
            "MAKA_NOTIFY_WEBHOOK_URLS": receiver.url("/hook"),
            "MAKA_NOTIFY_TARGETS_FILE": str(targets),
            "MAKA_NOTIFY_ATTEMPTS": "2",
        }
        async with running_stack(tmp_path, config=config, web=True, echo=False, extra_env=env) as running:
            web = running.endpoints.web
            async with ToolCall(
                running.endpoints.broker, "counter:ask", {"tag": tag, "mint": True}, session="ops"
            ) as call:
                interaction_id = await call.awaiting()
                (body,) = await eventually(lambda: receiver.bodies("/hook") or None, timeout=30, what="a notification")
                assert body["event"] == "form_opened"
                assert body["interactionId"] == interaction_id
                assert body["tool"] == "counter:ask"
                assert body["host"] == running.endpoints.host_id
                assert body["session"] == "ops"
                # The link opens the form on the running web page: the page, and the form it names.
                page_url, _, fragment = body["link"].partition("#")
                assert fragment == f"/interaction/{interaction_id}"
                assert page_url.rstrip("/") == web
                async with httpx.AsyncClient(timeout=10) as http:
                    page = await http.get(page_url)
                    assert page.status_code == 200
                    assert 'id="forms"' in page.text
                    linked = await http.get(f"{web}/api/interactions/{interaction_id}", params={"session_id": "ops"})
                    assert linked.status_code == 200
                    assert linked.json()["interaction"]["id"] == interaction_id

                async def failing() -> tuple[int, dict[str, dict[str, object]]] | None:
                    ran = await maka("status", "--json", state_dir=state)
                    outputs.append(ran.out + ran.err)
                    notify = json.loads(ran.out)["notifications"] if ran.out else None
                    by_kind = {t["kind"]: t for t in notify["targets"]} if notify else {}
                    return (ran.code, by_kind) if by_kind.get("slack", {}).get("failingSince") else None

                code, by_kind = await eventually(failing, timeout=30, interval=0.2, what="the dead receiver failing")
                assert code == 1  # degraded: a notification target is failing
                assert by_kind["slack"]["target"] == f"http://127.0.0.1:{dead}/..."
                assert by_kind["slack"]["lastError"] == "ConnectError"
                assert by_kind["webhook"]["sent"] == 1
                assert by_kind["webhook"]["failingSince"] is None
                human = await maka("status", state_dir=state)
                outputs.append(human.out)
                assert re.search(
                    r"^notifications: 1 sent, \d failed, 0 dropped, 1 of 2 target\(s\) failing$", human.out, re.M
                )
                assert re.search(
                    rf"^  failing since .+ UTC.*: slack http://127\.0\.0\.1:{dead}/\.\.\. ConnectError$",
                    human.out,
                    re.M,
                ), human.out

                await answer(running.endpoints.interaction, interaction_id, form_canary)
                assert (await call.terminal()).WhichOneof("event") == "result"
            assert len(receiver.bodies("/hook")) == 1  # one form opened, one notification
            (minted,) = [c["minted"] for c in calls(call_log) if c["tag"] == tag and "minted" in c]
            logs = running.all_logs()
            status_file = notify_status_path(state).read_text()
    assert str(minted).startswith("rs-canary-")
    everything = "\n".join([receiver.raw().decode(), logs, status_file, *outputs])
    assert interaction_id in logs  # the search below reads the real logs
    for canary in (form_canary, str(minted), "slack-secret-canary"):
        assert canary not in everything, canary

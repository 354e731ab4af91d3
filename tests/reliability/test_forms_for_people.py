"""Forms reach the right person through real processes (docs/security.md "Who sees a form"): a stack with a tokens
file, an OpenID issuer (a real provider, ``oidc-provider-mock``) and an approver policy file. alice calls
``counter:ask`` with her own ID token, so the broker makes the call for her; ``maka pending`` / ``maka answer`` /
``maka history`` with each person's token show her form to alice and to bob (group release-managers, the policy's
approvers), never to carol, whose ``maka answer`` of its id fails exactly like an unknown id. A machine caller's
form keeps the session rules. alice's token reaches neither Redis, the services' logs nor the history."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.helpers.cli import maka_on_tier
from tests.helpers.oidc import Person, Provider, id_token, oidc_provider
from tests.helpers.stack import RunningStack
from tests.reliability.harness import ToolCall, redis_dump, reliability_stack, tools_ready

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.asyncio(loop_scope="module")]

AUDIENCE = "maka-cli"
ALICE = Person("alice", "alice@example.com", ("staff",))
BOB = Person("bob", "bob@example.com", ("staff", "release-managers"))
CAROL = Person("carol", "carol@example.com", ("staff",))
TOKENS = {
    "broker": ("broker-secret-1", ["broker"]),
    "provider": ("provider-secret-1", ["provider"]),
    "caller": ("caller-secret-1", ["caller"]),
}
BROKER, PROVIDER, CALLER = (TOKENS[name][0] for name in TOKENS)
POLICY = {"policies": [{"server": "counter", "tool": "ask", "approvers": {"groups": ["release-managers"]}}]}


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider([ALICE, BOB, CAROL]) as running:
        yield running


@pytest.fixture(scope="module")
def people(provider: Provider) -> dict[str, str]:
    return {person.sub: id_token(provider, person, AUDIENCE) for person in (ALICE, BOB, CAROL)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, provider: Provider) -> AsyncIterator[RunningStack]:
    directory = tmp_path_factory.mktemp("people")
    tokens = directory / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": n, "token": t, "roles": r} for n, (t, r) in TOKENS.items()]}))
    policies = directory / "policies.json"
    policies.write_text(json.dumps(POLICY))
    env = {
        "MAKA_AUTH_TOKENS_FILE": str(tokens),
        "MAKA_OIDC_ISSUER": provider.issuer,
        "MAKA_OIDC_AUDIENCES": json.dumps([AUDIENCE]),
        "MAKA_OIDC_ROLES": json.dumps({"staff": ["caller", "surface"]}),
        "MAKA_APPROVER_POLICIES_FILE": str(policies),
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MAKA_CALLER_TOKEN", CALLER)  # the supervisor's ListTools readiness check is a caller
        async with reliability_stack(
            directory,
            env=env,
            child_env={"broker": {"MAKA_INTERACTION_TOKEN": BROKER}, "provider": {"MAKA_BROKER_TOKEN": PROVIDER}},
        ) as (running, _log):
            await tools_ready(running, token=CALLER)
            yield running


async def _pending_ids(interaction: str, token: str) -> set[str]:
    code, out, err = await maka_on_tier(interaction, token, "pending", "--json")
    assert code == 0, err
    return {form["id"] for form in json.loads(out)}


async def test_a_person_s_form_reaches_that_person_and_the_approvers_through_the_cli_and_nobody_else(
    stack: RunningStack, people: dict[str, str]
) -> None:
    interaction, broker = stack.endpoints.interaction, stack.endpoints.broker
    async with (
        ToolCall(broker, "counter:ask", {"tag": "alice"}, turn="t-alice", token=people["alice"]) as alices,
        ToolCall(broker, "counter:ask", {"tag": "machine"}, turn="t-machine", token=CALLER) as machines,
    ):
        hers, machine = await alices.awaiting(), await machines.awaiting()
        assert await _pending_ids(interaction, people["alice"]) == {hers, machine}
        assert await _pending_ids(interaction, people["bob"]) == {hers, machine}
        assert await _pending_ids(interaction, people["carol"]) == {machine}

        unknown = "ix_" + "A" * 22
        hidden = await maka_on_tier(interaction, people["carol"], "answer", hers, "decline")
        missing = await maka_on_tier(interaction, people["carol"], "answer", unknown, "decline")
        assert hidden[0] == missing[0] != 0
        assert hidden[2].replace(hers, unknown) == missing[2]
        assert (await maka_on_tier(interaction, people["carol"], "pending", "--id", hers))[0] == missing[0]

        code, out, err = await maka_on_tier(
            interaction, people["bob"], "answer", hers, "accept", "--values", '{"value": "ship-it"}', "--json"
        )
        assert code == 0, err
        assert (json.loads(out)["id"], json.loads(out)["state"]) == (hers, "answered")
        terminal = await alices.terminal()
        assert terminal.WhichOneof("event") == "result"

        code, out, err = await maka_on_tier(interaction, people["carol"], "answer", machine, "decline")
        assert code == 0, err

    histories = {}
    for name in ("alice", "bob", "carol"):
        code, out, err = await maka_on_tier(interaction, people[name], "history", "--json")
        assert code == 0, err
        histories[name] = {
            entry["id"]: (entry["made_for"], entry["answered_by"]["principal"]) for entry in json.loads(out)
        }
    mine = {hers: (ALICE.email, BOB.email), machine: (None, CAROL.email)}
    assert histories == {"alice": mine, "bob": mine, "carol": {machine: (None, CAROL.email)}}
    assert "ship-it" not in json.dumps(histories)

    stored = await redis_dump(stack.endpoints.redis_url)
    assert ALICE.email.encode() in stored  # the records name her: the canary search reads the right bytes
    signature = people["alice"].rsplit(".", 1)[-1]
    assert signature.encode() not in stored
    assert signature not in stack.all_logs()
    assert people["alice"] not in json.dumps(histories)

"""Unit tests of the broker's one rule of who sees and who acts on a call (`services/broker/access.py`); the same
rule through real processes, route by route, is `tests/reliability/test_calls_for_people.py`."""

from __future__ import annotations

import pytest

from maka.interaction.v1 import interaction_pb2
from services.broker.access import made_for, may_act_on, sees_call
from services.broker.call_log import CallLog
from services.broker.invocation import Invocation
from services.core.auth import ANONYMOUS, Principal, Role

ISSUER = "https://id.example.com"
ALICE = Principal(name="alice@example.com", roles=frozenset({Role.CALLER}), issuer=ISSUER)
CAROL = Principal(name="carol@example.com", roles=frozenset({Role.CALLER}), issuer=ISSUER)
ALICE_ELSEWHERE = Principal(name="alice@example.com", roles=frozenset({Role.CALLER}), issuer="https://other.example")
ALICE_VIA_WEB = Principal(name="alice@example.com", roles=frozenset({Role.CALLER}), via="web")
CAROL_VIA_ADMIN_WEB = Principal(name="carol@example.com", roles=frozenset({Role.ADMIN}), via="owner")
MACHINE = Principal(name="agent", roles=frozenset({Role.CALLER}))
ADMIN = Principal(name="owner", roles=frozenset({Role.ADMIN}))
SCOPED = Principal(name="ci", roles=frozenset({Role.CALLER}), sessions=frozenset({"ci"}))


def _call(made: Principal | None, session: str = "default") -> Invocation:
    return Invocation(
        invocation_id="inv_1",
        session_id=session,
        turn_id="t1",
        tool_use_id="u1",
        qualified_name="examples:deploy",
        arguments_json="{}",
        registration=None,
        log=CallLog(16),
        made_for=made_for(made) if made is not None else None,
    )


def test_a_call_is_made_for_the_person_its_caller_authenticated_as_and_for_nobody_when_a_machine_called() -> None:
    web = Principal(name="web", roles=frozenset({Role.CALLER}), acts_for=True)
    assert made_for(web) is None
    assert made_for(ANONYMOUS) is None
    assert made_for(ALICE) == interaction_pb2.Person(principal="alice@example.com", issuer=ISSUER)
    acted = Principal(name="bob@example.com", roles=frozenset({Role.CALLER}), via="web")
    assert made_for(acted) == interaction_pb2.Person(principal="bob@example.com", via="web")


@pytest.mark.parametrize(
    ("principal", "call", "sees", "acts"),
    [
        (ALICE, _call(ALICE), True, True),
        (ALICE_VIA_WEB, _call(ALICE), True, True),  # the same person through the web page
        (CAROL, _call(ALICE), False, False),
        (ALICE_ELSEWHERE, _call(ALICE), False, False),  # the same email at another issuer is someone else
        (CAROL_VIA_ADMIN_WEB, _call(ALICE), False, False),  # a service's admin token lends a person nothing
        (CAROL, _call(None), True, False),  # a machine caller's call: listed, not carol's to stop
        (MACHINE, _call(ALICE), True, True),  # a token acts on the calls of its sessions
        (ADMIN, _call(ALICE), True, True),
        (ANONYMOUS, _call(ALICE), True, True),
        (SCOPED, _call(None), False, False),  # another session than the token's
        (SCOPED, _call(None, "ci"), True, True),
    ],
    ids=[
        "own",
        "own-via-web",
        "another-person",
        "same-email-other-issuer",
        "person-via-admin-token",
        "person-on-machine-call",
        "machine-token",
        "admin-token",
        "no-authentication",
        "scoped-token-elsewhere",
        "scoped-token-own-session",
    ],
)
def test_a_principal_acts_only_on_calls_it_sees_and_a_person_only_on_calls_made_for_them(
    principal: Principal, call: Invocation, sees: bool, acts: bool
) -> None:
    assert sees_call(principal, call) is sees
    assert may_act_on(principal, call) is acts

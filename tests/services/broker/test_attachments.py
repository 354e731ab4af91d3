"""Unit tests of caller attachments (`services/broker/attachments.py`): the reattach grace and retention."""

from __future__ import annotations

from collections import Counter

from maka.broker.v1 import broker_pb2
from services.broker.attachments import CallerAttachments
from services.broker.call_log import CallLog
from services.broker.invocation import Invocation, InvocationState
from services.broker.model import Notifier, ProviderStream, Registration
from tests.helpers.waiting import eventually


def _invocation(name: str = "inv_1", call_id: str = "") -> Invocation:
    stream = ProviderStream(connection_id="conn_1", outbox=Notifier(4))
    registration = Registration("reg_1", "mcp:examples", "Examples", stream, tools={})
    invocation = Invocation(
        invocation_id=name,
        session_id="s1",
        turn_id="t1",
        tool_use_id=name,
        qualified_name="examples:deploy",
        arguments_json="{}",
        registration=registration,
        log=CallLog(16),
        owner="caller",
        call_id=call_id,
    )
    invocation.log.append(broker_pb2.CallToolResponse(accepted=broker_pb2.CallAccepted(invocation_id=name)))
    return invocation


def _attachments(grace: float, abandoned: list[Invocation], retained_limit: int = 8) -> CallerAttachments:
    return CallerAttachments(
        keepalive_seconds=3600,
        grace_seconds=grace,
        retained_limit=retained_limit,
        counters=Counter(),
        on_abandoned=abandoned.append,
    )


def _in_grace(invocation: Invocation) -> bool:
    return invocation.grace is not None


def _settle(invocation: Invocation) -> None:
    invocation.end_as(InvocationState.STOPPED)
    invocation.log.append(broker_pb2.CallToolResponse(stopped=broker_pb2.CallStopped()), terminal=True)


async def test_the_last_caller_leaving_without_a_grace_abandons_the_invocation_at_once() -> None:
    abandoned: list[Invocation] = []
    counters: Counter[str] = Counter()
    attachments = CallerAttachments(
        keepalive_seconds=3600, grace_seconds=0, retained_limit=8, counters=counters, on_abandoned=abandoned.append
    )
    invocation = _invocation()
    stream = attachments.follow(invocation)
    first = await anext(stream)
    assert first.HasField("accepted")
    assert invocation.watchers == 1
    await stream.aclose()
    assert invocation.watchers == 0
    assert abandoned == [invocation]
    assert counters == Counter({"callers_detached": 1, "detached_stops": 1})


async def test_a_caller_that_reattaches_within_the_grace_keeps_the_invocation_running() -> None:
    abandoned: list[Invocation] = []
    attachments = _attachments(0.05, abandoned)
    invocation, witness = _invocation("inv_1"), _invocation("inv_witness")
    gone = attachments.follow(invocation)
    await anext(gone)
    await gone.aclose()
    assert _in_grace(invocation)
    back = attachments.follow(invocation)
    await anext(back)
    assert not _in_grace(invocation)
    witness_stream = attachments.follow(witness)  # its grace ends after the first one's would have
    await anext(witness_stream)
    await witness_stream.aclose()
    await eventually(lambda: bool(abandoned), what="the witness abandoned")
    assert abandoned == [witness]
    await back.aclose()


async def test_a_settled_invocation_stays_reattachable_with_its_call_id_until_the_grace_ends() -> None:
    attachments = _attachments(0.05, [])
    invocation = _invocation(call_id="call-1")
    attachments.remember_call_id(invocation)
    assert attachments.by_call_id("caller", "s1", "call-1") is invocation
    assert attachments.by_call_id("someone-else", "s1", "call-1") is None
    assert attachments.by_call_id("caller", "s1", "") is None
    _settle(invocation)
    attachments.retain(invocation)
    assert attachments.retained("inv_1") is invocation

    def forgotten() -> bool:
        attachments.prune()
        return attachments.retained("inv_1") is None

    await eventually(forgotten, what="the retention ended")
    assert attachments.by_call_id("caller", "s1", "call-1") is None


async def test_retention_keeps_only_the_newest_settled_invocations_and_without_a_grace_none() -> None:
    attachments = _attachments(60, [], retained_limit=1)
    old, new = _invocation("inv_old", "call-old"), _invocation("inv_new", "call-new")
    for invocation in (old, new):
        attachments.remember_call_id(invocation)
        _settle(invocation)
        attachments.retain(invocation)
    assert attachments.retained("inv_old") is None
    assert attachments.by_call_id("caller", "s1", "call-old") is None
    assert attachments.retained("inv_new") is new

    no_grace = _attachments(0, [])
    settled = _invocation("inv_settled", "call-1")
    no_grace.remember_call_id(settled)
    _settle(settled)
    no_grace.retain(settled)
    assert no_grace.retained("inv_settled") is None
    assert no_grace.by_call_id("caller", "s1", "call-1") is None

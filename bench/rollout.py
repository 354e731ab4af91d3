"""The ``rollout`` phase of ``make scale``: planned operations lose no pending approval and
refuse no caller.

A pool of every Host of the topology takes the calls. First at least ``initial_forms`` forms are pending
(calls through the pool); new calls keep arriving every ``arrival_interval_s`` throughout, each answered
too. Each form's person answers after a delay drawn (seeded) from ``answer_delay_s`` after the form
opened (an answer due before the rollout began waits for it: the forms pending at the start stay pending
until the first SIGTERM) — so many answers come after their Host got SIGTERM. Then, as Kubernetes would:

- **rolling update**: every Host, one after another, highest ordinal first (``kubectl rollout restart``
  of the StatefulSet): SIGTERM broker and provider together, wait until both exited (drained: the Host
  exits once its last call settled), start the same Host id again, wait until it serves;
- **node drain**: two Hosts SIGTERMed at once, each started again after its exit;
- **scale-in**: the highest Host SIGTERMed and not started again; the pool goes on without it.

New calls go through one :class:`maka_client.BrokerClient` on the pool target (every Host's address):
``round_robin`` with client-side health checking sends them only to Hosts whose new-calls health is SERVING
(a provider registered, not draining), a start refused ``HOST_UNAVAILABLE`` in the race before health
reaches the client is retried on another Host with the same call id, and every reattach goes to the Host
that owns the call, also while it drains. Every answer must reach exactly its own call
(:attr:`bench.scale_driver.Call.delivered_right`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from bench.scale_driver import Call, Driver, wait_tools
from bench.topology import Topology
from maka_client import (
    Accepted,
    AwaitingInteraction,
    BrokerClient,
    Failure,
    InteractionSettled,
    Lost,
    MakaError,
    ReattachPolicy,
    Result,
    Stopped,
)

PHASE = "rollout"
POOL_REATTACH = ReattachPolicy(give_up_after=60.0)
"""How long a start waits for a Host that takes new calls, and a dropped stream for its owner (a node drain
leaves one Host of three; a Host restarting needs its provider registered)."""
CALL_SLACK = 300.0
"""How long a call may take beyond its person's answer delay (queueing behind the rollout, its provider leg)."""


@dataclass(frozen=True)
class RolloutPlan:
    """How many forms are pending at the start, how often a new call arrives, how long people take."""

    initial_forms: int
    arrival_interval_s: float
    answer_delay_s: tuple[float, float]
    seed: int = 26


FULL = RolloutPlan(initial_forms=66, arrival_interval_s=5.0, answer_delay_s=(20.0, 240.0))
SMALL = RolloutPlan(initial_forms=6, arrival_interval_s=2.0, answer_delay_s=(1.0, 6.0))


@dataclass
class PoolCall(Call):
    """A call through the pool: ``host`` is the Host that accepted it (``pool`` until then)."""

    call_id: str = ""
    answer_delay: float = 0.0
    started_at: float = 0.0
    opened_at: float = 0.0
    settled: str = ""
    retries: int = 0
    refused: bool = False


@dataclass
class Sigterm:
    """One SIGTERM of a Host: when, which of its forms were pending, when both its processes had exited."""

    host: str
    operation: str
    at: float
    pending: list[str]
    exited_at: float = 0.0
    restarted_at: float = 0.0


def pool_target(addresses: list[str]) -> str:
    """The pool as one gRPC target: every Host's ``host:port`` (``ipv4:`` lists several)."""
    return "ipv4:" + ",".join(addresses)


async def pool_call_events(client: BrokerClient, call: PoolCall) -> AsyncGenerator[object, None]:
    """The events of ``call`` placed on the pool by ``client`` (its owner once accepted; how many starts a
    draining Host refused before one took it)."""
    tool_call = client.call_tool(
        "examples:deploy",
        {"artifact": call.artifact},
        session_id=call.session,
        turn_id="turn-1",
        tool_use_id=call.tool_use_id,
        call_id=call.call_id,
    )
    try:
        async for event in tool_call:
            if isinstance(event, Accepted):
                call.host = tool_call.host_id
            yield event
    except MakaError:
        call.refused = not tool_call.host_id  # no Host took the start within give_up_after
        raise
    finally:
        call.retries = tool_call.refused_starts


class Rollout:
    """Runs the phase on a started topology and reports it (:meth:`run`)."""

    def __init__(
        self, topology: Topology, driver: Driver, plan: RolloutPlan, say: Callable[[str], None] = lambda _: None
    ) -> None:
        self.say = say
        """Progress lines (the run's log sink)."""
        self.topology = topology
        self.driver = driver
        self.plan = plan
        self.target = pool_target([topology.broker(h) for h in topology.spec.host_ids()])
        self.client: BrokerClient | None = None
        self.rng = random.Random(plan.seed)
        self.calls: list[PoolCall] = []
        self.sigterms: list[Sigterm] = []
        self.began = 0.0
        """When the first SIGTERM was sent (answers of earlier forms count their delay from it)."""
        self.operations_ended = 0.0
        self.pending_at_start = 0
        self.changed = asyncio.Event()
        self._began = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # --- callers and people ----------------------------------------------------------------------

    def start_call(self) -> None:
        call = PoolCall(host="pool", phase=PHASE, index=len(self.calls))
        call.call_id = f"cid-{call.artifact}"
        call.answer_delay = self.rng.uniform(*self.plan.answer_delay_s)
        call.started_at = time.monotonic()
        self.calls.append(call)
        self._tasks.append(asyncio.create_task(self._follow(call)))

    async def _follow(self, call: PoolCall) -> None:
        try:
            async with asyncio.timeout(self.plan.answer_delay_s[1] + CALL_SLACK):
                assert self.client is not None, "run() opens the pool client"
                async with contextlib.aclosing(pool_call_events(self.client, call)) as events:
                    async for event in events:
                        self._record(call, event)
        except MakaError as error:
            call.outcome = f"rpc_{error.code.lower()}"
        except TimeoutError:
            call.outcome = "timed_out"

    def _record(self, call: PoolCall, event: object) -> None:
        if isinstance(event, AwaitingInteraction):
            call.interaction_id, call.opened_at = event.interaction_id, time.monotonic()
            self._tasks.append(asyncio.create_task(self._answer_later(call)))
            self.changed.set()
        elif isinstance(event, InteractionSettled):
            call.settled = event.close_reason or (event.action.value if event.action else "")
        elif isinstance(event, Result):
            call.text, call.outcome = event.text, "completed"
        elif isinstance(event, Failure):
            call.outcome = f"failure_{event.code}"
        elif isinstance(event, Lost | Stopped):
            call.outcome = type(event).__name__.lower()
        elif isinstance(event, Accepted):
            call.invocation_id = event.invocation_id

    async def _answer_later(self, call: PoolCall) -> None:
        await self._began.wait()
        due = max(call.opened_at + call.answer_delay, self.began)  # its delay, not before the start
        await asyncio.sleep(max(0.0, due - time.monotonic()))  # the person's think time, not synchronisation
        await self.driver.answer_light(call)
        if not call.answered_at:
            self.say(f"{call.artifact} was not answered: {self.driver.answer_failures[-1:]}")

    def pending(self, host: str = "") -> list[PoolCall]:
        """Calls whose form is open and not answered yet (of ``host`` when given)."""
        return [
            c
            for c in self.calls
            if c.interaction_id and not c.answered_at and not c.outcome and (not host or c.host == host)
        ]

    async def _wait_pending(self, count: int) -> None:
        async with asyncio.timeout(120):
            while len(self.pending()) < count:
                await self.changed.wait()
                self.changed.clear()

    async def _arrivals(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.start_call()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.plan.arrival_interval_s)  # the arrival rate

    # --- operations ------------------------------------------------------------------------------

    async def _wait_hosts_pending(self, *hosts: str) -> None:
        """Until each of ``hosts`` has a form pending at once (a Host just started again has none yet; new
        calls bring them)."""
        async with asyncio.timeout(120):
            while not all(self.pending(host) for host in hosts):
                await self.changed.wait()
                self.changed.clear()

    async def _sigterm(self, host: str, operation: str) -> Sigterm:
        """SIGTERM ``host``'s broker and provider together; returns once both exited (out of the rotation
        from then on). While it drains, new calls that reach it are refused and move on."""
        sigterm = Sigterm(host, operation, time.monotonic(), [c.artifact for c in self.pending(host)])
        self.say(f"{operation}: SIGTERM {host} with {len(sigterm.pending)} forms pending")
        self.sigterms.append(sigterm)
        if not self.began:
            self.began = sigterm.at
            self.pending_at_start = len(self.pending())
            self._began.set()
        await self.topology.stop_host(host)
        sigterm.exited_at = time.monotonic()
        self.say(f"{operation}: {host} exited after {sigterm.exited_at - sigterm.at:.1f} s")
        return sigterm

    async def _roll(self, host: str, operation: str) -> None:
        sigterm = await self._sigterm(host, operation)
        await self.topology.start_host(host)
        await wait_tools(self.topology, [host])
        sigterm.restarted_at = time.monotonic()
        self.say(f"{operation}: {host} serves again")

    async def _operations(self) -> None:
        hosts = self.topology.spec.host_ids()
        # Each operation begins once every Host it stops has a form pending (one just started again has
        # none until new calls reach it).
        for host in reversed(hosts):  # kubectl rollout restart: one Host at a time, highest ordinal first
            await self._wait_hosts_pending(host)
            await self._roll(host, "rolling_update")
        node = hosts[:2]  # a node drain: two Hosts of one node at once
        await self._wait_hosts_pending(*node)
        await asyncio.gather(*(self._roll(host, "node_drain") for host in node))
        await self._wait_hosts_pending(hosts[-1])
        await self._sigterm(hosts[-1], "scale_in")  # StatefulSet scale-in: the highest ordinal, for good

    async def run(self) -> None:
        """The whole phase; returns once every call settled (each bounded)."""
        async with BrokerClient(self.target, reattach=POOL_REATTACH) as self.client:
            await self._run()

    async def _run(self) -> None:
        for _ in range(self.plan.initial_forms):
            self.start_call()
        await self._wait_pending(self.plan.initial_forms)
        self.say(f"{len(self.pending())} forms pending")
        stop = asyncio.Event()
        arrivals = asyncio.create_task(self._arrivals(stop))
        try:
            await self._operations()
        finally:
            self.operations_ended = time.monotonic()
            stop.set()
            await arrivals
            self._began.set()
            self.say(f"operations done; waiting for {sum(not c.outcome for c in self.calls)} calls")
            while self._tasks:  # answer tasks are added while calls run
                done = list(self._tasks)
                self._tasks.clear()
                await asyncio.gather(*done, return_exceptions=True)


# --- the report ---------------------------------------------------------------------------------


def _answered_after(rollout: Rollout) -> list[float]:
    """For each answer given after its own Host got SIGTERM (while it drained): seconds since the SIGTERM."""
    delays: list[float] = []
    for call in rollout.calls:
        if not call.answered_at:
            continue
        for sigterm in rollout.sigterms:
            if sigterm.host == call.host and call.artifact in sigterm.pending and call.answered_at > sigterm.at:
                delays.append(call.answered_at - sigterm.at)
    return delays


def report(rollout: Rollout, sigkill: dict[str, object] | None) -> dict[str, object]:
    """The ``rollout`` object of ``scale.json``."""
    calls = rollout.calls
    accepted = [c for c in calls if not c.refused]
    after = _answered_after(rollout)
    lost = [c for c in accepted if c.outcome != "completed"]
    entry: dict[str, object] = {
        "hosts_rolled": sum(s.operation == "rolling_update" for s in rollout.sigterms),
        "node_drain_hosts": sum(s.operation == "node_drain" for s in rollout.sigterms),
        "scaled_in_hosts": sum(s.operation == "scale_in" for s in rollout.sigterms),
        "forms_pending_at_start": rollout.pending_at_start,
        "forms_pending_at_sigterm": sum(len(s.pending) for s in rollout.sigterms),
        "answered_after_sigterm": len(after),
        "max_answer_delay_after_sigterm_s": round(max(after), 1) if after else 0.0,
        "forms_lost": len(lost),
        "lost_outcomes": sorted({c.outcome for c in lost}),
        "calls": len(calls),
        "completed": sum(c.outcome == "completed" for c in calls),
        "new_calls_during_rollout": sum(rollout.began <= c.started_at <= rollout.operations_ended for c in calls),
        "new_calls_refused": sum(c.refused for c in calls),
        "new_calls_moved_to_another_host": sum(c.retries > 0 for c in accepted),
        "calls_by_host": {h: sum(c.host == h for c in accepted) for h in sorted({c.host for c in accepted})},
        "misdelivered": sum(c.outcome == "completed" and not c.delivered_right for c in calls),
        "answer_delay_s": list(rollout.plan.answer_delay_s),
        "arrival_interval_s": rollout.plan.arrival_interval_s,
        "seed": rollout.plan.seed,
        "operations": [_operation(s) for s in rollout.sigterms],
        "phase_seconds": round(rollout.operations_ended - rollout.began, 1) if rollout.began else 0.0,
        "sigkill": sigkill,
    }
    ok = entry["forms_lost"] == entry["new_calls_refused"] == entry["misdelivered"] == 0
    entry["outcome"] = "ok" if ok and after else "FAILED"
    return entry


def _operation(sigterm: Sigterm) -> dict[str, object]:
    restart = round(sigterm.restarted_at - sigterm.exited_at, 1) if sigterm.restarted_at else None
    return {
        "operation": sigterm.operation,
        "host": sigterm.host,
        "forms_pending_at_sigterm": len(sigterm.pending),
        "sigterm_to_exit_s": round(sigterm.exited_at - sigterm.at, 1),
        "exit_to_serving_s": restart,
    }


def markdown(entry: dict[str, object]) -> list[str]:
    """The rollout table of ``scale.md``."""
    operations = entry["operations"]
    assert isinstance(operations, list)
    rows = [
        "",
        f"Rollout (a pool of every Host; outcome {entry['outcome']}): {entry['forms_pending_at_start']} forms"
        f" pending at the first SIGTERM, a new call every {entry['arrival_interval_s']} s, people answering"
        f" {entry['answer_delay_s'][0]} to {entry['answer_delay_s'][1]} s after their form opened"  # type: ignore[index]
        f" (seed {entry['seed']}); {entry['calls']} calls, {entry['completed']} completed.",
        "",
        "| hosts rolled | forms pending at SIGTERM | answered after SIGTERM | max answer delay after SIGTERM s"
        " | forms lost | new calls during rollout | refused | moved to another Host | misdelivered |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {entry['hosts_rolled']} (+{entry['node_drain_hosts']} node drain, {entry['scaled_in_hosts']} scale-in)"
        f" | {entry['forms_pending_at_sigterm']} | {entry['answered_after_sigterm']}"
        f" | {entry['max_answer_delay_after_sigterm_s']} | {entry['forms_lost']} | {entry['new_calls_during_rollout']}"
        f" | {entry['new_calls_refused']} | {entry['new_calls_moved_to_another_host']} | {entry['misdelivered']} |",
        "",
        "| operation | Host | forms pending at SIGTERM | SIGTERM → exited s | exited → serving s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for op in operations:
        restart = "not restarted" if op["exit_to_serving_s"] is None else op["exit_to_serving_s"]
        rows.append(
            f"| {op['operation']} | {op['host']} | {op['forms_pending_at_sigterm']} | {op['sigterm_to_exit_s']}"
            f" | {restart} |"
        )
    sigkill = entry["sigkill"]
    if isinstance(sigkill, dict):
        rows += ["", f"SIGKILL, apart (the `kill_broker` fault above): {_sigkill_text(sigkill)}."]
    return rows


def _sigkill_text(sigkill: dict[str, object]) -> str:
    reasons = sigkill.get("form_close_reasons")
    outcomes = sigkill.get("outcomes")
    assert isinstance(reasons, list)
    assert isinstance(outcomes, list)
    return (
        f"{sigkill.get('host')}'s {sigkill.get('calls')} calls ended {'/'.join(outcomes)}, their forms closed"
        f" {'/'.join(reasons)}, {sigkill.get('pending_after_restart')} pending after its restart (never replayed)"
    )

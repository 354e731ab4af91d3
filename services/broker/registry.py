"""The broker's provider registry: live registrations, the Tool routing table, sign-in forwarding.

A registration with the same provider id replaces the old one (the broker settles the old one's invocations).
An MCP server name belongs to one live registration at a time: the servers of its Tools and of its sign-in
status. :meth:`ProviderRegistry.claim_conflict` names a server another provider's live registration holds, and
the broker refuses that registration, Tool change or sign-in status (no route takeover); once the holder
retires, the name is free again. Providers publish the OAuth
sign-in status of their servers (``sign_in_status``); the registry forwards a browser's redirect to the provider
whose pending sign-in minted its ``state``, and tells callers to sign in before a call would reach a server that
needs it (docs/design.md#capability-broker).

The Tool listing is published with a revision (:attr:`ProviderRegistry.revision`, ``WatchTools``): every change of
the routing table marks it stale, and the registry publishes once per burst of changes (the next turn of the event
loop, so a re-registration's retire and add are one change), bumping the revision only when the listing differs
from the last one published, and sets :meth:`ProviderRegistry.changed`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from maka.broker.v1 import broker_pb2
from services.broker.arguments import argument_problems
from services.broker.errors import DOMAIN, CallRefused
from services.broker.model import ProviderStream, Registration, mint_id
from services.broker.servers import ServerTable, refused, unavailable_message
from services.core import messages
from services.core.limits import MAX_ID_CHARS
from services.core.reasons import BrokerErrorReason
from services.core.status import NotFound

log = logging.getLogger("maka.broker.broker")

SendFrame = Callable[[ProviderStream, broker_pb2.ConnectResponse], None]


def held_servers(registration: Registration) -> set[str]:
    """The MCP server names ``registration`` holds: the servers of its Tools and of its sign-in status."""
    held = {name.partition(":")[0] for name in registration.tools}
    if registration.sign_in is not None:
        held.add(registration.sign_in.server)
    return held


class ProviderRegistry:
    """The live registrations by provider id and the Tool routing table.

    Args:
        send: queues a frame on a provider's stream (the broker's, which retires a provider that
            does not read its stream).
        servers: what providers report of their MCP servers (why an unrouted server is unavailable).
        max_invocations: live invocations per registration before RESOURCE_EXHAUSTED.
    """

    def __init__(self, send: SendFrame, servers: ServerTable, *, max_invocations: int) -> None:
        self._send = send
        self._servers = servers
        self._max_invocations = max_invocations
        self._registrations: dict[str, Registration] = {}
        """provider id → live registration."""
        self._tools: dict[str, Registration] = {}
        """qualified Tool name → live registration serving it (the latest to claim it)."""
        self.revision = 1
        """The published listing's revision: 1 for the first (empty) one, one more for each change."""
        self.listing: list[broker_pb2.Tool] = []
        """The published listing (:meth:`list_tools` as of :attr:`revision`)."""
        self._changed = asyncio.Event()
        self._publishing = False

    def __len__(self) -> int:
        return len(self._registrations)

    def get(self, provider_id: str) -> Registration | None:
        """The live registration of ``provider_id``."""
        return self._registrations.get(provider_id)

    def registrations(self) -> list[Registration]:
        """Every live registration."""
        return list(self._registrations.values())

    # --- registrations and the routing table ----------------------------------------------------

    def claim_conflict(
        self, provider_id: str, tools: Mapping[str, broker_pb2.ToolDescriptor] = {}, sign_in_server: str = ""
    ) -> str | None:
        """Why ``provider_id`` may not claim the servers of ``tools`` (and ``sign_in_server``): the first one a
        live registration of another provider holds, as a sentence; ``None`` when every name is free or its own."""
        wanted = {name.partition(":")[0] for name in tools}
        if sign_in_server:
            wanted.add(sign_in_server)
        for other in self._registrations.values():
            if other.provider_id == provider_id or not other.live:
                continue
            taken = sorted(wanted & held_servers(other))
            if taken:
                return f"server {taken[0]} is already registered by provider {other.provider_id}"
        return None

    def add(
        self,
        stream: ProviderStream,
        provider_id: str,
        display_name: str,
        tools: dict[str, broker_pb2.ToolDescriptor],
    ) -> Registration:
        """Register the provider on ``stream`` (the broker retired any older one of ``provider_id``)."""
        registration = Registration(
            registration_id=mint_id("reg"),
            provider_id=provider_id,
            display_name=display_name[:MAX_ID_CHARS] or provider_id,
            stream=stream,
            tools=tools,
        )
        stream.registration = registration
        self._registrations[provider_id] = registration
        for name in tools:
            self._tools[name] = registration
        self._touched()
        return registration

    def replace_tools(self, registration: Registration, tools: dict[str, broker_pb2.ToolDescriptor]) -> set[str]:
        """Route ``tools`` to ``registration`` instead of its old ones; return the names whose Tool
        changed or went away (their invocations lose their binding)."""
        for name in registration.tools:
            if self._tools.get(name) is registration:
                del self._tools[name]
        changed = {n for n, d in registration.tools.items() if tools.get(n) != d}
        registration.tools = tools
        for name in tools:
            self._tools[name] = registration
        self._touched()
        return changed

    def remove(self, registration: Registration) -> None:
        """Retire ``registration``: it is no longer live, and its Tools route to another live
        registration claiming them, if any."""
        registration.live = False
        if self._registrations.get(registration.provider_id) is registration:
            del self._registrations[registration.provider_id]
        for name in registration.tools:
            if self._tools.get(name) is registration:
                del self._tools[name]
        for other in self._registrations.values():
            for name in other.tools:
                self._tools.setdefault(name, other)
        self._touched()

    # --- the published listing (WatchTools) -------------------------------------------------------

    def changed(self) -> asyncio.Event:
        """The event set at the next published change (or :meth:`wake`); read it before checking
        :attr:`revision`, then wait on it, and no change is missed."""
        return self._changed

    def wake(self) -> None:
        """Set :meth:`changed` without a change (the broker ends its listing streams: drain, shutdown)."""
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def _touched(self) -> None:
        """The routing table changed: publish at the next turn of the event loop (at once without one)."""
        if self._publishing:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._publish()
            return
        self._publishing = True
        loop.call_soon(self._publish)

    def _publish(self) -> None:
        self._publishing = False
        listing = self.list_tools()
        if listing == self.listing:
            return
        self.revision += 1
        self.listing = listing
        log.info("tools_listing_changed", extra={"revision": self.revision, "tools": len(listing)})
        self.wake()

    def silent_since(self, deadline: float) -> list[Registration]:
        """The live registrations whose stream sent nothing since monotonic ``deadline``."""
        return [r for r in self._registrations.values() if r.stream.last_seen < deadline]

    def list_tools(self) -> list[broker_pb2.Tool]:
        """Every Tool of every live registration (the routed one per qualified name)."""
        tools = []
        for name, registration in sorted(self._tools.items()):
            descriptor = registration.tools[name]
            tools.append(
                broker_pb2.Tool(
                    qualified_name=name,
                    description=descriptor.description,
                    input_schema_json=descriptor.input_schema_json,
                    output_schema_json=descriptor.output_schema_json,
                    title=descriptor.title,
                    annotations_json=descriptor.annotations_json,
                    provider_id=registration.provider_id,
                    provider_display_name=registration.display_name,
                )
            )
        return tools

    def route(self, request: broker_pb2.CallToolRequest, arguments: Mapping[str, Any]) -> Registration:
        """The live registration that serves ``request.tool_name`` and may take one more invocation.

        Raises:
            CallRefused: no provider offers the Tool (UNKNOWN_TOOL, or SERVER_UNAVAILABLE with the reported
                cause), its server needs a sign-in (AUTH_REQUIRED), the provider is full (RESOURCE_EXHAUSTED),
                or the arguments do not match the ``inputSchema`` (INVALID_ARGUMENTS) unless skipped.
        """
        server = request.tool_name.partition(":")[0]
        registration = self._tools.get(request.tool_name)
        if registration is None or not registration.live:
            hint = self.sign_in_hint(server)
            if hint is not None:
                raise CallRefused(broker_pb2.FAILURE_CODE_AUTH_REQUIRED, hint)
            reported = self._servers.find(server)
            if reported is not None and (
                # refused: another provider holds the server name, the reporter's Tools are not registered
                refused(reported) or not any(name.partition(":")[0] == server for name in self._tools)
            ):
                raise CallRefused(broker_pb2.FAILURE_CODE_SERVER_UNAVAILABLE, unavailable_message(reported))
            raise CallRefused(
                broker_pb2.FAILURE_CODE_UNKNOWN_TOOL, f"no registered provider offers {request.tool_name}"
            )
        hint = self.sign_in_hint(server)
        if hint is not None:  # e.g. a scope step-up is pending on the live connection: nothing is sent
            raise CallRefused(broker_pb2.FAILURE_CODE_AUTH_REQUIRED, hint)
        if len(registration.invocations) >= self._max_invocations:
            raise CallRefused(broker_pb2.FAILURE_CODE_RESOURCE_EXHAUSTED, "the provider has too many live invocations")
        if not request.skip_argument_validation:
            problems = argument_problems(registration.tools[request.tool_name].input_schema_json, arguments)
            if problems:
                raise CallRefused(
                    broker_pb2.FAILURE_CODE_INVALID_ARGUMENTS,
                    f"the arguments do not match the inputSchema of {request.tool_name}: " + "; ".join(problems),
                )
        return registration

    # --- sign-in ----------------------------------------------------------------------------------

    def set_sign_in(self, registration: Registration, status: broker_pb2.SignInStatus) -> None:
        """Record the sign-in status ``registration`` published (``UNSPECIFIED`` clears it)."""
        registration.sign_in = status if status.state != broker_pb2.SIGN_IN_STATE_UNSPECIFIED else None
        log.info(
            "sign_in_status",
            extra={
                "provider_id": registration.provider_id,
                "server": status.server,
                "sign_in_state": broker_pb2.SignInState.Name(status.state),
            },
        )

    def list_sign_ins(self) -> list[broker_pb2.SignInStatus]:
        """The sign-in status every live registration published, sorted by server (never a token)."""
        found = [r.sign_in for r in self._registrations.values() if r.live and r.sign_in is not None]
        return sorted(found, key=lambda status: status.server)

    def complete_sign_in(self, request: broker_pb2.CompleteSignInRequest) -> str:
        """Forward an OAuth redirect to the provider whose pending sign-in minted ``request.state``.

        Returns the server name. Raises :class:`NotFound` ``NOT_FOUND`` when no pending sign-in has
        that state (a stale, replayed or forged redirect: nothing is forwarded).
        """
        for registration in self._registrations.values():
            status = registration.sign_in
            if not registration.live or status is None or status.state != broker_pb2.SIGN_IN_STATE_REQUIRED:
                continue
            states = parse_qs(urlsplit(status.authorization_url).query).get("state", [])
            if request.state and states and secrets.compare_digest(states[0], request.state):
                callback = broker_pb2.SignInCallback(
                    server=status.server,
                    code=request.code,
                    state=request.state,
                    iss=request.iss,
                    error=request.error,
                )
                self._send(registration.stream, broker_pb2.ConnectResponse(sign_in_callback=callback))
                log.info("sign_in_forwarded", extra={"provider_id": registration.provider_id, "server": status.server})
                return status.server
        raise NotFound(BrokerErrorReason.NOT_FOUND, "no pending sign-in matches this redirect", domain=DOMAIN)

    def sign_out(self, server: str) -> None:
        """Ask the provider of ``server`` to forget its tokens. Raises :class:`NotFound` ``NOT_FOUND``."""
        for registration in self._registrations.values():
            if registration.live and registration.sign_in is not None and registration.sign_in.server == server:
                self._send(
                    registration.stream,
                    broker_pb2.ConnectResponse(sign_out=broker_pb2.SignOutRequest(server=server)),
                )
                return
        raise NotFound(BrokerErrorReason.NOT_FOUND, f"no provider reported a sign-in for {server}", domain=DOMAIN)

    def sign_in_hint(self, server: str) -> str | None:
        """What a caller must do first when ``server`` waits for a sign-in, or None."""
        for registration in self._registrations.values():
            status = registration.sign_in
            if (
                registration.live
                and status is not None
                and status.server == server
                and status.state == broker_pb2.SIGN_IN_STATE_REQUIRED
            ):
                return messages.sign_in_hint(server, status.authorization_url)
        return None

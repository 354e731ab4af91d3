"""OAuth sign-in prompts for every surface, over the broker's ``ListSignIns``/``CompleteSignIn``/``SignOut``.

A sign-in is a Host-owned step like a form (docs/security.md "OAuth"): the MCP provider publishes it,
each surface shows "Sign in to SERVER" with the full authorization URL and an explicit open action,
and never opens or fetches the URL by itself. The redirect (``code``, ``state``, ``iss``) is delivered
back with :meth:`SignIns.complete`; the broker forwards it only to the sign-in whose ``state``
matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import grpc.aio

from maka.broker.v1 import broker_pb2
from maka_client import BrokerClient
from services.core.channels import open_channel
from surfaces.common.wire import same

STATE_NAMES = {
    broker_pb2.SIGN_IN_STATE_REQUIRED: "sign_in_required",
    broker_pb2.SIGN_IN_STATE_SIGNED_IN: "signed_in",
}


@dataclass(frozen=True)
class SignInView:
    """One server's sign-in as surfaces show it (never a token)."""

    server: str
    state: str
    """``sign_in_required`` or ``signed_in``."""
    authorization_url: str
    """The URL to open while ``sign_in_required`` (empty otherwise)."""

    @property
    def redirect_uri(self) -> str:
        """The ``redirect_uri`` the authorization URL names (where the browser lands afterwards)."""
        values = parse_qs(urlsplit(self.authorization_url).query).get("redirect_uri", [])
        return values[0] if values else ""

    def to_json(self) -> dict[str, str]:
        return {"server": self.server, "state": self.state, "authorization_url": self.authorization_url}


def view(status: broker_pb2.SignInStatus) -> SignInView:
    """The :class:`SignInView` of a broker ``SignInStatus``."""
    return SignInView(status.server, STATE_NAMES.get(status.state, "unknown"), status.authorization_url)


class SignIns:
    """The broker's sign-in calls (:class:`maka_client.BrokerClient`) as :class:`SignInView` values. Raises
    :class:`maka_client.MakaError` (``NOT_FOUND`` for an unknown state or server, ``UNAVAILABLE`` when no
    broker answers)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._channel = channel
        self._broker = BrokerClient(channel=channel)

    @classmethod
    def connect(cls, target: str, *, token: str | None = None) -> SignIns:
        """Sign-ins over a new channel to ``target`` (bearer ``token`` when set)."""
        return cls(open_channel(target, token=token))

    async def list(self, *, timeout: float = 5.0) -> list[SignInView]:
        """Every server's sign-in status, sorted by server."""
        return [view(same(broker_pb2.SignInStatus, s)) for s in await self._broker.list_sign_ins(timeout=timeout)]

    async def complete(self, code: str, state: str, iss: str = "", error: str = "", *, timeout: float = 10.0) -> str:
        """Deliver an authorization response; returns the server it signed in."""
        return await self._broker.complete_sign_in(code, state, iss, error, timeout=timeout)

    async def sign_out(self, server: str, *, timeout: float = 5.0) -> None:
        """Forget ``server``'s tokens (it asks for a new sign-in)."""
        await self._broker.sign_out(server, timeout=timeout)

    async def close(self) -> None:
        await self._channel.close()

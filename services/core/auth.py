"""Caller authentication by role (DESIGN.md §6): bearer tokens in gRPC metadata, scoped to sessions.

Servicers ask :func:`current_principal` who is calling and whether it may see a session.
With no tokens configured (the zero-configuration loopback default of ``make run``), every caller
is the anonymous principal that holds every role and sees every session.

STATUS: the interceptor is filled in by the access-control work; the API below is stable.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum


class Role(StrEnum):
    """Who a caller is. Each RPC names the roles it admits."""

    PROVIDER = "provider"
    """Connects to the broker's ``Connect``."""
    CALLER = "caller"
    """Calls Tools: the broker's ``CallTool``, ``Stop``, ``ListTools``."""
    SURFACE = "surface"
    """Reads and answers forms: ``Attach``, ``Answer``, ``ListPending``, ``GetInteraction``."""
    BROKER = "broker"
    """The broker itself on the Interaction service's ``HostLink``."""
    ADMIN = "admin"
    """Every role and every session."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its name, roles, and the sessions it may see (``"*"`` = all)."""

    name: str
    roles: frozenset[Role]
    sessions: frozenset[str] = field(default_factory=lambda: frozenset({"*"}))

    def has_role(self, role: Role) -> bool:
        """True when the principal holds ``role`` (or is admin)."""
        return role in self.roles or Role.ADMIN in self.roles

    def may_see(self, session_id: str) -> bool:
        """True when the principal may see and answer forms of ``session_id``."""
        return "*" in self.sessions or session_id in self.sessions

    def visible(self, session_ids: Iterable[str]) -> list[str]:
        """The subset of ``session_ids`` this principal may see, in order."""
        return [s for s in session_ids if self.may_see(s)]


ANONYMOUS = Principal(name="anonymous", roles=frozenset({Role.ADMIN}))
"""The principal of every call when no tokens are configured."""

_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("maka_principal", default=ANONYMOUS)


def current_principal() -> Principal:
    """The principal of the RPC being served (set by the auth interceptor; ANONYMOUS without auth)."""
    return _current.get()


def set_current_principal(principal: Principal) -> contextvars.Token[Principal]:
    """Bind ``principal`` to the current context (used by the interceptor and by tests)."""
    return _current.set(principal)

"""Many Hosts per Interaction tier (docs/design.md#many-hosts).

:class:`InteractionTier` holds one :class:`InteractionAuthority` per configured Host, all sharing the
replica's Redis client, command limiter and fan-out. Every request names its Host (``host_id``, empty
meaning the only one) and :meth:`InteractionTier.resolve` checks it against the caller's token: a
Host the token does not name, or one this tier does not serve, is PERMISSION_DENIED with the same
message either way, so a caller learns nothing about other Hosts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from services.core.auth import Principal
from services.core.form import FormErrorReason, Violation
from services.interaction import errors
from services.interaction.authority import InteractionAuthority

log = logging.getLogger("maka.interaction.tier")


class InteractionTier:
    """The Hosts of one replica, by id (``authorities`` keeps the configured order)."""

    def __init__(self, authorities: Mapping[str, InteractionAuthority]) -> None:
        if not authorities:
            raise ValueError("an Interaction tier serves at least one Host")
        self.authorities = dict(authorities)

    @property
    def hosts(self) -> Sequence[str]:
        """The Host ids served."""
        return list(self.authorities)

    def hosts_for(self, principal: Principal) -> list[str]:
        """The served Hosts ``principal``'s token names, in configured order (``ListHosts``): what a surface
        following its team's pool attaches to. Never a Host the tier does not serve, nor one the token does not
        name, so a caller learns nothing about other Hosts."""
        return [h for h in self.authorities if principal.may_serve_host(h)]

    def resolve(self, principal: Principal, host_id: str) -> InteractionAuthority:
        """The authority of ``host_id`` for ``principal``.

        Empty ``host_id``: the tier's only Host, or else the only served Host the principal's token
        names. Raises InvalidRequest when that is ambiguous, HostForbidden (PERMISSION_DENIED) when the
        token does not name the Host or the tier does not serve it (indistinguishable).
        """
        if not host_id:
            if len(self.authorities) == 1:
                host_id = next(iter(self.authorities))
            else:
                allowed = self.hosts_for(principal)
                if len(allowed) != 1:
                    raise errors.InvalidRequest(
                        "host_id is required: this Interaction tier serves several Hosts",
                        [Violation("/host_id", FormErrorReason.SCHEMA_INVALID_VALUE, "is required")],
                    )
                host_id = allowed[0]
        authority = self.authorities.get(host_id)
        if authority is None or not principal.may_serve_host(host_id):
            raise errors.HostForbidden()
        return authority

    async def reap_once(self) -> int:
        """One reaper pass over every Host; returns how many forms closed."""
        closed = 0
        for authority in self.authorities.values():
            closed += await authority.reap_once()
        return closed

    async def close_older_epochs(self) -> None:
        """Close forms of older epochs left behind on every Host (service start)."""
        for authority in self.authorities.values():
            await authority.close_older_epochs()

    async def aclose(self) -> None:
        """Stop every Host's background closers."""
        for authority in self.authorities.values():
            await authority.aclose()

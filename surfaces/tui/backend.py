"""A :class:`~surfaces.tui.app.FormsBackend` that follows the stack across restarts (``maka tui``).

:class:`FollowingBackend` wraps :class:`~surfaces.common.interactions.Interactions`. Every time the
``Attach`` stream drops it waits the backoff delay, asks ``locate()`` where the Interaction service is *now*
(``maka tui`` re-reads ``<state dir>/endpoints.json``: a restarted stack may listen on other ports), reconnects
there when the address changed, and re-subscribes **without** a resume token, so every (re)connection starts
with a fresh ``Snapshot`` (``Subscribe``: "a token too old yields a snapshot"; a fresh one always does). The
surface therefore learns it is connected again as soon as that snapshot arrives, even when nothing changed
while it was away, and forms that closed meanwhile are reconciled from the snapshot.

With a ``token`` source (``maka tui`` of a person who signed in with ``maka login``), the bearer token is read
again before every call and every reconnect, as each ``maka`` command reads it when it starts: a token ``maka
login`` stored since, or one renewed because it expired, is sent from the next call on (the channel asks for it
per call, :class:`services.core.channels.BearerChannel`), without reconnecting the attached stream.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence

from maka_client import AttachedSurface, ReattachPolicy, resumable
from services.core.form import Answer
from surfaces.common.interactions import (
    SURFACE_REATTACH,
    AttachEvent,
    FormAnswered,
    FormClosed,
    FormDeliveryRecorded,
    FormOpened,
    FormSnapshot,
    Interactions,
    InteractionView,
    surface_token_from_env,
)

log = logging.getLogger(__name__)


class FollowingBackend:
    """Forms backend over the Interaction service at ``locate()``, re-located on every reconnect.

    ``locate`` returns ``host:port`` (it may raise ``OSError``/``ValueError``/``TypeError`` while the stack is
    down or rewriting its ``endpoints.json``; the last known address is kept then). ``connect`` opens a client
    for an address (default :meth:`Interactions.connect`; call inside the running loop). ``reattach`` sets
    the reconnect delays (consecutive failures grow the delay; any received frame resets it). ``token``, when
    given, gives the bearer token now (it may raise ``Exception`` subclasses such as an expired sign-in: the last
    token is kept then, and the service's refusal is what the surface shows); it is awaited before every call
    and reconnect, and ``connect`` is then called with ``token=`` a callable of the latest.
    Public state: :attr:`address` (where it is connected now), :attr:`retargets` (how many times it moved).
    """

    def __init__(
        self,
        locate: Callable[[], str],
        *,
        connect: Callable[..., Interactions] = Interactions.connect,
        reattach: ReattachPolicy | None = None,
        token: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self._locate = locate
        self._connect = connect
        self._reattach = reattach or SURFACE_REATTACH
        self._token_source = token
        self._token = surface_token_from_env()
        """The token calls send (with a source): the last it gave, at first the one the TUI started with."""
        self.address = locate()
        self.retargets = 0
        self._client = self._open(self.address)

    def _open(self, address: str) -> Interactions:
        if self._token_source is None:
            return self._connect(address)
        return self._connect(address, token=lambda: self._token)

    async def _read_token(self) -> None:
        """Read the token again (with a source): the next call sends what it gives."""
        if self._token_source is None:
            return
        try:
            self._token = await self._token_source()
        except Exception as error:  # an expired sign-in, an unreadable file: keep the last, the service decides
            log.info("tui_token_unavailable", extra={"error": type(error).__name__})

    async def _follow(self) -> bool:
        """Re-read the token and the address; switch clients when the address changed (the old channel is
        closed). Always ready."""
        await self._read_token()
        try:
            address = self._locate()
        except (OSError, ValueError, TypeError, json.JSONDecodeError) as error:
            log.info("tui_locate_failed", extra={"error": type(error).__name__})
            return True
        if address == self.address:
            return True
        old, self._client = self._client, self._open(address)
        self.address = address
        self.retargets += 1
        log.info("tui_retargeted", extra={"address": address})
        await old.close()
        return True

    async def attach(self, session_ids: Sequence[str] = (), resume_token: str = "") -> AsyncIterator[AttachEvent]:
        """Yield ``Snapshot`` then live events, forever; on a drop yield :class:`maka_client.Reattaching`, wait,
        re-locate and re-subscribe fresh (``resume_token`` is used only for the first subscription). Raises
        :class:`maka_client.MakaError` for errors a reconnect cannot fix."""
        first = [resume_token]

        def subscription(_: str) -> AsyncIterator[AttachEvent]:
            token = first.pop() if first else ""
            return self._until_dropped(session_ids, token)

        stream = resumable(
            subscription,
            token_of=lambda _: "",
            backoff=self._reattach.backoff,
            retryable=lambda _: True,
            ready=self._follow,
        )
        try:
            async for event in stream:
                yield event
        finally:
            await stream.aclose()

    async def _until_dropped(self, session_ids: Sequence[str], token: str) -> AsyncGenerator[AttachEvent, None]:
        """One subscription at the current address, ended by its first drop (the caller re-locates)."""
        stream = self._client.attach(session_ids, token)
        try:
            async for event in stream:
                if not isinstance(event, (FormSnapshot, FormOpened, FormAnswered, FormClosed, FormDeliveryRecorded)):
                    return
                yield event
        finally:
            await stream.aclose()

    async def answer(
        self,
        interaction_id: str,
        answer: Answer,
        *,
        submission_id: str | None = None,
        session_id: str = "",
    ) -> InteractionView:
        """:meth:`Interactions.answer` on the current address."""
        await self._read_token()
        return await self._client.answer(interaction_id, answer, submission_id=submission_id, session_id=session_id)

    async def get(self, interaction_id: str, *, session_id: str = "") -> InteractionView:
        """:meth:`Interactions.get` on the current address."""
        await self._read_token()
        return await self._client.get(interaction_id, session_id=session_id)

    async def list_surfaces(self) -> tuple[list[AttachedSurface], int]:
        """:meth:`Interactions.list_surfaces` on the current address."""
        await self._read_token()
        return await self._client.list_surfaces()

    async def close(self) -> None:
        """Close the current client."""
        await self._client.close()

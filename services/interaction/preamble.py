"""The first frame of the Interaction service's two bidirectional streams (``HostLink``'s ``hello``,
``Attach``'s ``subscribe``): one bounded wait and one pair of stable errors, each naming its own frame and setting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc.aio
from google.protobuf.message import Message

from services.core.status import abort
from services.interaction import errors

F = TypeVar("F", bound=Message)


@dataclass(frozen=True)
class Preamble:
    """What a stream's first frame must be: ``rpc``'s ``frame`` field, within ``timeout`` seconds (``setting``)."""

    rpc: str
    frame: str
    setting: str
    timeout: float

    async def first(self, requests: AsyncIterator[F], context: grpc.aio.ServicerContext[Any, Any]) -> F | None:
        """The stream's first frame; None when the client half-closed before sending one. Ends the RPC
        ``INVALID_ARGUMENT`` / ``INVALID_REQUEST`` when none came within the timeout or it is another frame."""
        try:
            async with asyncio.timeout(self.timeout):
                first = await anext(requests, None)
        except TimeoutError:
            await abort(
                context,
                errors.InvalidRequest(
                    f"no {self.frame} frame within {self.timeout:g} s ({self.setting}); the stream ends"
                ),
            )
        if first is not None and first.WhichOneof("frame") != self.frame:
            await abort(context, errors.InvalidRequest(f"the first {self.rpc} frame must be {self.frame}"))
        return first

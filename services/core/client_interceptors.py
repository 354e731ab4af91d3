"""gRPC client interceptors: ``authorization: Bearer <token>`` on every outgoing call.

Client-side only: :mod:`services.core.channels` uses them; the server side is :mod:`services.core.interceptors`.
"""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio


def _with_token(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    metadata.add("authorization", f"Bearer {token}")
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class _UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request)


class _UnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request)


class _StreamUnary(grpc.aio.StreamUnaryClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_stream_unary(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request_iterator)


class _StreamStream(grpc.aio.StreamStreamClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_stream_stream(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request_iterator)


class BearerClientInterceptors:
    """Client interceptors adding ``authorization: Bearer <token>`` to all four call kinds."""

    @staticmethod
    def all(token: str) -> list[grpc.aio.ClientInterceptor]:
        """One interceptor per call kind, for ``grpc.aio.insecure_channel(..., interceptors=...)``."""
        return [_UnaryUnary(token), _UnaryStream(token), _StreamUnary(token), _StreamStream(token)]


def client_metadata_interceptors(token: str | None) -> list[grpc.aio.ClientInterceptor]:
    """Client interceptors that add ``authorization: Bearer`` to every call (none when no token)."""
    if not token:
        return []
    return BearerClientInterceptors.all(token)

"""The gRPC server interceptor shared by every service: authentication + principal + request metrics.

The client side (bearer token on outgoing calls) is :class:`services.core.channels.BearerChannel`.

The server interceptor authenticates with :func:`services.core.auth.authenticate_async`, binds the
principal for the handler (:func:`services.core.auth.current_principal`), and counts each request in
``maka_grpc_requests_total{method,code}``. Refusals are rich statuses built by
:mod:`services.core.status`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from services.core import metrics
from services.core.auth import BearerVerifier, Principal, Role, TokenTable, authenticate_async, set_current_principal
from services.core.status import ServiceError, to_status

_Behavior = Callable[..., Any]
if TYPE_CHECKING:
    _Handler = grpc.RpcMethodHandler[Any, Any]
else:
    _Handler = grpc.RpcMethodHandler


def _code_of(context: grpc.aio.ServicerContext[Any, Any], error: BaseException | None) -> str:
    code: object = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if error is None:
        return "OK"
    return "CANCELLED" if type(error).__name__ == "CancelledError" else "UNKNOWN"


_FIRST_ONEOF: dict[Any, str] = {}
"""Message descriptor → the name of its first oneof ("" without one), looked up once per message type."""


def _kind(message: Any) -> str:
    """The set case of ``message``'s first oneof (its frame kind), or its type name without one."""
    descriptor = message.DESCRIPTOR
    oneof = _FIRST_ONEOF.get(descriptor)
    if oneof is None:
        oneofs = descriptor.oneofs
        oneof = _FIRST_ONEOF[descriptor] = oneofs[0].name if oneofs else ""
    if oneof:
        return message.WhichOneof(oneof) or "unset"
    return str(descriptor.name)


def _count(method: str, direction: str, message: Any) -> None:
    metrics.child(metrics.GRPC_MESSAGES, method, direction, _kind(message)).inc()


def _counting(transform: Callable[[Any], Any] | None, method: str, direction: str, *, out: bool) -> Any:
    """``transform`` (a handler's request deserializer or response serializer) that also counts each message:
    the one it decoded (``out=False``) or the one it is about to encode (``out=True``). A plain call per
    message instead of an extra async-generator hop around the stream (None stays None: raw bytes)."""
    if transform is None:
        return None
    if out:

        def serialize(message: Any) -> Any:
            _count(method, direction, message)
            return transform(message)

        return serialize

    def deserialize(data: Any) -> Any:
        message = transform(data)
        _count(method, direction, message)
        return message

    return deserialize


def _wrap(behavior: _Behavior, method: str, principal: Principal) -> _Behavior:
    """Bind the principal and record request metrics around ``behavior`` (coroutine or async generator);
    messages are counted by the handler's (de)serializers (:func:`_counting`)."""
    if inspect.isasyncgenfunction(behavior):

        async def stream_wrapper(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            set_current_principal(principal)
            start, error = time.monotonic(), None
            try:
                async for item in behavior(request, context):
                    yield item
            except BaseException as exc:
                error = exc
                raise
            finally:
                metrics.child(metrics.GRPC_REQUESTS, method, _code_of(context, error)).inc()
                metrics.child(metrics.GRPC_LATENCY, method).observe(time.monotonic() - start)

        return stream_wrapper

    async def unary_wrapper(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        set_current_principal(principal)
        start, error = time.monotonic(), None
        try:
            return await behavior(request, context)
        except BaseException as exc:
            error = exc
            raise
        finally:
            metrics.child(metrics.GRPC_REQUESTS, method, _code_of(context, error)).inc()
            metrics.child(metrics.GRPC_LATENCY, method).observe(time.monotonic() - start)

    return unary_wrapper


def _refusal(handler: _Handler, method: str, error: ServiceError) -> _Handler:
    async def refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        metrics.GRPC_REQUESTS.labels(method, error.code.name).inc()
        await context.abort_with_status(to_status(error))

    return _rebuild(handler, refuse)


def _rebuild(handler: _Handler, behavior: _Behavior, counted_method: str = "") -> _Handler:
    """``handler`` with ``behavior``; with ``counted_method``, its messages are counted in
    ``maka_grpc_messages_total`` as they are decoded and encoded."""
    deserializer, serializer = handler.request_deserializer, handler.response_serializer
    if counted_method:
        deserializer = _counting(deserializer, counted_method, "received", out=False)
        serializer = _counting(serializer, counted_method, "sent", out=True)
    kwargs: dict[str, Any] = {"request_deserializer": deserializer, "response_serializer": serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(behavior, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(behavior, **kwargs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(behavior, **kwargs)
    return grpc.unary_unary_rpc_method_handler(behavior, **kwargs)


def _behavior_of(handler: _Handler) -> _Behavior:
    for name in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        behavior = getattr(handler, name)
        if behavior is not None:
            return behavior  # type: ignore[no-any-return]
    raise ValueError("handler has no behavior")


_WRAPPED_MAX = 4096


class ServerInterceptor(grpc.aio.ServerInterceptor):
    """Authenticate, bind the principal, and count every request (see the module docstring)."""

    def __init__(
        self,
        tokens: TokenTable,
        method_roles: Mapping[str, frozenset[Role]],
        verifier: BearerVerifier | None = None,
    ) -> None:
        self._tokens = tokens
        self._method_roles = dict(method_roles)
        self._verifier = verifier
        """Bearer JWTs of the OpenID Connect issuer, beside the tokens (:mod:`services.core.jwt_auth`)."""
        self._wrapped: dict[tuple[str, Principal], tuple[_Handler, _Handler]] = {}
        """(method, principal) → (the service's handler, its wrapped copy): built once, not per request.
        Bounded: emptied when it reaches :data:`_WRAPPED_MAX` (a token table reload can bring new principals)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[_Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> _Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler  # type: ignore[return-value]  # unknown method: gRPC answers UNIMPLEMENTED
        method: str = handler_call_details.method
        try:
            principal = await authenticate_async(
                self._tokens,
                method,
                handler_call_details.invocation_metadata,
                self._method_roles,
                self._verifier,
            )
        except ServiceError as error:
            return _refusal(handler, method, error)
        set_current_principal(principal)
        key = (method, principal)
        cached = self._wrapped.get(key)
        if cached is not None and cached[0] is handler:
            return cached[1]
        behavior = _wrap(_behavior_of(handler), method, principal)
        wrapped = _rebuild(handler, behavior, method)
        if len(self._wrapped) >= _WRAPPED_MAX:
            self._wrapped.clear()
        self._wrapped[key] = (handler, wrapped)
        return wrapped

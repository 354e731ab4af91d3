"""Per-call client capability advertisement (RFC "Capability advertisement is per eligible modern call").

Rule: a modern (2026-07-28) ``tools/call`` whose caller installed a form handler carries
``{"elicitation": {"form": {}}}`` in ``_meta["io.modelcontextprotocol/clientCapabilities"]`` on every
leg; every other request (``server/discover``, ``tools/list``, a call without a handler) advertises no
elicitation, a legacy ``initialize`` advertises none (the session is built without an
``elicitation_callback``), and URL mode is never advertised.

Why a hook: the ``mcp`` 2.3.0 SDK stamps the *session's* capabilities on every modern request,
after any caller ``meta=`` (``ClientSession._make_modern_stamp`` in the SDK), so per-call
capabilities cannot be passed through the public API. The provider builds its sessions over
:class:`services.mcp_provider.connection.MakaDispatcher`, a ``JSONRPCDispatcher`` subclass whose
``send_raw_request`` (a public ``Dispatcher`` method the session awaits in the caller's task) passes
the already-stamped params through :func:`apply_call_capabilities`. The per-call claim travels in a
:class:`contextvars.ContextVar`, so concurrent calls on one session never see each other's claim.
``tests/services/mcp_provider/test_capabilities.py`` fails loudly if the SDK stops calling
``send_raw_request`` with stamped params.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY

_form_call: contextvars.ContextVar[bool] = contextvars.ContextVar("maka_mcp_form_call", default=False)


@contextmanager
def form_call(enabled: bool) -> Iterator[None]:
    """Within this block, ``tools/call`` requests sent from this task advertise form elicitation iff ``enabled``."""
    token = _form_call.set(enabled)
    try:
        yield
    finally:
        _form_call.reset(token)


def apply_call_capabilities(method: str, params: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Return ``params`` with this call's client capabilities in ``_meta`` (a new dict when changed).

    Only requests that already carry the modern ``clientCapabilities`` stamp are touched (a legacy
    request has none, so legacy traffic passes through unchanged). ``elicitation`` is removed from
    every request, then ``{"form": {}}`` is added back for a ``tools/call`` inside
    :func:`form_call` ``(True)``. Other capabilities pass through unchanged.
    """
    if params is None:
        return None
    meta = params.get("_meta")
    if not isinstance(meta, Mapping) or CLIENT_CAPABILITIES_META_KEY not in meta:
        return params
    current = meta[CLIENT_CAPABILITIES_META_KEY]
    capabilities: dict[str, Any] = dict(current) if isinstance(current, Mapping) else {}
    capabilities.pop("elicitation", None)
    if method == "tools/call" and _form_call.get():
        capabilities["elicitation"] = {"form": {}}
    new_meta = {**meta, CLIENT_CAPABILITIES_META_KEY: capabilities}
    return {**params, "_meta": new_meta}

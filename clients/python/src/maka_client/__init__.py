"""Maka Runtime client for Python (asyncio, typed).

Callers (agent runtimes) use :class:`BrokerClient`: ``call_tool()`` yields typed events and a final
outcome and survives L7 proxies and reconnects; ``stop()``, ``list_tools()``, ``watch_tools()``, ``watch_call()``.
Surfaces use :class:`SurfaceClient`: ``attach()``, ``pending()``, ``get()``, ``answer()``,
``list_surfaces()``. Every reconnecting stream resumes after its last token with one jittered backoff. Wire rules:
docs/clients.md.
"""

from maka_client._channel import TlsOptions
from maka_client._codes import BrokerErrorReason, ClientErrorReason, ErrorReason, FailureCode, InteractionErrorReason
from maka_client._errors import MakaError
from maka_client._resume import resumable
from maka_client.broker import BrokerClient, HostStatus, ReattachPolicy, ToolCall, ToolInfo, ToolListing
from maka_client.events import (
    Accepted,
    Action,
    AwaitingInteraction,
    CallEvent,
    Failure,
    InteractionSettled,
    Lost,
    Outcome,
    Phase,
    Progress,
    Reattaching,
    Result,
    Status,
    Stopped,
)
from maka_client.surface import (
    ALL_HOSTS,
    AnsweredBy,
    AttachedSurface,
    Form,
    FormAnswered,
    FormClosed,
    FormDeliveryRecorded,
    FormEvent,
    FormField,
    FormOpened,
    FormSnapshot,
    HistoryEntry,
    HistoryPage,
    SurfaceClient,
)

__all__ = [
    "ALL_HOSTS",
    "Accepted",
    "Action",
    "AnsweredBy",
    "AttachedSurface",
    "AwaitingInteraction",
    "BrokerClient",
    "BrokerErrorReason",
    "CallEvent",
    "ClientErrorReason",
    "ErrorReason",
    "Failure",
    "FailureCode",
    "Form",
    "FormAnswered",
    "FormClosed",
    "FormDeliveryRecorded",
    "FormEvent",
    "FormField",
    "FormOpened",
    "FormSnapshot",
    "HistoryEntry",
    "HistoryPage",
    "HostStatus",
    "InteractionErrorReason",
    "InteractionSettled",
    "Lost",
    "MakaError",
    "Outcome",
    "Phase",
    "Progress",
    "ReattachPolicy",
    "Reattaching",
    "Result",
    "Status",
    "Stopped",
    "SurfaceClient",
    "TlsOptions",
    "ToolCall",
    "ToolInfo",
    "ToolListing",
    "resumable",
]

"""MCP provider service: live MCP connections through the official ``mcp`` SDK, registered with the
Capability broker as Client Capability providers (docs/design.md#mcp-provider).

- :mod:`.config` — the ``mcpServers`` file (``command``/``args``/``env``/``cwd`` or ``url``/``headers``,
  plus ``era``): :func:`~.config.load_config`, :func:`~.config.parse_config`.
- :mod:`.connection` — :class:`~.connection.McpConnection`: one server, era negotiation, Tool
  listing and refresh, connection/tool generations, reconnect with backoff; the SDK workarounds.
- :mod:`.capabilities` — per-call client capability advertisement (form elicitation only on modern
  ``tools/call`` legs that have a form handler).
- :mod:`.manager` — :class:`~.manager.McpClientManager`: ``call_tool`` runs the manual MRTR loop
  (:func:`~.manager.drive_input_required`).
- :mod:`.broker_link` — :class:`~.broker_link.BrokerLink`: one broker ``Connect`` stream per MCP server.
- :mod:`.provider` — :class:`~.provider.McpProvider`: every link over one broker channel, and the status report.
- :mod:`.errors` — :class:`~.errors.McpToolCallError` with stable :class:`~.errors.CallErrorCode`.
- :mod:`.main` — ``python -m services.mcp_provider.main``; ``build(settings)`` → ``ProviderApp``
  (``.manager``, ``.provider``).
"""

import os

# The provider starts stdio MCP servers by fork + exec while gRPC's threads run. gRPC's fork handlers are for
# children that go on using gRPC; in a child that only execs they can abort it before the exec ("Check failed:
# next_worker->state == KICKED", seen once under load: that server's connection failed and was retried). Off
# unless the operator sets it (read when gRPC initialises, so before anything imports grpc).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

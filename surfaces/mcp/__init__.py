"""The MCP front door: the Host's Tools served over MCP Streamable HTTP (docs/mcp-front-door.md).

A caller of the broker like ``maka call``: ``tools/list`` lists the broker's Tools under MCP Tool names
(:mod:`surfaces.mcp.tools`), ``tools/call`` runs one broker call (:mod:`surfaces.mcp.calls`) while its forms wait
on Maka's surfaces. :mod:`surfaces.mcp.server` builds the SDK server, :mod:`surfaces.mcp.main` runs it.
"""

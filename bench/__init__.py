"""The Maka benchmark (``make bench`` = ``python -m bench.run``): the stack against the official SDK's
auto-loop, side by side on the same example MCP server, plus a 10,000-pending-forms scale run.

See ``bench/README.md`` for what is measured, how, and the targets.
"""

#!/usr/bin/env bash
# `make setup`: idempotent. Installs the Debian packages the tests and `make run` need (when
# missing, as root), the Python venv with every pinned dependency, and the Node 22 tools folder
# for the MCP conformance harness.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${need_apt[*]} (apt)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install: sudo apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q -e '.[dev]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import maka.form.v1.form_pb2, services, surfaces' || { echo "setup: venv install failed" >&2; exit 1; }

if [ -x scripts/setup_node_tools.sh ]; then
  scripts/setup_node_tools.sh
fi
# The polyglot Node.js surface (examples/polyglot): its pinned npm dependencies, when npm is present.
if command -v npm >/dev/null 2>&1 && [ ! -d examples/polyglot/node_modules/@grpc/grpc-js ]; then
  (cd examples/polyglot && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup: ok"

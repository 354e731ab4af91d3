#!/usr/bin/env bash
# Installs the Node tools of the MCP conformance suite into .tools/ (git-ignored). Idempotent and
# quick when everything is already there (no network then). Called by `scripts/setup.sh --test`
# (`make setup-node`, a step of every test target); installs Debian's npm with apt as root when missing.
#
#   .tools/node22/            Node 22 (npm package node-linux-<arch>@22, the binary is inside it);
#   .tools/bin/node22         a symlink to that binary. The harness needs Node >= 22.
#   .tools/conformance/       @modelcontextprotocol/conformance@0.2.0-alpha.12 (the official harness)
#   .tools/server-everything/ @modelcontextprotocol/server-everything (legacy-era stdio peer)
#   .tools/mcp-clients/       @modelcontextprotocol/sdk (the TypeScript SDK client) and
#                             @modelcontextprotocol/inspector (its --cli mode): the front door's client tests
#
# Override the pinned versions with MAKA_CONFORMANCE_VERSION / MAKA_SERVER_EVERYTHING_VERSION /
# MAKA_TS_SDK_VERSION / MAKA_INSPECTOR_VERSION.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=.tools
case "$(uname -m)" in
  x86_64 | amd64) NODE_ARCH=x64 ;;
  aarch64 | arm64) NODE_ARCH=arm64 ;;
  *) echo "setup_node_tools: unsupported machine $(uname -m) (need x86_64 or aarch64)" >&2; exit 1 ;;
esac
NODE22_DIR=$TOOLS/node22
NODE22_BIN_DIR=$NODE22_DIR/node_modules/node-linux-$NODE_ARCH/bin
CONFORMANCE_VERSION=${MAKA_CONFORMANCE_VERSION:-0.2.0-alpha.12}
EVERYTHING_VERSION=${MAKA_SERVER_EVERYTHING_VERSION:-2026.8.31}
TS_SDK_VERSION=${MAKA_TS_SDK_VERSION:-1.32.2}
INSPECTOR_VERSION=${MAKA_INSPECTOR_VERSION:-2.12.0}

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup_node_tools: installing npm (apt)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  else
    echo "setup_node_tools: npm is missing: sudo apt-get install npm (or install Node.js >= 20 with npm)" >&2
    exit 1
  fi
fi
mkdir -p "$TOOLS"

installed_version() { # <prefix> <package> -> prints the installed version or nothing
  local manifest="$1/node_modules/$2/package.json"
  [ -f "$manifest" ] && sed -n 's/^ *"version": "\(.*\)",$/\1/p' "$manifest" | head -n1
  return 0
}

# 1. Node 22 (the binary ships inside the npm package; installed with the system npm).
if ! [ -x "$NODE22_BIN_DIR/node" ] || ! "$NODE22_BIN_DIR/node" --version 2>/dev/null | grep -q '^v22\.'; then
  echo "setup_node_tools: installing Node 22 into $NODE22_DIR"
  npm install --prefix "$NODE22_DIR" --no-audit --no-fund --loglevel=error "node-linux-$NODE_ARCH@22" >/dev/null
fi
"$NODE22_BIN_DIR/node" --version | grep -q '^v22\.' || { echo "setup_node_tools: Node 22 install failed" >&2; exit 1; }
mkdir -p "$TOOLS/bin"
ln -sfn "../node22/node_modules/node-linux-$NODE_ARCH/bin/node" "$TOOLS/bin/node22"

# npm itself runs on whichever `node` is first on PATH: use Node 22 so engine checks pass.
export PATH="$PWD/$NODE22_BIN_DIR:$PATH"

# 2. The conformance harness.
if [ "$(installed_version "$TOOLS/conformance" @modelcontextprotocol/conformance)" != "$CONFORMANCE_VERSION" ]; then
  echo "setup_node_tools: installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION"
  npm install --prefix "$TOOLS/conformance" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" >/dev/null
fi

# 3. The legacy-era peer.
if [ "$(installed_version "$TOOLS/server-everything" @modelcontextprotocol/server-everything)" != "$EVERYTHING_VERSION" ]; then
  echo "setup_node_tools: installing @modelcontextprotocol/server-everything@$EVERYTHING_VERSION"
  npm install --prefix "$TOOLS/server-everything" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" >/dev/null
fi

# 4. The front door's other real clients (tests/surfaces/mcp/test_real_clients.py).
if [ "$(installed_version "$TOOLS/mcp-clients" @modelcontextprotocol/sdk)" != "$TS_SDK_VERSION" ] ||
  [ "$(installed_version "$TOOLS/mcp-clients" @modelcontextprotocol/inspector)" != "$INSPECTOR_VERSION" ]; then
  echo "setup_node_tools: installing @modelcontextprotocol/sdk@$TS_SDK_VERSION, @modelcontextprotocol/inspector@$INSPECTOR_VERSION"
  npm install --prefix "$TOOLS/mcp-clients" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/sdk@$TS_SDK_VERSION" "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >/dev/null
fi

echo "setup_node_tools: ok (node $("$NODE22_BIN_DIR/node" --version), conformance $CONFORMANCE_VERSION, server-everything $EVERYTHING_VERSION, sdk $TS_SDK_VERSION, inspector $INSPECTOR_VERSION)"

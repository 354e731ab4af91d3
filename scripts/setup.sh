#!/usr/bin/env bash
# Idempotent setup, quick when everything is already there.
#
#   scripts/setup.sh          `make setup` / `make run`: the Debian packages the stack needs
#                             (redis-server; python3-venv when `python3 -m venv` cannot work) and the
#                             Python venv with what running needs (the project's dependencies only).
#   scripts/setup.sh --dev    `make setup-dev` (lint, gen, bench and every test target): the same plus
#                             the `dev` extra (pytest, mypy, ruff, buf, Playwright, matplotlib ...).
#   scripts/setup.sh --test   `make setup-node` (every test target): what only the tests need -
#                             chromium, tmux and nginx (apt), npm (Debian's, when missing), the Node 22 tools
#                             of the MCP conformance harness (scripts/setup_node_tools.sh) and the
#                             polyglot example's npm dependencies, the TypeScript client (npm ci + build).
#
# Missing apt packages are installed when running as root; otherwise the script names them and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=run
case "${1:-}" in
  "") ;;
  --test) MODE=test ;;
  --dev) MODE=dev ;;
  *) echo "usage: scripts/setup.sh [--dev|--test]" >&2; exit 2 ;;
esac

apt_updated=
apt_install() { # <package>... : install with apt as root, or say how and stop
  if [ "$(id -u)" != 0 ]; then
    echo "setup: please install: sudo apt-get install $*" >&2
    exit 1
  fi
  echo "setup: installing $* (apt)"
  if [ -z "$apt_updated" ]; then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pip_install() { # <lock> <spec> <what> : the lock's exact pins, then <spec> itself (editable, no other deps);
  # one progress line per package, not a silent wait. The locks are scripts/lock.py's (`make lock`).
  echo "setup: installing $3 into .venv (pip${1:+, pinned by $1}; the first time takes a minute or two)"
  if [ -n "$1" ]; then
    .venv/bin/python -m pip install --disable-pip-version-check -r "$1" 2>&1 \
      | grep -E '^(Collecting|Successfully installed|ERROR)' | sed -e 's/^/setup:   /' || true
  fi
  .venv/bin/python -m pip install --disable-pip-version-check --no-deps -e "$2" 2>&1 \
    | grep -E '^(Successfully installed|ERROR)' | sed -e 's/^/setup:   /' || true
}

if [ "$MODE" = dev ]; then
  pip_install requirements/dev.lock '.[dev]' "the development and test tools"
  .venv/bin/python -c 'import pytest, mypy' || { echo "setup: dev install failed" >&2; exit 1; }
  echo "setup: dev tools ok"
  exit 0
fi

if [ "$MODE" = test ]; then
  need_apt=()
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
  # kubectl (its built-in kustomize renders deploy/k8s for the offline manifest tests).
  command -v kubectl >/dev/null 2>&1 || need_apt+=(kubectl)
  command -v npm >/dev/null 2>&1 || need_apt+=(npm)
  if [ ${#need_apt[@]} -gt 0 ]; then
    apt_install "${need_apt[@]}"
  fi
  # nginx: the real h2c gRPC proxy of the client tests (tests/clients) and the TLS-terminating proxy of
  # the web-replica tests. Its
  # package must not start its own service (port 80): policy-rc.d refuses that during the install.
  if [ ! -x /usr/sbin/nginx ]; then
    made_policy=
    if [ "$(id -u)" = 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod +x /usr/sbin/policy-rc.d
      made_policy=1
    fi
    apt_install nginx
    [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
  fi
  scripts/setup_node_tools.sh
  # The TypeScript client (clients/typescript): its pinned npm dependencies (which include the type
  # generator `make gen` runs) and its build into dist/ (git-ignored), run by the client tests with Node 22.
  if [ ! -d clients/typescript/node_modules/@grpc/grpc-js ] || [ ! -x clients/typescript/node_modules/.bin/tsc ]; then
    (cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error)
  fi
  (cd clients/typescript && ../../.tools/bin/node22 node_modules/typescript/bin/tsc -p tsconfig.json)
  # The polyglot Node.js examples (examples/polyglot): they link the TypeScript client (file: dependency).
  if [ ! -e examples/polyglot/node_modules/@maka/client ]; then
    (cd examples/polyglot && npm ci --no-audit --no-fund --loglevel=error)
  fi
  echo "setup: test tools ok"
  exit 0
fi

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
if [ ! -x .venv/bin/python ] && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  need_apt+=(python3-venv) # Debian splits `python3 -m venv` (ensurepip) into python3-venv
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  apt_install "${need_apt[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  if ! python3 -m venv .venv; then
    rm -rf .venv
    apt_install python3-venv
    python3 -m venv .venv
  fi
fi
echo "setup: checking the Python packages"
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
pip_install requirements/run.lock . "what running needs"
# The Python client library (clients/python, import name maka_client): the CLI and the bench use it.
pip_install "" clients/python "the Python client library (maka_client; its dependencies are in the run lock)"
.venv/bin/python -c 'import maka.form.v1.form_pb2, maka_client, services, stack, surfaces' || { echo "setup: venv install failed" >&2; exit 1; }
echo "setup: ok"

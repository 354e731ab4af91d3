#!/usr/bin/env bash
# Idempotent setup, quick when everything is already there.
#
#   scripts/setup.sh          `make setup` / `make run`: the Debian packages the stack needs
#                             (redis-server; python3-venv when `python3 -m venv` cannot work) and the
#                             Python venv with what running needs (the project's dependencies only),
#                             on the newest supported CPython found (see choose_python below).
#   scripts/setup.sh --dev    `make setup-dev` (lint, gen, bench and every test target): the same plus
#                             the `dev` extra (pytest, mypy, ruff, buf, Playwright, matplotlib ...).
#   scripts/setup.sh --test   `make setup-node` (every test target): what only the tests need -
#                             chromium, tmux and nginx (apt), npm (Debian's, when missing), the Node 22 tools
#                             of the MCP conformance harness (scripts/setup_node_tools.sh) and the
#                             polyglot example's npm dependencies, the TypeScript client (npm ci + build).
#   scripts/setup.sh --which-python   the interpreter `make setup` would build .venv on (nothing installed).
#
# Missing apt packages are installed when running as root; otherwise the script names them and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=run
case "${1:-}" in
  "") ;;
  --test) MODE=test ;;
  --dev) MODE=dev ;;
  --which-python) MODE=which ;;
  *) echo "usage: scripts/setup.sh [--dev|--test|--which-python]" >&2; exit 2 ;;
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
  # The local-only stack's test (tests/stack/test_access.py) probes the stack as another local user: curl
  # (HTTP, HTTP/2 gRPC, unix sockets), useradd (passwd) and runuser (util-linux); the user is made there.
  command -v curl >/dev/null 2>&1 || need_apt+=(curl)
  command -v useradd >/dev/null 2>&1 || need_apt+=(passwd)
  command -v runuser >/dev/null 2>&1 || need_apt+=(util-linux)
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
  # promtool (Debian's prometheus package): `promtool check rules` / `test rules` on the alerts of
  # deploy/k8s/components/monitoring (tests/deploy). Like nginx's, the package's own server is not started.
  if ! command -v promtool >/dev/null 2>&1; then
    made_policy=
    if [ "$(id -u)" = 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod +x /usr/sbin/policy-rc.d
      made_policy=1
    fi
    apt_install --no-install-recommends prometheus
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

# The interpreter of .venv: MAKA_PYTHON=/path when set; otherwise the newest supported CPython found,
# 3.13, then 3.12, then 3.11 (requires-python in pyproject.toml; the locks hold for each): for each
# version `python3.X` on PATH, then pyenv's installs ($PYENV_ROOT, else ~/.pyenv: versions/3.X.*, the newest
# patch first), then `python3` when it is that version. A pyenv shim of a version that is not activated
# fails to run and is skipped.
SUPPORTED_MINORS="13 12 11"
python_version_of() { # <python> : print "3.X.Y <sys.executable>" when it runs and is a supported CPython
  "$1" -c 'import sys; v = sys.version_info
assert sys.implementation.name == "cpython" and (3, 11) <= v[:2] < (3, 14)
print("%d.%d.%d %s" % (v[0], v[1], v[2], sys.executable))' 2>/dev/null
}
chosen_version= chosen_python=
choose_python() { # sets chosen_version and chosen_python, or leaves them empty
  local found minor candidate
  if [ -n "${MAKA_PYTHON:-}" ]; then
    found=$(python_version_of "$MAKA_PYTHON") || {
      echo "setup: MAKA_PYTHON=$MAKA_PYTHON is not a CPython 3.11, 3.12 or 3.13" >&2
      exit 1
    }
    chosen_version=${found%% *} chosen_python=${found#* }
    return
  fi
  local pyenv_versions="${PYENV_ROOT:-$HOME/.pyenv}/versions"
  for minor in $SUPPORTED_MINORS; do
    local candidates=()
    if command -v "python3.$minor" >/dev/null 2>&1; then candidates+=("$(command -v "python3.$minor")"); fi
    if [ -d "$pyenv_versions" ]; then
      while IFS= read -r candidate; do
        [ -n "$candidate" ] && candidates+=("$pyenv_versions/$candidate/bin/python3.$minor")
      done < <(ls "$pyenv_versions" | grep -E "^3\.$minor\.[0-9]+$" | sort -t. -k3,3nr)
    fi
    if command -v python3 >/dev/null 2>&1; then candidates+=("$(command -v python3)"); fi
    for candidate in "${candidates[@]}"; do
      found=$(python_version_of "$candidate") || continue
      case "$found" in
        "3.$minor."*) chosen_version=${found%% *} chosen_python=${found#* }; return ;;
      esac
    done
  done
}

if [ "$MODE" = which ]; then
  choose_python
  [ -n "$chosen_python" ] || { echo "setup: no CPython 3.11, 3.12 or 3.13 found" >&2; exit 1; }
  echo "setup: Python $chosen_version ($chosen_python)"
  exit 0
fi

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
choose_python
if [ -z "$chosen_python" ]; then
  if command -v python3 >/dev/null 2>&1; then
    echo "setup: no CPython 3.11, 3.12 or 3.13 found (python3 is $(python3 --version 2>&1)); install one, or set MAKA_PYTHON=/path" >&2
    exit 1
  fi
  need_apt+=(python3)
fi
# Debian splits `python3 -m venv` (ensurepip) into python3-venv, or python3.X-venv for a Python that is not
# the distribution's default python3. pyenv's builds carry ensurepip.
venv_package() {
  local minor=${chosen_version#3.}
  minor=${minor%%.*}
  if [ -z "$chosen_python" ] || [ "$(readlink -f "$chosen_python")" = "$(readlink -f /usr/bin/python3 2>/dev/null)" ]; then
    echo python3-venv
  else
    echo "python3.$minor-venv"
  fi
}
if [ -n "$chosen_python" ] && ! "$chosen_python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  need_apt+=("$(venv_package)")
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  apt_install "${need_apt[@]}"
fi
if [ -z "$chosen_python" ]; then
  choose_python
  [ -n "$chosen_python" ] || { echo "setup: the installed python3 is not 3.11, 3.12 or 3.13" >&2; exit 1; }
fi
echo "setup: Python $chosen_version ($chosen_python)"

# An existing .venv on another Python version (X.Y) than the chosen one is recreated, and setup says so
# (MAKA_PYTHON=/path/to/its/python keeps it); a patch release of the same version keeps it.
if [ -x .venv/bin/python ] || [ -e .venv ]; then
  venv_found=$(python_version_of .venv/bin/python || true)
  venv_version=${venv_found%% *}
  if [ "${venv_version%.*}" != "${chosen_version%.*}" ]; then
    echo "setup: .venv is Python ${venv_version:-unusable}: recreating it on Python $chosen_version"
    rm -rf .venv
  fi
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$chosen_python" -m venv .venv; then
    rm -rf .venv
    apt_install "$(venv_package)"
    "$chosen_python" -m venv .venv
  fi
fi
echo "setup: checking the Python packages"
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
pip_install requirements/run.lock . "what running needs"
# The Python client library (clients/python, import name maka_client): the CLI and the bench use it.
pip_install "" clients/python "the Python client library (maka_client; its dependencies are in the run lock)"
.venv/bin/python -c 'import maka.form.v1.form_pb2, maka_client, services, stack, surfaces' || { echo "setup: venv install failed" >&2; exit 1; }
echo "setup: ok"

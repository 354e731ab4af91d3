# Maka Runtime — the two commands a user needs are `make run` and `make test`.
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
DEV_STAMP := $(VENV)/.dev-stamp
PYTEST := $(PY) -m pytest

.PHONY: setup setup-dev setup-node gen check-gen lint lock test test-fast run bench scale faults conformance e2e browser compose-smoke clean

# `make setup` (and `make run`): apt redis-server (+ python3-venv when needed) and the Python venv, on the
# newest CPython found (3.13, 3.12, then 3.11; MAKA_PYTHON=/path/to/python chooses).
setup: $(STAMP)

$(STAMP): pyproject.toml requirements/run.lock scripts/setup.sh
	scripts/setup.sh
	touch $(STAMP)

# The dev extra (pytest, mypy, ruff, buf, Playwright, ...): lint, gen, bench and the tests; not `make run`.
setup-dev: $(DEV_STAMP)

$(DEV_STAMP): $(STAMP) requirements/dev.lock
	scripts/setup.sh --dev
	touch $(DEV_STAMP)

# What only the tests need: chromium, tmux, npm (apt), Node 22 + the MCP conformance harness, the
# polyglot example's npm packages. Idempotent and quick (no network) once installed.
setup-node: setup-dev
	scripts/setup.sh --test

# gen/ (Python), the Python client's stubs, the TypeScript client's protos and generated types (its
# generator is an npm package: setup-node installs it).
gen: setup-node
	$(PY) scripts/gen_protos.py

check-gen: setup-node
	$(PY) scripts/gen_protos.py --check

# The web page's ES modules are type-checked by the TypeScript client's tsc (strict, unused names, implicit
# returns: surfaces/web/tsconfig.json), which setup-node installs.
lint: setup-node
	.tools/bin/node22 clients/typescript/node_modules/typescript/bin/tsc -p surfaces/web/tsconfig.json
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --python-version 3.11
	$(VENV)/bin/lint-imports --no-cache
	cd protos && ../$(VENV)/bin/buf lint && ../$(VENV)/bin/buf format --exit-code > /dev/null
	$(PY) -m scripts.lock --check
	$(PY) -m scripts.dead_code

# Re-resolve requirements/{run,dev,build}.lock after editing pyproject.toml's dependencies or build requirements
# (needs the index).
lock: setup-dev
	$(PY) -m scripts.lock --write

# The whole suite, as CI runs it: lint, gen drift, then every test (unit, service, e2e, browser,
# faults, conformance), each in exactly one bucket. Slow suites are marked, never skipped. Unit and
# service tests on two workers; e2e and faults on two workers a file at a time (--dist loadfile: a
# module's shared stack starts once, in one worker); then `serial` tests alone; browser and
# conformance alone; last the `containers` bucket, `make compose-smoke` as a test, alone
# (docs/development.md#how-make-test-runs-the-suite).
E2E := (e2e or faults) and not browser and not conformance and not containers
test: setup-node lint check-gen
	$(PYTEST) -m "not e2e and not browser and not faults and not conformance and not serial and not containers" -n 2
	$(PYTEST) -m "$(E2E) and not serial" -n 2 --dist loadfile
	$(PYTEST) -m "serial and not browser and not conformance and not containers"
	$(PYTEST) -m "browser and not containers"
	$(PYTEST) -m "conformance and not browser and not containers"
	$(PYTEST) -m "containers"

test-fast: setup-node
	$(PYTEST) -m "not e2e and not browser and not faults and not conformance and not slow and not containers" -n 2

e2e: setup-node
	$(PYTEST) -m e2e

browser: setup-node
	$(PYTEST) -m browser

faults: setup-node
	$(PYTEST) -m faults

conformance: setup-node
	$(PYTEST) -m conformance

# PORTS=web=P,mcp=P when 8765/8766 are taken (PORTS=ephemeral or naming interaction, broker, provider puts the
# gRPC services on loopback TCP, each requiring the stack's token, instead of unix sockets in .state);
# UP_ARGS passes any other `maka up` option (e.g. UP_ARGS='--state-dir /tmp/maka -v').
run: setup
	$(VENV)/bin/maka up --config examples/mcp.json $(if $(PORTS),--ports $(PORTS)) $(UP_ARGS)

bench: setup-dev
	$(PY) -m bench.run $(BENCH_ARGS)

# The Kubernetes topology as processes on one machine (3 Hosts, 2 Interaction replicas, Redis, 2 web
# replicas behind TLS nginx) with faults injected, then a rollout of the Host pool (rolling update, node
# drain, scale-in) while people answer (each drain lasts until its slowest person answered: expect
# about half an hour, an estimate); writes bench/results/scale.{json,md}.
# SCALE_ARGS=--small is the variant `make test` runs (tests/bench/test_scale_topology.py).
scale: setup-node
	$(PY) -m bench.scale_topology $(SCALE_ARGS)

# The Dockerfile and docker-compose.yml built and run for real under Podman, as root (deploy/README.md
# "The compose smoke"): installs podman, runc, debootstrap (apt) and podman-compose (.tools/podman-compose),
# builds a Debian trixie base with debootstrap (kept between runs on this machine), the image on it and local
# Redis and nginx images, brings the whole file up and checks it from outside; one line per check, then
# `N passed, N failed`. SMOKE_ARGS=--keep leaves it running; MAKA_SMOKE_BASE=python:3.13-slim@... builds on a
# pulled base instead.
compose-smoke: setup-node
	$(PY) -m scripts.compose_smoke $(SMOKE_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

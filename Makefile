# baton: `make demo` and `make test` are the two commands a newcomer needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
AGENTS_STAMP := agents/node_modules/.package-lock.json
REFERENCE_STAMP := bench/reference/node_modules/.package-lock.json
PYTEST_ARGS ?=
ONLY ?=

.PHONY: setup test lint types pytest postgres-deps bwrap chromium demo bench clean constraints

# Everything the test suite needs on a fresh Debian machine (as root the missing system packages
# are installed): the venv with the `test` extra (moto's S3 server included), the pinned agents,
# bwrap, Chromium (the web app's browser tests) and Postgres's binaries. The tests start their
# own Postgres and S3 servers.
setup: $(STAMP) $(AGENTS_STAMP) $(REFERENCE_STAMP) bwrap chromium postgres-deps

# Debian's python3 makes no venv without its python3-venv package (ensurepip is left out).
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { [ "$$(id -u)" = 0 ] && rm -rf $(VENV) && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv && \
		$(PYTHON) -m venv $(VENV); } || { echo "setup: install Debian's python3-venv to create .venv" >&2; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

# Subprocess agents (codex-acp …), pinned in agents/package-lock.json, installed into
# agents/node_modules (docs/agents.md). As root on a machine without npm, Debian's npm first.
$(AGENTS_STAMP): agents/package.json agents/package-lock.json
	@command -v npm >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm; } || \
		{ echo "setup: install node and npm to install the pinned agents" >&2; exit 1; }
	# `npm ci` refuses this lock (npm 11 leaves opencode's other-platform optional packages
	# out of it); `npm install` installs exactly the locked versions and leaves the lock as is.
	npm install --prefix agents --no-audit --no-fund --loglevel=error
	! git rev-parse --git-dir >/dev/null 2>&1 || git diff --quiet -- agents/package-lock.json || { echo "setup: npm changed agents/package-lock.json" >&2; exit 1; }
	touch $(AGENTS_STAMP)

# The TypeScript reference `make bench` runs side by side (bench/_reference.py), pinned. Its
# install scripts are not run: the benchmarks call its code, never its agents' binaries.
$(REFERENCE_STAMP): bench/reference/package.json bench/reference/package-lock.json
	@command -v npm >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm; } || \
		{ echo "setup: install node and npm to install the benchmarks' reference" >&2; exit 1; }
	npm install --prefix bench/reference --ignore-scripts --no-audit --no-fund --loglevel=error
	! git rev-parse --git-dir >/dev/null 2>&1 || git diff --quiet -- bench/reference/package-lock.json || { echo "setup: npm changed bench/reference/package-lock.json" >&2; exit 1; }
	touch $(REFERENCE_STAMP)

# baton contains every agent with bubblewrap (docs/sandbox.md; without it: containment_unavailable),
# and Codex runs every command in a bubblewrap sandbox of its own.
bwrap:
	@if command -v bwrap >/dev/null 2>&1 && command -v curl >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap curl; \
	else echo "bwrap: install Debian's bubblewrap package (baton contains agents with it; codex needs it)" >&2; exit 1; fi

# The web app's tests (tests/web) drive Debian's Chromium through Playwright's executable_path;
# Playwright never downloads a browser.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	else echo "chromium: install Debian's chromium package (the web app's browser tests drive it)" >&2; exit 1; fi

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

types: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest $(PYTEST_ARGS)

# The store tests start their own Postgres server (src/baton/testing/postgres.py); they need
# its binaries. As root (CI: a fresh Debian machine) install Debian's package when missing.
postgres-deps:
	@if [ -n "$$BATON_PG_BIN" ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; \
	else echo "postgres-deps: install Debian's postgresql package (or set BATON_PG_BIN)" >&2; exit 1; fi

# CI runs every fast test and a bounded sample of the slow ones (see tests/conftest.py).
test: lint types pytest

# The demo needs only the venv and the agents (no Postgres, no bwrap).
demo: $(STAMP) $(AGENTS_STAMP)
	$(BIN)/python -m baton.demo

bench: setup postgres-deps
	$(BIN)/python -m bench $(if $(ONLY),--only $(ONLY))

# Regenerate the pinned versions CI installs (on purpose, with a reviewable diff).
constraints: setup
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^-e' > constraints.txt

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache agents/node_modules bench/reference/node_modules

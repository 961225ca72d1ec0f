# Two entry points: `make demo` and `make test`. Both create .venv and install what they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint bench quality clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/toolscout demo --db demo.db

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/mypy

# the MCP gateway tests run the published reference servers and the Inspector CLI from
# npm, installed into .ci/node (git-ignored); npm itself is a system package
NODE := .ci/node
NODE_STAMP := $(NODE)/.installed-stamp
NPM_PACKAGES := @modelcontextprotocol/server-filesystem@2026.8.31 \
	@modelcontextprotocol/server-memory@2026.8.31 \
	@modelcontextprotocol/server-everything@2026.8.31 \
	@modelcontextprotocol/inspector-cli@1.0.3

# rebuilt when the package list (this file) changes
$(NODE_STAMP): Makefile
	@command -v npm >/dev/null 2>&1 || { echo "make test needs npm for the MCP gateway tests (Debian: apt-get install nodejs npm)" >&2; exit 1; }
	mkdir -p $(NODE) && printf '*\n' > $(NODE)/.gitignore
	npm install --prefix $(NODE) --no-audit --no-fund --loglevel=error $(NPM_PACKAGES)
	touch $(NODE_STAMP)

# the suite on a worker per core plus one (at most 4, tests/conftest.py; PYTEST_WORKERS=0 runs it in one process)
PYTEST_WORKERS ?= auto

# lint runs beside the suite, niced: it takes the cores the suite leaves idle (a cold mypy
# is ~55 s of CPU on one core) instead of a minute before it. Its output is printed when
# both are done, and make fails if either failed
test: $(STAMP) $(NODE_STAMP)
	@log=$$(mktemp); \
	nice -n 10 $(MAKE) --no-print-directory lint >$$log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS); tests=$$?; \
	wait $$lint; linted=$$?; \
	echo "---- make lint (run beside the tests)"; cat $$log; rm -f $$log; \
	if [ $$linted -ne 0 ]; then echo "make test: lint failed (above)" >&2; exit 1; fi; \
	exit $$tests

bench: $(STAMP)
	$(BIN)/python benchmarks/latency.py
	$(BIN)/python benchmarks/gateway.py

quality: $(STAMP)
	$(BIN)/python benchmarks/quality.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache

# ablate — developer entry points. `make test` and `make demo` work from a clean clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CLAUDE_VERSION := 2.1.332
CLAUDE_PREFIX := .cache/claude
CLAUDE_BIN := $(CLAUDE_PREFIX)/node_modules/@anthropic-ai/claude-code-linux-x64/claude
export ABLATE_CLAUDE_BIN := $(abspath $(CLAUDE_BIN))

.PHONY: all venv claude chromium lint typecheck unit e2e test demo examples bench clean

all: test

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

venv: $(BIN)/.installed

$(CLAUDE_BIN):
	mkdir -p $(CLAUDE_PREFIX)
	npm install --silent --no-audit --no-fund --prefix $(CLAUDE_PREFIX) @anthropic-ai/claude-code@$(CLAUDE_VERSION)
	test -x $(CLAUDE_BIN) && $(CLAUDE_BIN) --version

claude: $(CLAUDE_BIN)

# Debian's chromium opens report.html in the browser test (tests/test_report_browser.py); CI fails without it.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy ablate tests benchmarks

unit: venv
	$(BIN)/pytest -q -m "not e2e"

e2e: venv claude
	$(BIN)/pytest -q -m e2e

test: venv claude chromium lint typecheck
	$(BIN)/pytest -q

demo: venv claude
	$(BIN)/ablate demo

bench: venv claude
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .cache .mypy_cache .pytest_cache .ruff_cache build dist

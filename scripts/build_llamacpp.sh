#!/usr/bin/env bash
# Build the llama.cpp peer for `hexamer bench` (the `bench` extra): llama-cpp-python 0.3.36 from
# source, CPU only, tuned for this machine, plus an unpacked copy of its sdist in the hexamer cache
# so that hexamer finds llama.cpp's convert_hf_to_gguf.py (the wheel does not ship it).
#
#   scripts/build_llamacpp.sh                 # uses .venv/bin/python, builds with all cores
#   PYTHON=python3 JOBS=2 scripts/build_llamacpp.sh
#   SDIST=/path/to/llama_cpp_python-0.3.36.tar.gz scripts/build_llamacpp.sh   # offline
#
# Takes ~15 minutes on 2 cores. See docs/llamacpp.md.
set -euo pipefail

VERSION=0.3.36
PYTHON=${PYTHON:-.venv/bin/python}
JOBS=${JOBS:-$(nproc)}
CACHE=${HEXAMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hexamer}
SRC="$CACHE/llama_cpp_python-$VERSION"
LOG="$CACHE/llama_cpp_build.log"
mkdir -p "$CACHE"

if [[ -z "${SDIST:-}" ]]; then
  "$PYTHON" -m pip download --no-deps --no-binary :all: --dest "$CACHE" "llama-cpp-python==$VERSION"
  SDIST="$CACHE/llama_cpp_python-$VERSION.tar.gz"
fi
if [[ ! -f "$SRC/vendor/llama.cpp/convert_hf_to_gguf.py" ]]; then
  tar -xzf "$SDIST" -C "$CACHE"
fi

# Native CPU kernels (AVX2/AVX512/AVX512-BF16 where present), OpenMP threads; no examples, tools,
# server, tests or multimodal library: only libllama and ggml are needed by the Python bindings.
export CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_OPENMP=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL=$JOBS
echo "building llama-cpp-python $VERSION (log: $LOG) ..."
"$PYTHON" -m pip install -v "$SDIST" >"$LOG" 2>&1 || { tail -40 "$LOG"; exit 1; }
"$PYTHON" -c "import llama_cpp; print('llama.cpp', llama_cpp.__version__, llama_cpp.llama_print_system_info().decode())"
# the converter imports transformers (AutoConfig) and gguf-py's small dependencies (pyyaml, tqdm)
"$PYTHON" -m pip install --quiet "transformers>=4.56" "pyyaml>=5.1" "tqdm>=4.27"
echo "converter: $SRC/vendor/llama.cpp/convert_hf_to_gguf.py (found automatically under $CACHE;"
echo "elsewhere set HEXAMER_LLAMA_CPP_DIR=$SRC)"

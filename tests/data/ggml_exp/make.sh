#!/usr/bin/env bash
# Writes ggml_exp.f32 and ggml_rms_norm.f32 (README.md) from a llama.cpp build's libggml-cpu. Usage, from anywhere:
#
#   LLAMA=/tmp/llama-ref tests/data/ggml_exp/make.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
LLAMA="${LLAMA:-/tmp/llama-ref}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
g++ -O1 -std=c++17 "$here/ref_exp.cpp" -L"$LLAMA/build/bin" -lggml-cpu -lggml-base \
  -Wl,-rpath,"$LLAMA/build/bin" -o "$work/ref_exp"
"$work/ref_exp" "$here/ggml_exp.f32"
g++ -O1 -std=c++17 "$here/ref_rms_norm.cpp" -I"$LLAMA/ggml/include" -L"$LLAMA/build/bin" \
  -lggml -lggml-cpu -lggml-base -Wl,-rpath,"$LLAMA/build/bin" -o "$work/ref_rms_norm"
"$work/ref_rms_norm" "$here/ggml_rms_norm.f32"

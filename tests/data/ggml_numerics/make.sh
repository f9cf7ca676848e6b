#!/usr/bin/env bash
# Writes ggml_q8_0.f32, ggml_gelu.f16 and ggml_gelu_sweep.f32 (README.md) from a llama.cpp build's
# libggml-cpu. Usage, from anywhere:
#
#   LLAMA=/tmp/llama-ref tests/data/ggml_numerics/make.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
LLAMA="${LLAMA:-/tmp/llama-ref}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for prog in ref_q8_0 ref_gelu; do
  g++ -O1 -std=c++17 "$here/$prog.cpp" -I"$here" -I"$LLAMA/ggml/include" -L"$LLAMA/build/bin" \
    -lggml -lggml-cpu -lggml-base -Wl,-rpath,"$LLAMA/build/bin" -o "$work/$prog"
done
"$work/ref_q8_0" "$here/ggml_q8_0.f32"
"$work/ref_gelu" "$here/ggml_gelu.f16" "$here/ggml_gelu_sweep.f32"

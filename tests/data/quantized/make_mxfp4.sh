#!/usr/bin/env bash
# The MXFP4 case (README.md, "gpt-oss MXFP4"): make_gpt_oss_f32.py's f32 gpt-oss file, quantized by
# llama.cpp's llama-quantize as MXFP4_MOE (experts MXFP4, the other matrices Q8_0), and llama.cpp's
# logits of both files (the quantized one also one token per llama_decode). Usage, from anywhere:
#
#   LLAMA=/tmp/llama-ref tests/data/quantized/make_mxfp4.sh
#
# LLAMA is a llama.cpp checkout built on the CPU backend (build/bin has llama-quantize and
# libllama.so); PYTHON a python3 with numpy. Writes into this script's folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
LLAMA="${LLAMA:-/tmp/llama-ref}"
PYTHON="${PYTHON:-/usr/bin/python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

g++ -O1 -std=c++17 "$here/ref_logits.cpp" -I"$LLAMA/include" -I"$LLAMA/ggml/include" \
  -L"$LLAMA/build/bin" -lllama -Wl,-rpath,"$LLAMA/build/bin" -o "$work/ref_logits"
PYTHONPATH="$LLAMA/gguf-py" "$PYTHON" "$here/make_gpt_oss_f32.py" "$work/gpt-oss-f32.gguf"

toks=1,17,250,3,99,200,42,7,180,128,64,5,201,233,12,77  # ../gpt_oss's tokens (256 ids)
"$work/ref_logits" "$work/gpt-oss-f32.gguf" "$here/gpt-oss-f32.f32" "$toks"
"$LLAMA/build/bin/llama-quantize" "$work/gpt-oss-f32.gguf" "$here/gpt-oss-MXFP4_MOE.gguf" \
  MXFP4_MOE 1 >"$work/quantize.log" 2>&1
"$work/ref_logits" "$here/gpt-oss-MXFP4_MOE.gguf" "$here/gpt-oss-MXFP4_MOE.f32" "$toks"
"$work/ref_logits" "$here/gpt-oss-MXFP4_MOE.gguf" "$here/gpt-oss-MXFP4_MOE-one-by-one.f32" \
  "$toks" one-by-one

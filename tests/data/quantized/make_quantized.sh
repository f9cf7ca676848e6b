#!/usr/bin/env bash
# Quantizes each committed family fixture (and one 256-wide smollm3 file) to Q8_0 and Q4_K_M with
# llama.cpp's llama-quantize, and writes llama.cpp's logits of the f32 and of each quantized file
# (README.md): in one batch, and for the quantized files also one token per llama_decode. Usage, from anywhere:
#
#   LLAMA=/tmp/llama-ref tests/data/quantized/make_quantized.sh
#
# LLAMA is a llama.cpp checkout built on the CPU backend (build/bin has llama-quantize and
# libllama.so); PYTHON a python3 with numpy. Writes into this script's folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="$(cd "$here/.." && pwd)"
LLAMA="${LLAMA:-/tmp/llama-ref}"
PYTHON="${PYTHON:-/usr/bin/python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

g++ -O1 -std=c++17 "$here/ref_logits.cpp" -I"$LLAMA/include" -I"$LLAMA/ggml/include" \
  -L"$LLAMA/build/bin" -lllama -Wl,-rpath,"$LLAMA/build/bin" -o "$work/ref_logits"
PYTHONPATH="$LLAMA/gguf-py" "$PYTHON" "$here/make_smollm3_256.py" "$work/smollm3-256.gguf"

# name, f32 source, tokens (each below the file's vocabulary), llama-quantize's extra arguments.
# deepseek2's attn_k_b, ffn_down_exps and ffn_down_shexp rows are 16 values, which no quantized
# type holds (llama-quantize refuses Q8_0 without a fallback): they stay f32 in both files.
T300=1,17,250,3,99,290,42,7,280,128,64,5,201,233,12,77
T128=1,17,42,99,5,63,120,7,88,31,2,76,54,101,9,66
ds_keep="--tensor-type attn_k_b=f32 --tensor-type ffn_down_exps=f32"
ds_keep+=" --tensor-type ffn_down_shexp=f32"
cases=(
  "phi3 $data/phi3/phi3_tiny.gguf $T300"
  "gemma3 $data/layer_kinds/gemma3-tiny.gguf $T128"
  "smollm3 $data/layer_kinds/smollm3-tiny.gguf $T128"
  "deepseek2 $data/deepseek2/split_tiny.gguf $T300 $ds_keep"
  "smollm3-256 $work/smollm3-256.gguf $T128"
)
for c in "${cases[@]}"; do
  read -r name src toks extra <<<"$c"
  "$work/ref_logits" "$src" "$here/$name-f32.f32" "$toks"
  for q in Q8_0 Q4_K_M; do
    # shellcheck disable=SC2086 # extra is a list of arguments
    "$LLAMA/build/bin/llama-quantize" ${extra:-} "$src" "$here/$name-$q.gguf" "$q" 1 >"$work/$name-$q.log" 2>&1
    "$work/ref_logits" "$here/$name-$q.gguf" "$here/$name-$q.f32" "$toks"
    "$work/ref_logits" "$here/$name-$q.gguf" "$here/$name-$q-one-by-one.f32" "$toks" one-by-one
  done
done

#!/usr/bin/env bash
# `make eval`: the evaluation suite (kamera eval) on the real models in ../shared/models (when
# present) and on the tiny synthetic preset of each attention family, then the report
# (kamera report) in docs/report/. SUITE=smoke for the short CI-sized run.
set -euo pipefail
build=${1:-build}
suite=${SUITE:-all}
threads=${THREADS:-2}
k="$build/bin/kamera"
root="$(cd "$(dirname "$0")/.." && pwd)"
models="$build/eval-models"
results="${RESULTS:-results}"
cd "$root"
mkdir -p "$models" "$results"

inputs=()
run() {  # name, then kamera eval arguments
  local name=$1
  shift
  echo "== kamera eval $* --suite $suite -o $results/$name.json" >&2
  "$k" eval "$@" --suite "$suite" -t "$threads" -o "$results/$name.json" >/dev/null
  inputs+=("$results/$name.json")
}

shared="$root/../shared/models"
if [ -f "$shared/stories260K/stories260K.bin" ]; then
  run stories260K -m "$shared/stories260K/stories260K.bin" -z "$shared/stories260K/tok512.bin"
  run aidreams260K -m "$shared/aidreams260K/aidreams260K.bin" -z "$shared/aidreams260K/tok512.bin"
else
  echo "eval-all: ../shared/models absent; running the synthetic presets only" >&2
fi
for arch in llama qwen2 qwen2vl deepseek2 qwen3 qwen3moe qwen3vl qwen3vlmoe; do
  "$k" make-model --arch "$arch" --preset tiny --seed 1 -o "$models/tiny-$arch.gguf" 2>/dev/null
  run "tiny-$arch" -m "$models/tiny-$arch.gguf"
done
# Kimi-VL's decoder: MLA with DeepSeek-V3 routing (sigmoid scores, selection bias, shared experts)
"$k" make-model --arch deepseek2 --preset kimi-vl-tiny --seed 1 -o "$models/tiny-kimi-vl.gguf" \
  2>/dev/null
run tiny-kimi-vl -m "$models/tiny-kimi-vl.gguf"
"$k" report --in "${inputs[@]}" --out "${REPORT:-docs/report}"

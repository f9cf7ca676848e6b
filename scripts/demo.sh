#!/usr/bin/env bash
# `make demo`: the main job on the embedded default. Until the project ships its own trained
# model (see docs/ROADMAP.md), the default is a seeded synthetic model made by `kamera make-model`;
# when ../shared/models is present the demo also runs the real stories260K checkpoint.
set -euo pipefail
build=${1:-build}
k="$build/bin/kamera"
out="$build/demo"
mkdir -p "$out"

step() { printf '\n== %s\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }

step "Make a seeded random-weight model (Qwen2-style: GQA, QKV bias, NeoX rope)" \
  "$k" make-model --arch qwen2 --preset tiny --seed 1 -o "$out/tiny-qwen2.gguf"
step "Its next-token logits (f32 throughout), top 3" \
  "$k" logits -m "$out/tiny-qwen2.gguf" -p "Once upon a time" --top 3
step "Sample from it (random weights: the text is noise; the engine path is real)" \
  "$k" generate -m "$out/tiny-qwen2.gguf" -p "Once upon a time" -n 24 --temp 0.8 --seed 1
step "Prefill speed, and OpenBLAS alone on the same GEMM shapes" \
  "$k" bench prefill -m "$out/tiny-qwen2.gguf" --tokens 256 --reps 5

root="$(cd "$(dirname "$0")/.." && pwd)"
step "Chunk reuse on it: canonical + rank-m patch vs re-prefill, every arm on the same relocated KV" \
  "$k" reuse-bench -m "$out/tiny-qwen2.gguf" --items "$root/data/reuse-stories260K.jsonl" --limit 12 \
  --ranks 1,4,16,full -q
step "Window operations on it: slide (keep-as-is vs removal patch), reorder (orbit), recall (stale vs fresh)" \
  "$k" window-bench -m "$out/tiny-qwen2.gguf" --items "$root/data/reuse-stories260K.jsonl" --limit 3 \
  --k 3,4 -q
step "Serving a cached 512-token chunk vs re-prefilling it (zero forwards)" \
  "$k" bench serve -m "$out/tiny-qwen2.gguf" --tokens 512 --antecedent 128 --rank 16 --reps 3

step "The server: upload a chunk, then a completion that references it twice (formed, then hit)" \
  bash -c '
  k="$1"; m="$2"
  "$k" serve -m "$m" --port 18181 >/tmp/kamera-demo-serve.log 2>&1 & pid=$!
  for _ in $(seq 50); do curl -fs localhost:18181/health >/dev/null 2>&1 && break; sleep 0.1; done
  id=$(curl -fs localhost:18181/v1/chunks -d "{\"text\": \" The dog found a red ball.\"}" | sed "s/.*\"id\":\"\([0-9a-f]*\)\".*/\1/")
  echo "chunk $id"
  for i in 1 2; do
    curl -fs localhost:18181/v1/completions -d "{\"prompt\": [\"Tom had a dog.\", {\"type\": \"chunk\", \"id\": \"$id\"}, \" Then\"], \"max_tokens\": 8}"; echo
  done
  kill $pid; wait $pid 2>/dev/null || true' _ "$k" "$out/tiny-qwen2.gguf"

shared="$root/../shared/models/stories260K"
if [ -f "$shared/stories260K.bin" ]; then
  step "A real trained model (stories260K, llama2.c checkpoint), greedy from BOS" \
    "$k" generate -m "$shared/stories260K.bin" -z "$shared/tok512.bin" -n 200 --temp 0
  step "The same model as GGUF (tokenizer embedded): identical tokens" \
    "$k" generate -m "$shared/stories260K.gguf" -n 60 --temp 0
  step "Chunk reuse on the real model (45 two-chunk stories from data/)" \
    "$k" reuse-bench -m "$shared/stories260K.bin" --items "$root/data/reuse-stories260K.jsonl" \
    --ranks 1,2,4,8,16,full -q
else
  printf '\n(../shared/models is absent: skipping the real-model part of the demo)\n'
fi

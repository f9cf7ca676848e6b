#!/usr/bin/env bash
# `make demo`: first the agent demo on the project's own trained model, the mini vision-language
# model in models/minivl/ (a vision encoder + a Qwen2-VL-style decoder with M-RoPE that answers
# one-word questions about clips of small frames with coloured shapes). An agent watches a
# 24-frame stream through a sliding window of 6 frames: each frame is encoded and cached once;
# the window slides by evicting its oldest frame (the survivors only relocate) and admitting the
# new one with a conditioning patch formed on the window; every question is answered both by
# kamera (the question over the cached window) and by a full re-prefill. It prints both answers,
# both times-to-first-token and every cache operation per step, then a summary table, and draws
# build/demo/agent-demo.png. When the committed weights are missing it says so and runs on seeded
# random weights instead (answers are noise; timings and cache operations are real).
# Then the engine-level demos on a seeded synthetic model made by `kamera make-model`: chunk
# reuse against re-prefill, window operations, serving a cached chunk, and the HTTP server.
# Needs nothing outside the repository; takes well under a minute.
set -euo pipefail
build=${1:-build}
k="$build/bin/kamera"
out="$build/demo"
mkdir -p "$out"

step() { printf '\n== %s\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }

root="$(cd "$(dirname "$0")/.." && pwd)"
decoder="$root/models/minivl/minivl.gguf"
vision="$root/models/minivl/minivl-mmproj.gguf"
if [ -f "$decoder" ] && [ -f "$vision" ]; then
  step "The agent demo: a sliding window over a frame stream on the trained mini-VL, kamera vs re-prefill" \
    "$k" demo --decoder "$decoder" --vision "$vision" --png "$out/agent-demo.png"
else
  printf '\n!! The trained mini-VL weights are not in this checkout:\n'
  for f in "$decoder" "$vision"; do [ -f "$f" ] || printf '!!   missing %s\n' "$f"; done
  printf '!! They are committed with the repository under models/minivl/ (update the checkout to get them).\n'
  printf '!! Running the agent demo on seeded random weights instead: the answers are noise,\n'
  printf '!! the cache operations and the timings are real.\n'
  step "The agent demo on seeded random weights (mechanics only), kamera vs re-prefill" \
    "$k" demo --random-weights --png "$out/agent-demo.png"
fi

step "A seeded random-weight model for the engine-level demos (Qwen2-style: GQA, QKV bias, NeoX rope)" \
  "$k" make-model --arch qwen2 --preset tiny --seed 1 -o "$out/tiny-qwen2.gguf"
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
  set -euo pipefail
  k="$1"; m="$2"; port=18181; log=/tmp/kamera-demo-serve.log
  "$k" serve -m "$m" --port "$port" >"$log" 2>&1 & pid=$!
  trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null || true" EXIT
  up=0
  for _ in $(seq 100); do curl -fs "localhost:$port/health" >/dev/null 2>&1 && up=1 && break; sleep 0.1; done
  [ "$up" = 1 ] || { echo "demo: the server did not start:" >&2; cat "$log" >&2; exit 1; }
  post() {  # JSON with its content type; a 4xx/5xx answer fails the demo, showing the body
    curl -sS --fail-with-body -H "Content-Type: application/json" "localhost:$port$1" -d "$2" ||
      { echo >&2; echo "demo: POST $1 failed" >&2; exit 1; }
  }
  chunk=$(post /v1/chunks "{\"text\": \" The dog found a red ball.\"}")
  id=$(printf %s "$chunk" | sed -n "s/.*\"id\":\"\([0-9a-f]\{32\}\)\".*/\1/p")
  [ -n "$id" ] || { echo "demo: the chunk upload answered no id: $chunk" >&2; exit 1; }
  echo "chunk $id"
  for i in 1 2; do
    out=$(post /v1/completions "{\"prompt\": [\"Tom had a dog.\", {\"type\": \"chunk\", \"id\": \"$id\"}, \" Then\"], \"max_tokens\": 8}")
    printf "%s\n" "$out" | grep -q "\"text\":" || { echo "demo: completion $i has no text: $out" >&2; exit 1; }
    echo "$out"
  done
  echo "three choices from one prefill (n = 3), each cut before a stop string:"
  post /v1/completions "{\"prompt\": \"Tom had a dog.\", \"max_tokens\": 12, \"n\": 3, \"temperature\": 0.9, \"stop\": [\".\"]}"
  echo' _ "$k" "$out/tiny-qwen2.gguf"

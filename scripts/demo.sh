#!/usr/bin/env bash
# `make demo` (after `make demo-build`): an unchanged OpenAI agent gets its context reused by
# `kamera serve`, on the project's own trained model, the mini vision-language model in
# models/minivl/ (a vision encoder + a Qwen2-VL-style decoder that answers one-word questions
# about 32 x 32 frames of coloured shapes). Four steps, each printing what it shows:
#   1. `kamera serve` on the mini-VL, and a second one, the reference, for the re-prefill;
#   2. the agent (examples/frame_agent.mjs: the official openai npm client, nothing of kamera;
#      plain curl in scripts/demo_agent.sh where Node or the client is absent) watches the
#      stream through a sliding window of frames, asks a question per frame and looks back at an
#      evicted frame every 4th turn; per turn usage.prompt_tokens_details.cached_tokens, where the
#      frames' KV came from (usage.kamera.segments) and the server's TTFT against the same
#      request with "reuse": "reprefill" (scripts/demo_turns.jq prints them);
#   3. the web page's address and a PNG of it after those turns (headless chromium where it is
#      installed: bash scripts/install-browser-test.sh);
#   4. the engine-level summary of `kamera demo` (the same stream on the library, no HTTP).
#   bash scripts/demo.sh [BUILD]     KAMERA_DEMO_CLIENT=curl forces the curl agent
# Writes BUILD/demo/: frames/ (the stream and demo.json), agent-turns.jsonl, web-page.png,
# agent-demo.png. About 10 s.
set -euo pipefail
build=${1:-build}
root="$(cd "$(dirname "$0")/.." && pwd)"
k="$build/bin/kamera"
out="$build/demo"
decoder="$root/models/minivl/minivl.gguf"
vision="$root/models/minivl/minivl-mmproj.gguf"
start=$(date +%s.%N)
rm -rf "$out" && mkdir -p "$out/frames"
for f in "$decoder" "$vision"; do
  [ -f "$f" ] || { echo "demo: $f is missing: the mini-VL's weights are committed under models/minivl/ (update the checkout)" >&2; exit 1; }
done
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }

# 1. The servers, each on a port of its own choosing (it prints its address).
pids=()
# Each server stopped, and gone before the demo ends (they are not this shell's children: no wait).
stop_servers() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$p" 2>/dev/null || true
  done
}
trap stop_servers EXIT
# serve LOG: starts kamera serve on the mini-VL, prints its address, start-up ms and pid (it runs
# in a subshell: the caller adds the pid to `pids`, which the EXIT trap stops).
serve() {
  local log="$1" t0 url=""
  t0=$(date +%s.%N)
  "$k" serve -m "$decoder" --mmproj "$vision" --port 0 --threads 1 >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 200); do
    url=$(grep -o 'on http://127\.0\.0\.1:[0-9]*' "$log" | head -1 | cut -c4-) || true
    [ -n "$url" ] && curl -fs "$url/health" >/dev/null 2>&1 && break
    url=""
    sleep 0.05
  done
  [ -n "$url" ] || { echo "demo: kamera serve did not start:" >&2; cat "$log" >&2; kill "$pid"; exit 1; }
  echo "$url $(since "$t0") $pid"
}
read -r url up_ms pid < <(serve "$out/serve.log")
pids+=("$pid")
read -r ref _ pid < <(serve "$out/serve-reference.log")
pids+=("$pid")
[ -n "$url" ] && [ -n "$ref" ] || exit 1
printf '\n== 1. kamera serve on the embedded mini-VL\n'
echo "$k serve -m models/minivl/minivl.gguf --mmproj models/minivl/minivl-mmproj.gguf: up in $up_ms ms at $url"
echo "(the model: $(du -k "$decoder" | cut -f1) KiB decoder + $(du -k "$vision" | cut -f1) KiB vision encoder, 4 tokens per 32 x 32 frame;"
echo " a second server at $ref is the reference: it is sent every request again with \"reuse\": \"reprefill\")"

# 2. The agent.
printf '\n== 2. An unchanged OpenAI agent watches a frame stream through a sliding window\n'
"$k" demo --decoder "$decoder" --vision "$vision" --json --png none --reps 1 --save-frames "$out/frames" >"$out/frames/demo.json"
turns="$out/agent-turns.jsonl"
client=${KAMERA_DEMO_CLIENT:-node} rc=77
if [ "$client" = node ] && command -v node >/dev/null 2>&1; then
  rc=0
  node "$root/scripts/demo_agent.mjs" --url "$url" --reference "$ref" --frames "$out/frames" \
    --npm "$build/npm" >"$turns" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "demo: the agent failed (exit $rc)" >&2; exit 1; }
fi
if [ "$rc" = 0 ]; then
  echo "The agent is examples/frame_agent.mjs, written with the official openai npm client and nothing"
else
  [ "$client" = curl ] || echo "(Node or the openai npm client is absent: the same agent in curl, scripts/demo_agent.sh)"
  bash "$root/scripts/demo_agent.sh" "$url" "$ref" "$out/frames" >"$turns"
  echo "The agent is scripts/demo_agent.sh, plain curl requests with nothing"
fi
echo "of kamera: each turn it resends the window's 6 frames (image_url parts) and a question; every"
echo "4th turn it brings an evicted frame back in front. kamera serve reuses what it has seen wherever"
echo "it sits now: cached_tokens is OpenAI's usage.prompt_tokens_details.cached_tokens, \"frames from\""
echo "counts usage.kamera.segments by source, TTFT is the server's usage.kamera.timings.ttft_ms."
jq -r -s -f "$root/scripts/demo_turns.jq" "$turns"

# 3. The web page after those turns.
printf '\n== 3. The web page: %s/\n' "$url"
browser=""
for b in chromium chromium-browser google-chrome; do command -v "$b" >/dev/null 2>&1 && browser="$b" && break; done
if [ -n "$browser" ]; then
  png="$out/web-page.png"
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --window-size=1280,1700 --virtual-time-budget=5000 --screenshot="$png" "$url/" >/dev/null 2>&1 || true
  if [ -s "$png" ]; then
    echo "$png ($(od -An -tu1 -j16 -N8 "$png" | awk '{print $3*256+$4 " x " $7*256+$8}') pixels, $(du -k "$png" | cut -f1) KiB):"
    echo "the page after the agent's turns: the store, its hits by source and the caches (headless $browser)"
  else
    echo "$browser did not write a picture of the page (no PNG at $png)"
  fi
else
  echo "No picture of the page: chromium is not installed (bash scripts/install-browser-test.sh installs it)."
  echo "Serve the page again with: $k serve -m models/minivl/minivl.gguf --mmproj models/minivl/minivl-mmproj.gguf --port 8080"
fi

# 4. The engine-level summary.
printf '\n== 4. The same stream on the engine, no HTTP: kamera vs a re-prefill per question\n'
"$k" demo --decoder "$decoder" --vision "$vision" -q --png "$out/agent-demo.png"
printf '\nThe demo ran in %s s. Point your own agent at kamera serve: README.md, "Your own agent".\n' \
  "$(awk -v ms="$(since "$start")" 'BEGIN { printf "%.1f", ms / 1000 }')"

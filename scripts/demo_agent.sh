#!/usr/bin/env bash
# The agent of examples/frame_agent.mjs in plain curl (and jq), for machines without Node: it
# watches the stream through a sliding window, sends the window's frames (image_url parts) and a
# question every turn, and on a look-back turn brings an evicted frame back in front in place of
# the oldest one. Each request goes again, unchanged but for "reuse": "reprefill", to the
# reference server. Prints the records scripts/demo_agent.mjs prints (scripts/demo_turns.jq).
#   bash scripts/demo_agent.sh URL REFERENCE_URL FRAMES_DIR    (FRAMES_DIR: kamera demo --save-frames)
set -euo pipefail
url="$1" ref="$2" dir="$3"
demo="$dir/demo.json"
n=$(jq '.config.frames' "$demo")
window=$(jq '.config.window' "$demo")
post() {  # post URL BODY_FILE: the response, failing on a 4xx/5xx with its body
  curl -sS --fail-with-body -H "Content-Type: application/json" "$1/v1/chat/completions" -d "@$2"
}
frame_url() { printf 'data:image/png;base64,%s' "$(base64 -w0 "$(printf '%s/frame-%04d.png' "$dir" "$1")")"; }
body=$(mktemp) again=$(mktemp)
trap 'rm -f "$body" "$again"' EXIT
seen=()
for ((t = 0; t < n; ++t)); do
  seen+=("$t")
  [ ${#seen[@]} -le "$window" ] || seen=("${seen[@]:1}")  # the window slides
  q=$(jq -c --argjson t "$t" '.steps[] | select(.step == $t and .question != null)
        | {text: .question.text, gold: .question.gold, frames: .question.frames, look_back: (.recall.frame // null)}' "$demo")
  [ -n "$q" ] || continue
  look=$(jq -r '.look_back // empty' <<<"$q")
  shown=("${seen[@]}")
  [ -z "$look" ] || shown=("$look" "${seen[@]:1}")
  [ "$(jq -c '.frames' <<<"$q")" = "[$(IFS=,; echo "${shown[*]}")]" ] ||
    { echo "demo_agent.sh: turn $t sends frames ${shown[*]}, the demo asked about $(jq -c '.frames' <<<"$q")" >&2; exit 1; }
  for i in "${shown[@]}"; do frame_url "$i"; echo; done |
    jq -R -s --arg text "$(jq -r '.text' <<<"$q")" '{model: "default", temperature: 0, messages: [{role: "user",
      content: ((split("\n") | map(select(length > 0)) | map({type: "image_url", image_url: {url: .}}))
                + [{type: "text", text: $text}])}]}' >"$body"
  jq '. + {reuse: "reprefill"}' "$body" >"$again"
  answer=$(post "$url" "$body")
  reference=$(post "$ref" "$again")
  jq -c -n --argjson t "$t" --argjson q "$q" --argjson a "$answer" --argjson r "$reference" \
    '{step: $t, frames: $q.frames, look_back: $q.look_back, question: $q.text, gold: $q.gold,
      answer: ($a.choices[0].message.content | gsub("^\\s+|\\s+$"; "")), usage: $a.usage,
      reference: {answer: ($r.choices[0].message.content | gsub("^\\s+|\\s+$"; "")), usage: $r.usage}}'
done

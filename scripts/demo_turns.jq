# `make demo`, step 2: the agent's turns (scripts/demo_agent.mjs or scripts/demo_agent.sh: one JSON
# record per turn) as the demo's lines, then a summary. Run with jq -r -s.
#   two lines per turn: the frames sent (a looked-back frame marked), the question, the answers;
#   usage.prompt_tokens_details.cached_tokens of prompt_tokens, the segments by
#   usage.kamera.segments[].source (count of segments; the question is the recomputed tail), and
#   usage.kamera.timings.ttft_ms (measured by the server) against the same request's with
#   "reuse": "reprefill" on the reference server.
def ms: . * 1000 | round / 1000 | tostring;
def sources: [.[] | .source] | group_by(.) | map("\(.[0]) \(length)") | join(", ");
def median: sort | if length == 0 then 0 else .[(length - 1) / 2 | floor] end;
def turn_line(i):
  . as $t
  | ($t.usage.kamera.timings.ttft_ms) as $a | ($t.reference.usage.kamera.timings.ttft_ms) as $b
  | "turn \(i + 1 | tostring | if length < 2 then " " + . else . end)  frames \($t.frames
      | map(tostring) | join(" "))\(if $t.look_back != null then "  (frame \($t.look_back) looked back at)" else "" end)"
    + "  \"\($t.question)\"  answer \($t.answer) (gold \($t.gold), re-prefill \($t.reference.answer))\n"
    + "         cached_tokens \($t.usage.prompt_tokens_details.cached_tokens) of \($t.usage.prompt_tokens)"
    + " (re-prefill \($t.reference.usage.prompt_tokens_details.cached_tokens)), recomputed"
    + " \($t.usage.kamera.recomputed_tokens); frames from: \($t.usage.kamera.segments | sources); TTFT \($a | ms) ms vs \($b | ms) ms re-prefill";
. as $turns
| ($turns | to_entries | map(.key as $i | .value | turn_line($i)) | .[])
, ""
, ($turns | map(.usage.prompt_tokens) | add) as $prompt
| ($turns | map(.usage.prompt_tokens_details.cached_tokens) | add) as $cached
| ($turns | map(.reference.usage.prompt_tokens_details.cached_tokens) | add) as $ref_cached
| "agent: \($turns | length) turns, \($cached) of \($prompt) prompt tokens served from kamera's cache"
  + " (re-prefill: \($ref_cached)); median TTFT \($turns | map(.usage.kamera.timings.ttft_ms) | median | ms) ms"
  + " vs \($turns | map(.reference.usage.kamera.timings.ttft_ms) | median | ms) ms re-prefill;"
  + " answers right \($turns | map(select(.answer == .gold)) | length), re-prefill's"
  + " \($turns | map(select(.reference.answer == .gold)) | length), the same \($turns
      | map(select(.answer == .reference.answer)) | length) of \($turns | length)"

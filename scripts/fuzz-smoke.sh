#!/usr/bin/env bash
# Runs each libFuzzer target for a few seconds from its committed seed corpus (new inputs go to a
# scratch folder, never into the repo). A crash, leak or sanitizer report fails the run.
set -euo pipefail
build=${1:-build-fuzz}
seconds=${2:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# A clang build is where target_clones once went wrong (scripts/check-isa-hygiene.py).
python3 "$root/scripts/check-isa-hygiene.py" "$build/lib/libkamera_ops.a" "$build/lib/libkamera_kv.a"
for target in "$build"/bin/fuzz_*; do
  name=$(basename "$target")
  name=${name#fuzz_}
  mkdir -p "$scratch/$name"
  echo "fuzz-smoke: $name for ${seconds}s"
  "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$scratch/$name-" "$scratch/$name" "$root/fuzz/corpus/$name" \
    2>"$scratch/$name.log" || {
    echo "fuzz-smoke: $name FAILED; last lines of its log:" >&2
    tail -n 40 "$scratch/$name.log" >&2
    exit 1
  }
  grep -E "stat::number_of_executed_units|cov:" "$scratch/$name.log" | tail -n 2
done

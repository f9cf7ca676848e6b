#!/usr/bin/env bash
# Installs the agent frameworks of the compatibility matrix (tests/frameworks/matrix.mjs, docs/
# SERVER.md's "Frameworks" section), at pinned versions, under DIR/frameworks (default
# build/npm/frameworks: a folder of their own, so that their `openai` 7 does not replace the
# `openai` the other client tests pin); the matrix skips, saying so, without them.
#   bash scripts/install-agent-frameworks.sh [DIR]
set -euo pipefail
dir="${1:-build/npm}/frameworks"
for package in openai@7.60.0 @openai/agents@0.20.0 ai@7.0.185 @ai-sdk/openai-compatible@3.0.97 \
               @ai-sdk/openai@4.0.126 @langchain/openai@1.6.0 @langchain/core@1.4.0 \
               @langchain/langgraph@1.7.3 @anthropic-ai/sdk@1.17.0 zod@4.6.7; do
  bash "$(dirname "$0")/npm-package.sh" "$package" "$dir" "the framework matrix"
done

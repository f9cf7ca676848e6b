#!/usr/bin/env bash
# Installs the official `@anthropic-ai/sdk` npm client under DIR (default build/npm), for the test
# that drives its Messages API against `kamera serve` (tests/openai/messages_client.mjs; it skips,
# saying so, without).
#   bash scripts/install-anthropic-client.sh [DIR]
set -euo pipefail
exec bash "$(dirname "$0")/npm-package.sh" @anthropic-ai/sdk@1.17.0 "${1:-build/npm}" \
  "the Anthropic client test"

#!/usr/bin/env bash
# Installs the official `openai` npm client under DIR (default build/npm), for the test that
# drives it against `kamera serve` (tests/openai/openai_client.mjs; it skips, saying so, without).
#   bash scripts/install-openai-client.sh [DIR]
set -euo pipefail
exec bash "$(dirname "$0")/npm-package.sh" openai@6.49.0 "${1:-build/npm}" "the openai client test"

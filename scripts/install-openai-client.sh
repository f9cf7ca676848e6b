#!/usr/bin/env bash
# Installs the official `openai` npm client under DIR (default build/npm), for the test that
# drives it against `kamera serve` (tests/openai/openai_client.mjs; it skips, saying so, without).
#   bash scripts/install-openai-client.sh [DIR]
set -euo pipefail
dir="${1:-build/npm}"
package=openai@6.49.0
if ! command -v npm >/dev/null 2>&1; then
  echo "install-openai-client: npm not found; the openai client test will skip" >&2
  exit 0
fi
[ -f "$dir/node_modules/openai/package.json" ] &&
  grep -q "\"version\": \"${package#*@}\"" "$dir/node_modules/openai/package.json" && exit 0
mkdir -p "$dir"
echo "install-openai-client: npm install $package into $dir" >&2
if ! npm install --prefix "$dir" --no-audit --no-fund --silent "$package" >&2; then
  echo "install-openai-client: npm install failed; the openai client test will skip" >&2
fi

#!/usr/bin/env bash
# Installs what the web page's browser test needs (tests/web/web_page_check.mjs): Debian's
# chromium (headless) and the puppeteer-core npm package under DIR (default build/npm), which
# drives it over the DevTools protocol. The test skips, saying so, without either.
#   bash scripts/install-browser-test.sh [DIR]
set -euo pipefail
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install-browser-test: installing chromium" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null ||
    echo "install-browser-test: chromium could not be installed; the browser test will skip" >&2
fi
exec bash "$(dirname "$0")/npm-package.sh" puppeteer-core@25.16.0 "${1:-build/npm}" "the browser test"

#!/usr/bin/env bash
# Installs one npm package at an exact version under DIR, unless that version is there already;
# without npm, or when the install fails, says which tests will skip and exits 0.
#   bash scripts/npm-package.sh NAME@VERSION DIR "the tests that need it"
set -euo pipefail
package="$1" dir="$2" who="$3"
name="${package%@*}" version="${package##*@}"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm-package: npm not found; $who will skip" >&2
  exit 0
fi
[ -f "$dir/node_modules/$name/package.json" ] &&
  grep -q "\"version\": \"$version\"" "$dir/node_modules/$name/package.json" && exit 0
mkdir -p "$dir"
echo "npm-package: npm install $package into $dir" >&2
if ! npm install --prefix "$dir" --no-audit --no-fund --silent "$package" >&2; then
  echo "npm-package: npm install $package failed; $who will skip" >&2
fi

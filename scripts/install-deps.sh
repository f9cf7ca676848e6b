#!/usr/bin/env bash
# Installs every Debian package kamera needs to build and test (bookworm names).
# Idempotent: packages already present are skipped, so `make` stays fast after the first run.
set -euo pipefail

packages=(
  # build and test
  cmake g++ ninja-build pkg-config make curl jq  # jq: docs/SERVER.md's curl examples
  libgtest-dev libgmock-dev libbenchmark-dev clang-format
  clang-14 libclang-rt-14-dev lld-14     # libFuzzer targets for the file parsers; lld links
                                         # the clang (ASan, fuzz) builds
  # math
  libopenblas-dev liblapacke-dev
  # libraries
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libxxhash-dev
  # byte-level BPE tokenizers: pre-tokenizer regexes (PCRE2) and NFC normalization (ICU)
  libpcre2-dev libicu-dev
  # serving: the HTTP front (Boost.Asio/Beast), HMAC of store entries (OpenSSL), the shared
  # Redis tier (and a local Redis server for its tests), the tests' HTTP client (cpp-httplib)
  libboost-dev libssl-dev libcpp-httplib-dev libhiredis-dev redis-server
  # `kamera chat` on a terminal: line editing and history (libedit, BSD-licensed readline)
  libedit-dev
  # several servers: the deploy/ configs of the balancers kamera route is compared with (tested)
  haproxy nginx-light
  # figures of `kamera report`; frames of the mini-VL clips (PNG)
  gnuplot-nox libpng-dev
  # decoding of JPEG images given to the Qwen2-VL vision tower
  libjpeg62-turbo-dev
  # kamera-train, the mini-VL trainer (libtorch, CPU), and its cross-check test
  libtorch-dev
  # the Python binding (import kamera) and its tests, on Debian's /usr/bin/python3
  pybind11-dev python3-dev python3-numpy
  # `pip install --no-build-isolation ./python` (offline: meson-python builds it) and its test's venv
  python3-pip python3-venv python3-mesonpy meson
  # the independent JSON Schema validator the grammar tests check generated documents with
  python3-jsonschema
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

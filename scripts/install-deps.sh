#!/usr/bin/env bash
# Installs the Debian packages kamera needs (bookworm names), in three sets:
#   runtime  what `bin/kamera` needs to build and run: the compiler, CMake, the libraries it links
#            (`make demo` installs only this set)
#   test     what the tests, the sanitizer and fuzz builds, the Python binding and the balancer
#            configs need on top of it
#   trainer  libtorch (about 200 packages): kamera-train, the mini-VL trainer, and the libtorch
#            reference checkers (optional: CMake skips them without it)
#   bash scripts/install-deps.sh [SET...]     (no SET: all three, what `make test` and CI install)
# Idempotent: packages already present are skipped, so `make` stays fast after the first run.
set -euo pipefail

runtime=(
  cmake g++ ninja-build pkg-config make
  curl jq                                # the demo's agent without Node; docs/SERVER.md's examples
  libopenblas-dev liblapacke-dev         # math
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libxxhash-dev
  # byte-level BPE tokenizers: pre-tokenizer regexes (PCRE2) and NFC normalization (ICU)
  libpcre2-dev libicu-dev
  # serving: the HTTP front (Boost.Asio/Beast), HMAC of store entries (OpenSSL), the shared
  # Redis tier, kamera route's HTTP client (cpp-httplib)
  libboost-dev libssl-dev libcpp-httplib-dev libhiredis-dev
  # `kamera chat` on a terminal: line editing and history (libedit, BSD-licensed readline)
  libedit-dev
  # frames of the mini-VL clips and PNG images (libpng); JPEG images for the vision towers
  libpng-dev libjpeg62-turbo-dev
  # audio input: WAV, FLAC and MP3 decoded from memory (libsndfile: libFLAC, libmpg123, libmp3lame)
  libsndfile1-dev
)
test=(
  libgtest-dev libgmock-dev libbenchmark-dev clang-format
  clang-14 libclang-rt-14-dev lld-14     # libFuzzer targets for the file parsers; lld links
                                         # the clang (ASan, fuzz) builds
  redis-server                           # a local Redis server for the shared tier's tests
  # several servers: the deploy/ configs of the balancers kamera route is compared with (tested)
  haproxy nginx-light
  gnuplot-nox                            # figures of `kamera report`
  # the Python binding (import kamera) and its tests, on Debian's /usr/bin/python3 (numpy: also
  # the log-mel reference tests/unit/media/whisper_mel.py)
  pybind11-dev python3-dev python3-numpy
  # `pip install --no-build-isolation ./python` (offline: meson-python builds it) and its test's venv
  python3-pip python3-venv python3-mesonpy meson
  # the independent JSON Schema validator the grammar tests check generated documents with
  python3-jsonschema
)
trainer=(
  libtorch-dev   # kamera-train, the mini-VL trainer (libtorch, CPU), and its cross-check tests
)

sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(runtime test trainer)
packages=()
for s in "${sets[@]}"; do
  case "$s" in
    runtime) packages+=("${runtime[@]}") ;;
    test) packages+=("${test[@]}") ;;
    trainer) packages+=("${trainer[@]}") ;;
    *) echo "install-deps: unknown set '$s' (runtime, test, trainer)" >&2; exit 2 ;;
  esac
done

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

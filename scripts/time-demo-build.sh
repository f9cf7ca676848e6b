#!/usr/bin/env bash
# Times `make demo`'s install-and-build phase (`make demo-build`) as a new user meets it: a fresh
# clone of this checkout's HEAD in a scratch folder, ccache off, `-j JOBS` (default 2). The
# package installs take what they take on this machine (nothing when the runtime set is already
# installed; see the README's figure for what was measured). Prints the wall time of each phase,
# the machine's load before and after (other work on the machine slows the build), and the ten
# slowest compile steps from the clone's .ninja_log.
#   bash scripts/time-demo-build.sh [JOBS]
set -euo pipefail
jobs=${1:-2}
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp=$(mktemp -d /tmp/kamera-fresh-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-hardlinks "$root" "$tmp/kamera"
cd "$tmp/kamera"
unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_C_COMPILER_LAUNCHER
export CCACHE_DISABLE=1
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; $(git log -1 --format='%h %s' | cut -c1-70)"
t0=$(now)
make -s deps-runtime
t1=$(now)
bash scripts/install-openai-client.sh build/npm
t2=$(now)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
t3=$(now)
cmake --build build -j "$jobs" --target kamera >/dev/null
t4=$(now)
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
echo "packages (scripts/install-deps.sh runtime)  $(secs "$t0" "$t1") s"
echo "openai npm client                           $(secs "$t1" "$t2") s"
echo "cmake configure                             $(secs "$t2" "$t3") s"
echo "build bin/kamera (-j $jobs, ccache off)          $(secs "$t3" "$t4") s"
echo "install-and-build (make demo-build)         $(secs "$t0" "$t4") s"
awk 'NR > 1 { s += $2 - $1; n++ } END { printf "compile steps: %d, %.0f s summed\n", n, s / 1000 }' build/.ninja_log
awk 'NR > 1 { printf "%6.1f s  %s\n", ($2 - $1) / 1000, $4 }' build/.ninja_log | sort -rn | head -10

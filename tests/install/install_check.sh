#!/usr/bin/env bash
# The install as a user runs it, outside the source tree:
#   1. cmake --install build --prefix P: the kamera binary, libkamera, kamera.h, kamera.pc, the
#      CMake package and the Python module land under P;
#   2. the C example (examples/reuse.c) built with pkg-config, and a CMake project with
#      find_package(kamera), both run from a scratch folder;
#   3. the Python example (examples/agent.py) on the module cmake installed;
#   4. pip install --no-build-isolation ./python into a venv (meson-python, offline), the module
#      found against P by pkg-config, then by KAMERA_LIBRARY; the example again on each; wrong
#      argument types raise kamera.ArgumentError (a kamera.Error), help() names the parameters.
#   tests/install/install_check.sh BUILD_DIR SOURCE_DIR [MODEL.gguf for the C example]
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
model=${3:-}
work=$(mktemp -d /tmp/kamera-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
P=$work/prefix
py=/usr/bin/python3

cmake --install "$build" --prefix "$P" >/dev/null
for f in bin/kamera include/kamera.h lib/pkgconfig/kamera.pc lib/cmake/kamera/kameraConfig.cmake \
         lib/python3/dist-packages/kamera/__init__.py; do
  [ -e "$P/$f" ] || { echo "FAIL: cmake --install did not install $f"; exit 1; }
done
ls "$P"/lib/libkamera.so* >/dev/null
ls "$P"/lib/python3/dist-packages/kamera/_kamera*.so >/dev/null
"$P/bin/kamera" --help >/dev/null

# The C example, out of tree, with pkg-config; its model: the one given, else a tiny random llama.
mkdir "$work/c" && cd "$work/c"
if [ -z "$model" ] || [ ! -f "$model" ]; then
  model=$work/c/tiny.gguf
  "$P/bin/kamera" make-model --arch llama --preset tiny --seed 1 -o "$model" >/dev/null
fi
export PKG_CONFIG_PATH=$P/lib/pkgconfig
cc -std=c11 -O2 "$src/examples/reuse.c" $(pkg-config --cflags --libs kamera) -lm -o reuse
LD_LIBRARY_PATH=$P/lib ./reuse "$model" > reuse.out
grep -q "^patch .*KL to re-prefill" reuse.out || { echo "FAIL: the C example printed no patch arm"; cat reuse.out; exit 1; }
echo "C example (pkg-config): ok"

# find_package(kamera) from a CMake project.
mkdir "$work/cm" && cd "$work/cm"
cat > CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.22)
project(uses_kamera C)
find_package(kamera 0.1 REQUIRED)
add_executable(version version.c)
target_link_libraries(version PRIVATE kamera::kamera)
CM
printf '#include <kamera.h>\n#include <stdio.h>\nint main(void) { printf("%%s\\n", kamera_version()); return 0; }\n' > version.c
cmake -S . -B b -G Ninja -DCMAKE_PREFIX_PATH="$P" >/dev/null
cmake --build b >/dev/null
LD_LIBRARY_PATH=$P/lib ./b/version | grep -q '^0\.' || { echo "FAIL: find_package(kamera)"; exit 1; }
echo "CMake package (find_package(kamera)): ok"

# The Python example on the module cmake installed (no LD_LIBRARY_PATH: its RUNPATH finds P/lib).
mkdir "$work/py" && cd "$work/py"
cp "$src/examples/agent.py" .
PYTHONPATH=$P/lib/python3/dist-packages $py agent.py --root "$src" --frames 8 --window 4 > agent.out
grep -q "kamera agrees with re-prefill" agent.out || { echo "FAIL: agent.py (cmake-installed module)"; cat agent.out; exit 1; }
PYTHONPATH=$P/lib/python3/dist-packages $py -c "import kamera, os; assert os.path.realpath(kamera.__file__).startswith(os.path.realpath('$P'))"
echo "Python example (cmake --install): ok"

# pip, offline, into a venv that sees Debian's numpy and meson-python.
if ! $py -c 'import mesonpy, venv' 2>/dev/null; then
  echo "SKIP: the pip part needs python3-mesonpy and python3-venv (scripts/install-deps.sh)"
  exit 77
fi
$py -m venv --system-site-packages "$work/venv"
cp -r "$src/python" "$work/python-src"  # pip builds in the folder: keep the source tree clean
ln -s "$src/src" "$work/src"            # the binding's one engine file (src/minivl/clips.cpp)
"$work/venv/bin/pip" install --no-build-isolation --no-index -q "$work/python-src"
"$work/venv/bin/python" agent.py --root "$src" --frames 8 --window 4 > agent-pip.out
grep -q "kamera agrees with re-prefill" agent-pip.out || { echo "FAIL: agent.py (pip-installed module)"; exit 1; }
"$work/venv/bin/python" - "$P" <<'PY'
import os, sys
import kamera
prefix = os.path.realpath(sys.argv[1])
assert "site-packages" in kamera.__file__, kamera.__file__
try:
    kamera.Model(3)
    raise SystemExit("FAIL: kamera.Model(3) did not raise")
except kamera.Error as e:
    assert isinstance(e, TypeError) and e.name == "invalid_argument", (type(e), e)
    assert "path: str" in str(e), str(e)
import pydoc
text = pydoc.render_doc(kamera.Context, renderer=pydoc.plaintext)
for needle in ("assemble(", "chunks", "policy", "set_store_budget(", "bytes"):
    assert needle in text, needle
assert "arg0" not in text and "kamera_py::" not in text, "help() shows C++ names"
print("pip module: kamera.Error on wrong types, help() names the parameters: ok")
PY
rm -rf "$work/venv"
$py -m venv --system-site-packages "$work/venv"
rm -rf "$work/python-src/build" && unset PKG_CONFIG_PATH
KAMERA_LIBRARY=$P/lib/libkamera.so "$work/venv/bin/pip" install --no-build-isolation --no-index -q "$work/python-src"
KAMERA_LIBRARY=$P/lib/libkamera.so "$work/venv/bin/python" agent.py --root "$src" --frames 8 --window 4 > agent-lib.out
grep -q "kamera agrees with re-prefill" agent-lib.out || { echo "FAIL: agent.py (pip, KAMERA_LIBRARY)"; exit 1; }
echo "pip install with KAMERA_LIBRARY: ok"
echo "PASS: install into $P and the examples from there"

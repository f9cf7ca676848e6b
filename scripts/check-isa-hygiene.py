#!/usr/bin/env python3
"""Checks that built objects run on any x86-64: wide-vector code only where it is dispatched.

kamera is one binary for every x86-64 host: kernels for AVX2, AVX-512 and AMX live in their own
translation units (compiled with -mavx2 / -mavx512f ...) and in functions cloned by
target_clones or marked with target(...), and are chosen at run time from cpuid. Two compiler
behaviours can leak wide-vector code into a path every host runs:

  1. clang 14 ignores target_clones on a function whose earlier declaration lacks the attribute
     and compiles the single body for the first target (x86-64-v4): an AVX2-only host then meets
     AVX-512 instructions (the CI's fuzz run died of it in exp_inplace).
  2. An inline function or template instantiated in an ISA translation unit is emitted there as a
     weak symbol; the linker keeps one copy of it, possibly that one, for every caller.

Usage: check-isa-hygiene.py OBJ_OR_LIB... (objects, or static libraries whose members are read).
For every function containing an instruction on ymm/zmm registers, xmm16-31, AVX-512 mask
registers or an FMA, it requires one of: the object is an ISA translation unit (a name with
avx2/avx512/amx/vnni/bf16) and the symbol is not weak; or the function's name says its target
(a clone suffix, or avx2/avx512/f16c/fma in the name). Exit status 1 lists what fails.
"""
import os
import re
import subprocess
import sys
import tempfile

WIDE = re.compile(r"%(ymm|zmm)\d+|%xmm(1[6-9]|2\d|3[01])\b|%k[0-7]\b|\bvfn?m(add|sub)")
ISA_OBJECT = re.compile(r"(avx2|avx512|amx|vnni|bf16)[^/]*\.o$")
ISA_NAME = re.compile(r"arch_x86[-_]64[-_]v[34]|avx2|avx512|f16c|fma|amx|vnni")
INTRINSIC = re.compile(r"^_mm\d*_")  # an intrinsic a -O0 build leaves out of line, in its caller's TU
HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")


def nm(path):
    """{member: {mangled weak symbol}} and {mangled: demangled} of an object or a library."""
    raw = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    dem = subprocess.run(["nm", "-C", path], capture_output=True, text=True, check=True).stdout
    weak, names, member = {}, {}, path
    for a, b in zip(raw.splitlines(), dem.splitlines()):
        if a.endswith(".o:"):
            member = a[:-1]
            continue
        pa, pb = a.split(" ", 2), b.split(" ", 2)
        if len(pa) == 3 and pa[1] == "W":
            weak.setdefault(member, set()).add(pa[2])
            names[pa[2]] = pb[2]
    return weak, names


def members(path, tmp):
    """(member name, file) pairs: the object itself, or a library's members extracted to tmp."""
    if path.endswith(".o"):
        return [(path, path)]
    subprocess.run(["ar", "x", "--output", tmp, os.path.abspath(path)], check=True)
    out = subprocess.run(["ar", "t", path], capture_output=True, text=True, check=True).stdout
    return [(m, os.path.join(tmp, m)) for m in out.split()]


def wide_functions(obj, sections=None):
    """Demangled names of the functions in obj with wide-vector instructions. sections: only
    those (an ISA object's weak functions, each in a COMDAT section .text.<mangled>)."""
    cmd = ["objdump", "-d", "-C", "--no-show-raw-insn"]
    for sec in sections or []:
        cmd += ["-j", sec]
    out = subprocess.run(cmd + [obj], capture_output=True, text=True, check=True).stdout
    fn, found = None, []
    for line in out.splitlines():
        h = HEADER.match(line)
        if h:
            fn = h.group(1)
        elif fn and WIDE.search(line):
            found.append(fn)
            fn = None  # one report per function
    return found


def main(paths):
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            weak, names = nm(path)
            for member, obj in members(path, tmp):
                if ISA_OBJECT.search(member):
                    w = weak.get(member, set())
                    if not w:
                        continue
                    found = wide_functions(obj, [".text." + m for m in sorted(w)])
                else:
                    found = wide_functions(obj)
                bad += [f"{path}: {member}: {fn}" for fn in found if not ISA_NAME.search(fn) and not INTRINSIC.match(fn)]
    for b in bad:
        print("wide-vector code outside a dispatched function:", b)
    print(f"check-isa-hygiene: {len(paths)} file(s), {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))

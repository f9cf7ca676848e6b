// Element-wise loops compiled three times, for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and
// baseline x86-64; the loader picks one by the CPU (GCC/clang target_clones), so one binary runs
// on any x86-64 and the loops take the widest vectors the CPU has.
//
// The files that use it are compiled with -fno-trapping-math (src/CMakeLists.txt): without it
// the compiler keeps a loop with a select between float expressions (exp's range clamps) scalar,
// because it must not evaluate an operand that could trap. Kamera never unmasks floating-point
// exceptions, and the results are the same bits either way.
//
// Clone only functions of internal linkage (an anonymous namespace) and call them from the
// exported function: clang 14 ignores target_clones on a function whose earlier declaration (a
// header's) lacks it and compiles the one body for the first target (x86-64-v4), so an
// AVX2-only CPU met AVX-512 instructions in exp_inplace (CI's fuzz run, SIGILL).
// scripts/check-isa-hygiene.py checks the built objects for it.
#pragma once

#define KAMERA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

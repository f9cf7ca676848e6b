// What the CPU can run, read from cpuid feature bits (never from model numbers) and from the
// operating system's enabled register state (xgetbv; Linux's AMX permission), and the ISA level
// kernels are chosen for. KAMERA_ISA=scalar|avx2|avx2_vnni|avx512|avx512_vnni|amx caps the level
// (for tests and comparisons); a cap above what the CPU has is ignored.
#pragma once

#include <string>

namespace kamera {

struct CpuFeatures {
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx_vnni = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;  // usable (OS permission granted)
  std::string vendor, brand;
};

// Kernel ISA levels, each a superset of the one before.
enum class IsaLevel : int {
  Scalar = 0,
  Avx2 = 1,        // AVX2 + FMA + F16C
  Avx512 = 2,      // AVX-512 F/BW/VL/DQ
  Avx512Vnni = 3,  // + VNNI (and BF16 when the CPU has it)
  Amx = 4,         // + AMX tiles (int8, bf16)
};

const CpuFeatures& cpu_features();       // detected once
IsaLevel cpu_isa_level();                // highest level the CPU and OS support
IsaLevel isa_level();                    // cpu_isa_level() capped by KAMERA_ISA
const char* isa_level_name(IsaLevel l);  // "scalar", "avx2", "avx512", "avx512_vnni", "amx"
// "avx2 fma f16c avx512f ..." : the features found, for `kamera info` and benchmark rows.
std::string cpu_feature_string();

// AVX-VNNI (vpdpbusd on ymm, VEX-encoded: Alder Lake and later client CPUs, Sapphire Rapids and
// later Xeons, Zen 5) is not a level: CPUs with AVX-512 may lack it (Skylake-X, Ice Lake Xeons,
// Zen 4), so the levels above Avx2 do not imply it. The avx2 kernels use it where the CPU has it
// unless KAMERA_ISA=scalar or avx2 (plain AVX2); KAMERA_ISA=avx2_vnni caps the level to avx2 and
// keeps it.
bool avx_vnni_enabled();

}  // namespace kamera

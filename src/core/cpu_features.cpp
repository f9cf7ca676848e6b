#include "core/cpu_features.h"

#include <cpuid.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kamera {

namespace {

struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(uint32_t leaf, uint32_t sub = 0) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

bool bit(uint32_t v, int i) {
  return (v >> i) & 1u;
}

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

// Linux enables AMX tile data per process on request (arch_prctl ARCH_REQ_XCOMP_PERM).
bool request_amx_permission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureTileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  const Regs l0 = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &l0.b, 4);
  std::memcpy(vendor + 4, &l0.d, 4);
  std::memcpy(vendor + 8, &l0.c, 4);
  f.vendor = vendor;
  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    f.brand = brand;
    while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
  }
  const Regs l1 = cpuid(1);
  const bool osxsave = bit(l1.c, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6;            // SSE + AVX state
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;   // opmask, ZMM_Hi256, Hi16_ZMM
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  f.sse42 = bit(l1.c, 20);
  f.avx = ymm && bit(l1.c, 28);
  f.fma = f.avx && bit(l1.c, 12);
  f.f16c = f.avx && bit(l1.c, 29);
  if (l0.a >= 7) {
    const Regs l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
    f.avx2 = f.avx && bit(l7.b, 5);
    f.avx512f = zmm && bit(l7.b, 16);
    f.avx512dq = f.avx512f && bit(l7.b, 17);
    f.avx512bw = f.avx512f && bit(l7.b, 30);
    f.avx512vl = f.avx512f && bit(l7.b, 31);
    f.avx512_vnni = f.avx512f && bit(l7.c, 11);
    f.avx512_bf16 = f.avx512f && bit(l7s1.a, 5);
    f.avx_vnni = f.avx2 && bit(l7s1.a, 4);
    const bool amx = tiles && bit(l7.d, 24) && request_amx_permission();
    f.amx_tile = amx;
    f.amx_int8 = amx && bit(l7.d, 25);
    f.amx_bf16 = amx && bit(l7.d, 22);
  }
  return f;
}

IsaLevel detect_level(const CpuFeatures& f) {
  if (!(f.avx2 && f.fma && f.f16c)) return IsaLevel::Scalar;
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return IsaLevel::Avx2;
  if (!f.avx512_vnni) return IsaLevel::Avx512;
  if (!(f.amx_tile && f.amx_int8 && f.amx_bf16)) return IsaLevel::Avx512Vnni;
  return IsaLevel::Amx;
}

// KAMERA_ISA's cap: a level's name, or avx2_vnni (the avx2 level with AVX-VNNI); null when
// unset or unknown (unknown names are ignored: kamera info prints the level in use).
struct Cap {
  IsaLevel level;
  bool avx_vnni;
};
std::optional<Cap> isa_cap() {
  const char* env = std::getenv("KAMERA_ISA");
  if (env == nullptr || *env == 0) return std::nullopt;
  const std::string_view name(env);
  if (name == "avx2_vnni") return Cap{IsaLevel::Avx2, true};
  for (int l = 0; l <= int(IsaLevel::Amx); ++l)
    if (name == isa_level_name(IsaLevel(l))) return Cap{IsaLevel(l), IsaLevel(l) > IsaLevel::Avx2};
  return std::nullopt;
}

IsaLevel capped_level() {
  const IsaLevel level = cpu_isa_level();
  const std::optional<Cap> cap = isa_cap();
  return cap && cap->level < level ? cap->level : level;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

IsaLevel cpu_isa_level() {
  static const IsaLevel l = detect_level(cpu_features());
  return l;
}

// Read at every call (a getenv), so a cap set before the first kernel is chosen applies even
// when a static initializer asked earlier; the kernel tables cache their own choice.
IsaLevel isa_level() {
  return capped_level();
}

bool avx_vnni_enabled() {
  const std::optional<Cap> cap = isa_cap();
  return cpu_isa_level() >= IsaLevel::Avx2 && cpu_features().avx_vnni && (!cap || cap->avx_vnni);
}

const char* isa_level_name(IsaLevel l) {
  switch (l) {
    case IsaLevel::Scalar:
      return "scalar";
    case IsaLevel::Avx2:
      return "avx2";
    case IsaLevel::Avx512:
      return "avx512";
    case IsaLevel::Avx512Vnni:
      return "avx512_vnni";
    case IsaLevel::Amx:
      return "amx";
  }
  return "scalar";
}

std::string cpu_feature_string() {
  const CpuFeatures& f = cpu_features();
  const std::pair<bool, const char*> names[] = {
      {f.sse42, "sse4.2"},
      {f.avx, "avx"},
      {f.avx2, "avx2"},
      {f.fma, "fma"},
      {f.f16c, "f16c"},
      {f.avx512f, "avx512f"},
      {f.avx512dq, "avx512dq"},
      {f.avx512bw, "avx512bw"},
      {f.avx512vl, "avx512vl"},
      {f.avx512_vnni, "avx512_vnni"},
      {f.avx512_bf16, "avx512_bf16"},
      {f.avx_vnni, "avx_vnni"},
      {f.amx_tile, "amx_tile"},
      {f.amx_int8, "amx_int8"},
      {f.amx_bf16, "amx_bf16"},
  };
  std::string s;
  for (const auto& [on, name] : names)
    if (on) {
      if (!s.empty()) s += ' ';
      s += name;
    }
  return s;
}

}  // namespace kamera

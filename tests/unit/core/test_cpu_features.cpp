// cpuid-based detection against the kernel's own reading of the CPU (/proc/cpuinfo flags).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/cpu_features.h"

namespace {

std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(CpuFeatures, AgreeWithProcCpuinfo) {
  const auto flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line on this system";
  const kamera::CpuFeatures& f = kamera::cpu_features();
  const std::pair<bool, const char*> pairs[] = {
      {f.avx2, "avx2"},
      {f.fma, "fma"},
      {f.f16c, "f16c"},
      {f.avx512f, "avx512f"},
      {f.avx512bw, "avx512bw"},
      {f.avx512vl, "avx512vl"},
      {f.avx512dq, "avx512dq"},
      {f.avx512_vnni, "avx512_vnni"},
      {f.avx512_bf16, "avx512_bf16"},
      {f.avx_vnni, "avx_vnni"},
      {f.amx_tile, "amx_tile"},
      {f.amx_int8, "amx_int8"},
      {f.amx_bf16, "amx_bf16"},
  };
  for (const auto& [ours, name] : pairs) EXPECT_EQ(ours, flags.count(name) == 1) << name;
}

TEST(CpuFeatures, LevelIsConsistentWithFeatures) {
  const kamera::CpuFeatures& f = kamera::cpu_features();
  const kamera::IsaLevel l = kamera::cpu_isa_level();
  EXPECT_EQ(l >= kamera::IsaLevel::Avx2, f.avx2 && f.fma && f.f16c);
  EXPECT_EQ(l >= kamera::IsaLevel::Avx512,
            l >= kamera::IsaLevel::Avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
  EXPECT_EQ(l >= kamera::IsaLevel::Avx512Vnni, l >= kamera::IsaLevel::Avx512 && f.avx512_vnni);
  EXPECT_EQ(l == kamera::IsaLevel::Amx,
            l >= kamera::IsaLevel::Avx512Vnni && f.amx_tile && f.amx_int8 && f.amx_bf16);
  EXPECT_LE(kamera::isa_level(), l);  // KAMERA_ISA only lowers it
}

// AVX-VNNI is outside the levels: on where the CPU has it, off under KAMERA_ISA=scalar or avx2
// (plain AVX2), on under avx2_vnni, which caps the level to avx2.
TEST(CpuFeatures, KameraIsaSwitchesAvxVnni) {
  const char* old = std::getenv("KAMERA_ISA");
  const std::string saved = old ? old : "";
  const bool has =
      kamera::cpu_features().avx_vnni && kamera::cpu_isa_level() >= kamera::IsaLevel::Avx2;
  struct Want {
    const char* cap;
    bool on;
    kamera::IsaLevel level;
  };
  const kamera::IsaLevel top = kamera::cpu_isa_level();
  auto capped = [&](kamera::IsaLevel l) { return l < top ? l : top; };
  const Want wants[] = {{"", has, top},
                        {"scalar", false, kamera::IsaLevel::Scalar},
                        {"avx2", false, capped(kamera::IsaLevel::Avx2)},
                        {"avx2_vnni", has, capped(kamera::IsaLevel::Avx2)},
                        {"avx512", has, capped(kamera::IsaLevel::Avx512)},
                        {"no-such-level", has, top}};
  for (const Want& w : wants) {
    SCOPED_TRACE(w.cap);
    setenv("KAMERA_ISA", w.cap, 1);
    EXPECT_EQ(kamera::avx_vnni_enabled(), w.on);
    EXPECT_EQ(kamera::isa_level(), w.level);
  }
  if (old) {
    setenv("KAMERA_ISA", saved.c_str(), 1);
  } else {
    unsetenv("KAMERA_ISA");
  }
}

}  // namespace

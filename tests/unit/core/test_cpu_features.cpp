// cpuid-based detection against the kernel's own reading of the CPU (/proc/cpuinfo flags).
#include <gtest/gtest.h>

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

}  // namespace

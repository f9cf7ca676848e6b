// Weights stay in their file's type in memory: loading a Q8_0 file and running a forward grows
// the resident set by about the file's size (its mapped pages), not by the 3.8x an f32 copy of
// every weight would take. Measured with VmRSS from /proc/self/status.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/sanitizer.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

// Resident set of this process in bytes (0 where /proc is not there).
size_t vm_rss() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return size_t(std::stoull(line.substr(6))) * 1024;
  return 0;
}

}  // namespace

// Shadow memory and quarantine make RSS no measure of the weights under ASan.
constexpr bool kAsan = test_sanitizer::kAsan;

TEST(WeightMemory, Q8FileGrowsRssByAboutItsSize) {
  if (vm_rss() == 0) GTEST_SKIP() << "no /proc/self/status";
  if (kAsan) GTEST_SKIP() << "AddressSanitizer build: RSS includes its shadow memory";
  const std::string path = unique_temp("kamera-weight-memory-q8.gguf");
  const std::string mk = std::string(KAMERA_BINARY_DIR) +
                         "/bin/kamera make-model --arch llama --preset tiny --dims "
                         "dim=512,layers=4,heads=8,kv_heads=4,head_dim=64,ffn=2048,vocab=4096 "
                         "--type q8_0 -o " +
                         path + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(mk.c_str()), 0);
  const double file = double(std::filesystem::file_size(path));
  const size_t before = vm_rss();
  auto m = tiny::load(path);
  ASSERT_TRUE(m);
  const double after_load = double(vm_rss() - before);
  {
    auto pool = tiny::pool_for(*m, 32);
    Engine e(*m, 1);
    const SeqId s = pool->create_sequence();
    const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
    auto l = e.forward(*pool, s, ForwardInput::from_tokens(ids, tiny::linear_positions(8)));
    ASSERT_TRUE(l.ok()) << l.message();
  }
  const double after_forward = double(vm_rss() - before);
  std::printf("file %.1f MB, RSS growth after load %.1f MB, after a forward %.1f MB\n", file / 1e6,
              after_load / 1e6, after_forward / 1e6);
  // Mapped pages (all touched: the fingerprint hashes them) plus scratch; an f32 copy of the
  // weights alone would be 3.8x the file.
  EXPECT_LE(after_load, 1.1 * file + 4e6);
  EXPECT_LE(after_forward, 1.1 * file + 8e6);
  m.reset();
  std::remove(path.c_str());
}

// The entry points beyond the server on every committed tiny pair (tests/data/<family>: SmolVLM,
// Gemma 3, InternVL, LLaVA-1.5, random weights written by llama.cpp's gguf-py), through the built
// `kamera` binary:
//   - `kamera vision-embed --json`: the rows are the server's tower's (vision/media_tower.h) for
//     the same picture, tile by tile, in the order the server's chunk holds them;
//   - `kamera chat --mmproj --image`: the follow-up turn keeps the picture's KV and the replies
//     equal a chat that prefills the whole conversation every turn (--no-cache-reuse).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/shell.h"
#include "support/temp_path.h"
#include "support/vl_family_pairs.h"

namespace {

using namespace kamera;
using namespace vl_family_pairs;

// `kamera ARGS < stdin_text`.
ShellOutput kamera_cli(const std::string& args, const std::string& stdin_text,
                       const std::string& tag) {
  const std::string in = unique_temp(tag + ".stdin");
  std::ofstream(in) << stdin_text;
  ShellOutput o = run_shell(std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args + " <" + in);
  std::remove(in.c_str());
  return o;
}

class VlFamilyCli : public testing::TestWithParam<Family> {};

// Where rows [0, n) of `block` (width dim) sit in `rows`, at or after row `from`, each within
// `tol` of the block's scale; -1 when nowhere.
int64_t find_block(const std::vector<float>& rows, const float* block, int64_t n, int dim,
                   int64_t from, double tol) {
  const int64_t total = int64_t(rows.size()) / dim;
  double scale = 0;
  for (int64_t i = 0; i < n * dim; ++i) scale = std::max(scale, double(std::fabs(block[i])));
  for (int64_t at = from; at + n <= total; ++at) {
    double d = 0;
    for (int64_t i = 0; i < n * dim && d <= tol * scale; ++i)
      d = std::max(d, double(std::fabs(rows[size_t(at * dim + i)] - block[i])));
    if (d <= tol * scale) return at;
  }
  return -1;
}

}  // namespace

// vision-embed's rows, tile by tile, are rows of the chunk the server's tower places for the same
// picture, in order (SmolVLM's chunk holds its row / column tokens between the tiles; the other
// three hold the tower's rows alone, so there the two are equal row for row).
TEST_P(VlFamilyCli, VisionEmbedRowsAreTheServersTowerRows) {
  const Family f = GetParam();
  const ShellOutput e = kamera_cli("vision-embed --mmproj " + data(f, "mmproj.gguf") + " --image " +
                                       data(f, f.image) + " -t 1 --json",
                                   "", std::string("kamera-vl-families-embed-") + f.name);
  ASSERT_EQ(e.rc, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["tower"], f.tower);
  const int dim = j["dim"], tiles = j["grid"][0], per_tile = int(j["grid"][1]) * int(j["grid"][2]);
  EXPECT_EQ(tiles, f.tiles);
  std::vector<float> cli;
  for (const auto& r : j["embeddings"])
    for (float v : r.get<std::vector<float>>()) cli.push_back(v);
  ASSERT_EQ(cli.size(), size_t(tiles) * per_tile * dim);

  const Pair p(f, 1024);
  ASSERT_TRUE(p.picture);
  ASSERT_EQ(p.picture->dim, dim);
  const std::vector<float>& served = p.picture->embeddings;
  int64_t at = 0;
  for (int t = 0; t < tiles; ++t) {
    at = find_block(served, cli.data() + size_t(t) * per_tile * dim, per_tile, dim, at, 1e-5);
    ASSERT_GE(at, 0) << "tile " << t << "'s rows are not in the server's chunk (in order)";
    at += per_tile;
  }
  if (std::string(f.name) != "idefics3") {
    EXPECT_EQ(served.size(), cli.size());
  }
  // more than one picture per call is refused by name
  const ShellOutput two = kamera_cli("vision-embed --mmproj " + data(f, "mmproj.gguf") +
                                         " --frames " + data(f, f.image) + "," + data(f, f.image),
                                     "", std::string("kamera-vl-families-frames-") + f.name);
  EXPECT_NE(two.rc, 0);
  EXPECT_NE(two.err.find("--image only"), std::string::npos) << two.err;
}

// kamera chat --mmproj --image on the family's pair: turn 2 reuses turn 1's prompt, the picture's
// rows included, and both turns answer as a chat that prefills everything every turn.
TEST_P(VlFamilyCli, ChatKeepsThePictureAndAnswersAsAFullPrefill) {
  const Family f = GetParam();
  const Pair p(f, 64);
  ASSERT_TRUE(p.picture);
  const int rows = p.picture->n();

  const std::string base = "chat -m " + data(f, "decoder.gguf") + " --mmproj " +
                           data(f, "mmproj.gguf") + " --image " + data(f, f.image) +
                           " --temp 0 -n 5 -t 1 -v --chat-template chatml ";
  const std::string script = "What is it?\nAnd again?\n/quit\n";
  const std::string tag = std::string("kamera-vl-families-chat-") + f.name;
  const ShellOutput o = kamera_cli(base, script, tag);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.err.find("1 image(s) encoded"), std::string::npos) << o.err;
  const size_t at = o.err.find("turn 2: prompt");
  ASSERT_NE(at, std::string::npos) << o.err;
  int prompt = 0, reused = 0;
  ASSERT_EQ(
      std::sscanf(o.err.c_str() + at, "turn 2: prompt %d tokens, %d reused", &prompt, &reused), 2);
  EXPECT_GT(reused, rows);  // the picture's rows and the text before them
  EXPECT_LT(reused, prompt);
  const ShellOutput full = kamera_cli(base + "--no-cache-reuse", script, tag + "-full");
  ASSERT_EQ(full.rc, 0) << full.err;
  EXPECT_EQ(o.out, full.out);
  EXPECT_GE(std::count(o.out.begin(), o.out.end(), '\n'), 2) << o.out;
}

INSTANTIATE_TEST_SUITE_P(Families, VlFamilyCli, testing::ValuesIn(kFamilies), family_name);

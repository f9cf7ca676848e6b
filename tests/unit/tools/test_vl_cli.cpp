// `kamera logits` / `kamera generate` with --mmproj and --image: the CLI's logits after an image
// equal the library's (vision/vl_prompt.h + rope_index.h) on the same files, and every misuse is a
// clear error. Runs the built `kamera` binary on tiny random-weight files.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "vision/rope_index.h"
#include "vision/vl_prompt.h"

namespace {

using namespace kamera;

struct Output {
  std::string out, err;
  int rc = -1;
};

Output kamera_cli(const std::string& args) {
  const std::string err_path = unique_temp("kamera-vl-cli.stderr");
  const std::string cmd = std::string(KAMERA_BINARY_DIR) + "/bin/kamera " + args + " 2>" + err_path;
  Output o;
  FILE* f = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; f && (n = fread(buf.data(), 1, buf.size(), f)) > 0;) o.out.append(buf.data(), n);
  o.rc = f ? pclose(f) : -1;
  std::ifstream e(err_path);
  o.err.assign(std::istreambuf_iterator<char>(e), {});
  return o;
}

const std::string kImage =
    std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_vision/img_140x112.png";

TEST(VlCli, LogitsWithImagesEqualTheLibrary) {
  const std::string dir = unique_temp("");
  const std::string dec = dir + "kamera-vl-cli-dec.gguf", mm = dir + "kamera-vl-cli-mmproj.gguf";
  ASSERT_EQ(kamera_cli("make-model --arch qwen2vl --preset tiny --seed 3 -o " + dec).rc, 0);
  ASSERT_EQ(kamera_cli("make-model --arch qwen2vl-mmproj --preset tiny --seed 4 -o " + mm).rc, 0);
  const std::string prompt =
      "look <|vision_start|><image><|vision_end|> and <|vision_start|><image><|vision_end|> now";
  const Output o = kamera_cli("logits -m " + dec + " --mmproj " + mm + " --image " + kImage +
                              " --image " + kImage + " -t 1 --json -p '" + prompt + "'");
  ASSERT_EQ(o.rc, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  const std::vector<float> cli = j["logits"][0].get<std::vector<float>>();

  auto m = tiny::load(dec);
  ASSERT_TRUE(m);
  auto tower = QwenVisionModel::load(mm);
  ASSERT_TRUE(tower.ok()) << tower.message();
  auto img = load_image(kImage);
  ASSERT_TRUE(img.ok());
  auto patches = qwen_preprocess_image(*img, QwenImageOptions::from(tower->cfg));
  ASSERT_TRUE(patches.ok());
  ThreadPool threads(1);
  auto e = QwenVisionEncoder(*tower, &threads).encode(*patches);
  ASSERT_TRUE(e.ok());
  auto pieces = vl_prompt_pieces(*m->tokenizer, prompt, {*e, *e}, m->cfg.dim);
  ASSERT_TRUE(pieces.ok()) << pieces.message();
  ASSERT_EQ(pieces->size(), 5u);  // text, image, text, image, text
  EXPECT_EQ(j["rows"].get<int>(), (*pieces)[0].n() + 20 + (*pieces)[2].n() + 20 + (*pieces)[4].n());
  const int32_t vs = find_piece(*m->tokenizer, kVisionStart),
                ve = find_piece(*m->tokenizer, kVisionEnd);
  EXPECT_EQ((*pieces)[0].tokens.back(), vs);
  EXPECT_EQ((*pieces)[2].tokens.front(), ve);
  EXPECT_EQ((*pieces)[2].tokens.back(), vs);
  EXPECT_EQ((*pieces)[4].tokens.front(), ve);
  auto pool = tiny::pool_for(*m, 128);
  Engine engine(*m, 1);
  const SeqId s = pool->create_sequence();
  auto lib = prefill_pieces(engine, *pool, s, *pieces, 0, LogitsMode::Last);
  ASSERT_TRUE(lib.ok()) << lib.message();
  ASSERT_EQ(lib->size(), cli.size());
  EXPECT_LT(tiny::max_abs_diff(*lib, cli), 1e-5);

  // generate runs the same prompt
  const Output g =
      kamera_cli("generate -m " + dec + " --mmproj " + mm + " --image " + kImage + " --image " +
                 kImage + " -t 1 -n 3 --temp 0 --json -p '" + prompt + "'");
  EXPECT_EQ(g.rc, 0) << g.err;

  // misuse: each a non-zero exit with a message that names the problem
  const std::string base = "logits -m " + dec + " -t 1 ";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {base + "--mmproj " + mm + " --image " + kImage +
           " -p 'a <|vision_start|><image><|vision_end|> <|vision_start|><image><|vision_end|>'",
       "2 <image> marker(s) but 1 --image"},
      {base + "--mmproj " + mm + " --image " + kImage + " -p 'a <image> b'", "must be written as"},
      {base + "--image " + kImage + " -p '<|vision_start|><image><|vision_end|>'",
       "needs --mmproj"},
  };
  for (const auto& [args, msg] : bad) {
    const Output b = kamera_cli(args);
    EXPECT_NE(b.rc, 0) << args;
    EXPECT_NE(b.err.find(msg), std::string::npos) << args << "\n" << b.err;
  }
  // a tower projecting to another width than the decoder's
  const std::string wide = dir + "kamera-vl-cli-dec-wide.gguf";
  ASSERT_EQ(kamera_cli("make-model --arch qwen2vl --preset tiny --dims dim=96 -o " + wide).rc, 0);
  const Output w = kamera_cli("logits -m " + wide + " -t 1 --mmproj " + mm + " --image " + kImage +
                              " -p '<|vision_start|><image><|vision_end|>'");
  EXPECT_NE(w.rc, 0);
  EXPECT_NE(w.err.find("not a pair"), std::string::npos) << w.err;
  for (const std::string& p : {dec, mm, wide}) std::remove(p.c_str());
}

}  // namespace

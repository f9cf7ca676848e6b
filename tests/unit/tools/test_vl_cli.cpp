// `kamera logits` / `kamera generate` with --mmproj and --image: the CLI's logits after an image
// equal the library's (vision/vl_prompt.h + rope_index.h) on the same files, and every misuse is a
// clear error; the same for a Kimi-VL pair (and `kamera vision-embed` on its tower), with its
// delimiters where the vocabulary has them. Runs the built `kamera` binary on tiny random-weight
// files.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "support/temp_path.h"
#include "support/tiny_models.h"
#include "vision/kimi_chunks.h"
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

// A Kimi-VL pair: the tower's rows through `kamera vision-embed`, the logits after a picture
// through `kamera logits`, equal the library's on the same files; the picture is written bare on
// make-model's random vocabulary and between <|media_start|>image<|media_content|> and
// <|media_end|> on one that has those tokens (make-model --control-tokens).
TEST(VlCli, KimiTowerEmbedsAndPlacesPicturesAsTheLibrary) {
  const std::string dir = unique_temp("");
  const std::string dec = dir + "kamera-vl-cli-kimi.gguf", mm = dir + "kamera-vl-cli-kimi-mm.gguf",
                    delimited = dir + "kamera-vl-cli-kimi-media.gguf";
  const std::string image = std::string(KAMERA_SOURCE_DIR) + "/tests/data/kimivl/img_112x112.png";
  ASSERT_EQ(kamera_cli("make-model --arch deepseek2 --preset kimi-vl-tiny --seed 3 -o " + dec).rc,
            0);
  ASSERT_EQ(kamera_cli("make-model --arch kimivl-mmproj --preset tiny --seed 4 -o " + mm).rc, 0);
  const Output made =
      kamera_cli("make-model --arch deepseek2 --preset kimi-vl-tiny --seed 3 -o " + delimited +
                 " --control-tokens '<|media_start|>,<|media_content|>,<|media_end|>'");
  ASSERT_EQ(made.rc, 0) << made.err;

  // vision-embed: the library's rows
  const Output e = kamera_cli("vision-embed --mmproj " + mm + " --image " + image + " -t 1 --json");
  ASSERT_EQ(e.rc, 0) << e.err;
  const auto ej = nlohmann::json::parse(e.out);
  auto tower = KimiVisionModel::load(mm);
  ASSERT_TRUE(tower.ok()) << tower.message();
  auto img = load_image(image);
  ASSERT_TRUE(img.ok());
  auto patches = kimi_preprocess_image(*img, tower->cfg);
  ASSERT_TRUE(patches.ok());
  ThreadPool threads(1);
  auto lib = KimiVisionEncoder(*tower, &threads).encode(*patches);
  ASSERT_TRUE(lib.ok()) << lib.message();
  EXPECT_EQ(ej["tower"], "kimivl");
  EXPECT_EQ(ej["grid"], nlohmann::json({1, 4, 4}));  // 112 x 112: 8 x 8 patches, 4 x 4 merged
  ASSERT_EQ(ej["embeddings"].size(), size_t(lib->n_rows()));
  std::vector<float> cli_rows;
  for (const auto& r : ej["embeddings"])
    for (float v : r.get<std::vector<float>>()) cli_rows.push_back(v);
  EXPECT_LT(tiny::max_abs_diff(cli_rows, lib->rows), 1e-5);
  EXPECT_NE(kamera_cli("vision-embed --mmproj " + mm + " --frames " + image + "," + image)
                .err.find("--image only"),
            std::string::npos);

  // logits: bare on the random vocabulary, delimited where the tokens are
  for (const std::string& d : {dec, delimited}) {
    auto m = tiny::load(d);
    ASSERT_TRUE(m);
    const VisionDelimiters delims = kimi_delimiters(&*m->tokenizer);
    ASSERT_EQ(delims.empty(), d == dec);
    const std::string prompt = "look " + delims.open_text + "<image>" + delims.close_text + " now";
    const Output o = kamera_cli("logits -m " + d + " --mmproj " + mm + " --image " + image +
                                " -t 1 --json -p '" + prompt + "'");
    ASSERT_EQ(o.rc, 0) << o.err;
    const auto j = nlohmann::json::parse(o.out);
    auto pieces =
        vl_prompt_pieces(*m->tokenizer, prompt, {kimi_image_chunk(*lib)}, delims, m->cfg.dim);
    ASSERT_TRUE(pieces.ok()) << pieces.message();
    ASSERT_EQ(pieces->size(), 3u);  // text, picture, text
    const auto before = j["pieces"][0]["tokens"].get<std::vector<int32_t>>();
    const auto after = j["pieces"][2]["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(before, (*pieces)[0].tokens);
    EXPECT_EQ(after, (*pieces)[2].tokens);
    if (d ==
        delimited) {  // ... <|media_start|> "image" <|media_content|> | rows | <|media_end|> ...
      const int32_t ms = find_piece(*m->tokenizer, kMediaStart),
                    mc = find_piece(*m->tokenizer, kMediaContent),
                    me = find_piece(*m->tokenizer, kMediaEnd);
      const auto word = m->tokenizer->encode_raw("image");
      ASSERT_GE(before.size(), word.size() + 2);
      EXPECT_EQ(before.back(), mc);
      EXPECT_EQ(before[before.size() - word.size() - 2], ms);
      EXPECT_TRUE(std::equal(word.begin(), word.end(), before.end() - 1 - word.size()));
      EXPECT_EQ(after.front(), me);
      // the bare marker is refused where the vocabulary has the delimiters
      const Output bare = kamera_cli("logits -m " + d + " --mmproj " + mm + " --image " + image +
                                     " -t 1 -p 'look <image> now'");
      EXPECT_NE(bare.rc, 0);
      EXPECT_NE(bare.err.find("must be written as <|media_start|>image<|media_content|><image>"),
                std::string::npos)
          << bare.err;
    } else {
      EXPECT_EQ(j["pieces"][1]["image_rows"], 16);
    }
    auto pool = tiny::pool_for(*m, 128);
    Engine engine(*m, 1);
    auto ref = prefill_pieces(engine, *pool, pool->create_sequence(), *pieces, 0, LogitsMode::Last);
    ASSERT_TRUE(ref.ok()) << ref.message();
    EXPECT_LT(tiny::max_abs_diff(*ref, j["logits"][0].get<std::vector<float>>()), 1e-5);
    const Output g = kamera_cli("generate -m " + d + " --mmproj " + mm + " --image " + image +
                                " -t 1 -n 3 --temp 0 --json -p '" + prompt + "'");
    EXPECT_EQ(g.rc, 0) << g.err;
  }
  // a Kimi tower beside a qwen2vl decoder
  const Output q = kamera_cli("logits -m " + tiny::model_path("qwen2vl") + " --mmproj " + mm +
                              " --image " + image + " -t 1 -p '<image>'");
  EXPECT_NE(q.rc, 0);
  EXPECT_NE(q.err.find("deepseek2"), std::string::npos) << q.err;
  for (const std::string& p : {dec, mm, delimited}) std::remove(p.c_str());
}

}  // namespace

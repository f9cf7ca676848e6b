// Qwen2.5-Omni's one mmproj as one tower of both its halves (audio/audio_tower.h) beside the
// committed tiny thinker (tests/data/qwen25o), against llama.cpp d32676d's mtmd on the same files
// (tests/data/qwen25o/README.md, "Pictures and clips in one prompt"): mtmd loads the file's vision
// half as a qwen2.5vl tower and its audio half as qwen2a. A picture of 140 x 112 (sides multiples
// of 28: neither side resizes it), then the 2-s clip, then the picture again, in one user message:
// the vision half's rows, the prompt token for token and position for position (a picture at
// (p, p + row, p + col) advancing max(rows, cols); a clip at (p + i) in t, h and w advancing its
// rows), and the logits after the prompt.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "audio/audio_tower.h"
#include "cache/chunk_cache.h"
#include "context/context.h"
#include "core/thread_pool.h"
#include "media/audio_decode.h"
#include "media/image.h"
#include "support/idefics3_fixture.h"
#include "support/shell.h"
#include "support/tiny_models.h"
#include "vision/qwen_vision_encoder.h"
#include "vision/rope_index.h"

using namespace kamera;
using idefics3_fixture::read_f32;
using idefics3_fixture::rel_diff;
using json = nlohmann::json;

namespace {

const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen25o/";
const std::string kPicture =
    std::string(KAMERA_SOURCE_DIR) + "/tests/data/qwen_vision/img_140x112.png";

bool have_llama_cpp() {
  return bool(std::ifstream(kDir + "llama_cpp_omni.json"));
}

json llama_cpp_chunks() {
  std::ifstream f(kDir + "llama_cpp_omni.json");
  return json::parse(f);
}

std::vector<float> clip_samples() {
  std::ifstream f(kDir + "clip_16k.wav", std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f),
                                   std::istreambuf_iterator<char>()};
  auto a = decode_wav(bytes, "clip_16k.wav");
  EXPECT_TRUE(a.ok()) << a.message();
  return a.ok() ? a->samples : std::vector<float>{};
}

size_t argmax(const float* v, size_t n) {
  return size_t(std::max_element(v, v + n) - v);
}

// "<|im_start|>user\n<__media__>the<__media__>a<__media__>the<|im_end|>\n<|im_start|>assistant\n"
// with the picture, the clip and the picture, as kamera's tower lays it out: text runs (the
// delimiters at their ends) and the media chunks.
struct Prompt {
  std::vector<ChunkContent> pieces;
  std::vector<bool> encoded;  // each media piece: whether the tower ran for it
};

Prompt omni_prompt(const Model& decoder, MediaTower& tower) {
  const Tokenizer& tok = *decoder.tokenizer;
  const VisionDelimiters v = tower.delimiters(), a = tower.audio_delimiters();
  auto text = [&](const std::vector<int32_t>& close, const char* s,
                  const std::vector<int32_t>& open) {
    std::vector<int32_t> ids = close;
    for (int32_t t : tok.encode(s, false)) ids.push_back(t);
    ids.insert(ids.end(), open.begin(), open.end());
    return ChunkContent::from_tokens(std::move(ids));
  };
  auto picture = load_image(kPicture);
  EXPECT_TRUE(picture.ok()) << picture.message();
  Prompt p;
  bool encoded = false;
  auto add = [&](Result<std::shared_ptr<const ChunkContent>> c) {
    EXPECT_TRUE(c.ok()) << c.message();
    if (!c.ok()) return;
    p.pieces.push_back(**c);
    p.encoded.push_back(encoded);
  };
  p.pieces.push_back(text({}, "<|im_start|>user\n", v.open));
  add(tower.chunk(std::span(&*picture, 1), &encoded, 0, {}));
  p.pieces.push_back(text(v.close, "the", a.open));
  add(tower.audio_chunk(clip_samples(), &encoded, {}));
  p.pieces.push_back(text(a.close, "a", v.open));
  add(tower.chunk(std::span(&*picture, 1), &encoded, 0, {}));
  p.pieces.push_back(text(v.close, "the<|im_end|>\n<|im_start|>assistant\n", {}));
  return p;
}

}  // namespace

TEST(OmniVision, VisionHalfMatchesLlamaCppMtmd) {
  auto m = QwenVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->cfg.variant, QwenVisionVariant::Qwen25VL);
  EXPECT_EQ(m->cfg.dim, 32);
  EXPECT_EQ(m->cfg.out_dim, 64);
  auto img = load_image(kPicture);
  ASSERT_TRUE(img.ok()) << img.message();
  auto p = qwen_preprocess_image(*img, QwenImageOptions::from(m->cfg));
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_EQ(p->resized_width, 140);  // no resize: llama.cpp saw the same pixels
  ASSERT_EQ(p->resized_height, 112);
  ThreadPool pool(1);
  auto e = QwenVisionEncoder(*m, &pool).encode(*p);
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->rows.size(), size_t(20 * 64));  // 5 x 4 merged tokens
  if (!have_llama_cpp())
    GTEST_SKIP() << "llama.cpp's view of the picture and the clip is not in tests/data/qwen25o "
                    "(its README says how to make it)";
  const json ref = llama_cpp_chunks();
  const std::vector<float> rows = read_f32(kDir + "llama_cpp_omni_embd.f32");
  int images = 0;
  for (const json& c : ref["chunks"]) {
    if (c.value("media", "") != "image") continue;
    ++images;
    ASSERT_EQ(c["rows"], 20);
    const size_t at = c["offset"].get<size_t>() * 64;
    ASSERT_LE(at + e->rows.size(), rows.size());
    const double rel = rel_diff(e->rows.data(), rows.data() + at, e->rows.size());
    std::printf("vision half, picture %d: kamera vs llama.cpp %.3e of the largest |value|\n",
                images, rel);
    EXPECT_LT(rel, 2e-3);
  }
  EXPECT_EQ(images, 2);
}

// `kamera vision-embed --mmproj OMNI --image` gives the vision half's rows: the tower's above.
TEST(OmniVision, VisionEmbedGivesTheVisionHalfsRows) {
  const ShellOutput o =
      run_shell(std::string(KAMERA_BINARY_DIR) + "/bin/kamera vision-embed --mmproj " + kDir +
                "mmproj.gguf --image " + kPicture + " --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out.substr(0, 300);
  EXPECT_EQ(j["tower"], "qwen2.5o");
  EXPECT_EQ(j["grid"], json::array({1, 4, 5}));
  EXPECT_EQ(j["resized"], json::array({140, 112}));
  std::vector<float> got;
  for (const json& r : j["embeddings"])
    for (const json& v : r) got.push_back(v.get<float>());
  auto m = QwenVisionModel::load(kDir + "mmproj.gguf");
  ASSERT_TRUE(m.ok());
  auto img = load_image(kPicture);
  ASSERT_TRUE(img.ok());
  ThreadPool pool(1);
  auto e = QwenVisionEncoder(*m, &pool).encode(
      *qwen_preprocess_image(*img, QwenImageOptions::from(m->cfg)));
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(got.size(), e->rows.size());
  EXPECT_LT(rel_diff(got.data(), e->rows.data(), got.size()), 1e-6);
}

TEST(OmniVision, OneTowerTakesPicturesAndClips) {
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  auto tower = load_media_tower(kDir + "mmproj.gguf", *model, 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  EXPECT_TRUE((*tower)->takes_audio());
  EXPECT_TRUE((*tower)->takes_video());  // its vision half, timed as Omni (test_omni_video.cpp)
  EXPECT_EQ((*tower)->delimiters().open_text, "<|vision_start|>");  // the vocabulary has both
  EXPECT_EQ((*tower)->audio_delimiters().open_text, "<|audio_bos|>");
  const ImageSize size{140, 112};
  EXPECT_EQ(*(*tower)->rows(std::span(&size, 1)), 20);
  EXPECT_EQ(*(*tower)->audio_rows(32000), 750);
  const Prompt p = omni_prompt(*model, **tower);
  ASSERT_EQ(p.encoded, (std::vector<bool>{true, true, false}));  // the second picture: cached
  EXPECT_EQ(p.pieces[1].embeddings, p.pieces[5].embeddings);
  // the picture towers' loader (chat, C API) takes the file's vision half alone
  auto pictures = MediaTower::load(kDir + "mmproj.gguf", *model, 1, nullptr);
  ASSERT_TRUE(pictures.ok()) << pictures.message();
  EXPECT_FALSE((*pictures)->takes_audio());
  // Qwen2.5-Omni's vocabulary names the picture's tokens <|vision_bos|> / <|vision_eos|>: a
  // vocabulary without <|vision_start|> / <|vision_end|> gets those; without either pair, none
  Vocab v = model->tokenizer->vocab();
  auto rename = [&v](std::string_view piece) {
    for (size_t i = 0; i < v.pieces.size(); ++i)
      if (v.pieces[i] == piece) v.pieces[i] = "<|renamed_" + std::to_string(i) + "|>";
  };
  rename("<|vision_start|>");
  rename("<|vision_end|>");
  auto omni_tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(omni_tok.ok()) << omni_tok.message();
  const VisionDelimiters d = qwen_picture_delimiters(&*omni_tok);
  EXPECT_EQ(d.open_text, "<|vision_bos|>");
  EXPECT_EQ(d.close_text, "<|vision_eos|>");
  EXPECT_EQ(d.open, std::vector<int32_t>{find_piece(*omni_tok, "<|vision_bos|>")});
  rename("<|vision_bos|>");
  auto bare = Tokenizer::from_vocab(v);
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(qwen_picture_delimiters(&*bare).empty());
}

TEST(OmniVision, LayoutAndPositionsMatchLlamaCppMtmd) {
  if (!have_llama_cpp())
    GTEST_SKIP() << "llama.cpp's view of the picture and the clip is not in tests/data/qwen25o "
                    "(its README says how to make it)";
  auto model = tiny::load(kDir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  auto tower = load_media_tower(kDir + "mmproj.gguf", *model, 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  const Prompt p = omni_prompt(*model, **tower);
  const json ref = llama_cpp_chunks();
  ASSERT_EQ(ref["chunks"].size(), p.pieces.size());
  int32_t next = 0;
  const auto positions = place_pieces(p.pieces, 0, &next);
  for (size_t i = 0; i < p.pieces.size(); ++i) {
    SCOPED_TRACE(i);
    const json& c = ref["chunks"][i];
    const ChunkContent& piece = p.pieces[i];
    if (c.contains("text")) {
      EXPECT_EQ(piece.tokens, c["text"].get<std::vector<int32_t>>());
      continue;
    }
    ASSERT_EQ(piece.n(), c["rows"].get<int>());
    EXPECT_EQ(positions[i].front().t, c["pos0"].get<int32_t>());
    EXPECT_EQ(piece.extent(), c["n_pos"].get<int32_t>());
    for (int r = 0; r < piece.n(); ++r) {
      const Pos q = positions[i][size_t(r)];
      const int32_t p0 = c["pos0"].get<int32_t>();
      const std::array<int32_t, 3> want = c["media"] == "image"
                                              ? c["pos"][size_t(r)].get<std::array<int32_t, 3>>()
                                              : std::array<int32_t, 3>{p0 + r, p0 + r, p0 + r};
      ASSERT_EQ((std::array<int32_t, 3>{q.t, q.h, q.w}), want) << "row " << r;
    }
  }
  EXPECT_EQ(next, ref["n_pos"].get<int32_t>());
}

TEST(OmniVision, LogitsAfterPicturesAndClipMatchLlamaCppMtmd) {
  if (!have_llama_cpp())
    GTEST_SKIP() << "llama.cpp's view of the picture and the clip is not in tests/data/qwen25o "
                    "(its README says how to make it)";
  auto ctx = tiny::context(kDir + "decoder.gguf", 1024, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = load_media_tower(kDir + "mmproj.gguf", m, 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  const Prompt p = omni_prompt(m, **tower);
  const std::vector<float> want = read_f32(kDir + "llama_cpp_omni_logits.f32");
  ASSERT_EQ(want.size(), size_t(m.cfg.n_vocab));
  ChunkCache& cc = ctx->cache();
  ScopedSequence s(ctx->pool());
  int32_t at = 0;
  std::vector<float> got;
  for (size_t i = 0; i < p.pieces.size(); ++i) {
    const bool last = i + 1 == p.pieces.size();
    auto r = cc.forward_chunk(s.id(), p.pieces[i], at, last ? LogitsMode::All : LogitsMode::None);
    ASSERT_TRUE(r.ok()) << r.message();
    if (last) got = std::move(r.value());
    at += p.pieces[i].extent();
  }
  const size_t V = size_t(m.cfg.n_vocab);
  ASSERT_GE(got.size(), V);
  const float* logits = got.data() + got.size() - V;
  const double rel = rel_diff(logits, want.data(), V);
  std::printf(
      "logits after picture, clip, picture: kamera vs llama.cpp %.3e of the largest "
      "|logit|\n",
      rel);
  EXPECT_LT(rel, 1e-3);
  EXPECT_EQ(argmax(logits, V), argmax(want.data(), V));
}

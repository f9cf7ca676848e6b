// An Omni mmproj as one tower of both its halves (audio/audio_tower.h) beside its committed tiny
// thinker, against llama.cpp d32676d's mtmd on the same files, for each Omni family:
//   qwen25o    Qwen2.5-Omni (tests/data/qwen25o, README "Pictures and clips in one prompt"): mtmd
//              loads the file's vision half as a qwen2.5vl tower and its audio half as qwen2a,
//              beside a qwen2vl thinker; a picture of 140 x 112 and a 2-s clip (750 rows).
//   qwen3omni  Qwen3-Omni (tests/data/qwen3omni): its vision half as qwen3vl_merger, its audio
//              half as qwen3a, beside a qwen3vlmoe (MoE) thinker; a picture of 288 x 256 and a 2-s
//              clip (39 rows).
// The picture's sides are multiples of the merged patch (neither side resizes it). The picture,
// the clip, then the picture again in one user message: each half's rows, the prompt token for
// token and position for position (a picture at (p, p + row, p + col) advancing max(rows,
// cols); a clip at (p + i) in t, h and w advancing its rows), and the logits after the prompt.
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
#include "support/chunk_relocation.h"
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

const std::string kData = std::string(KAMERA_SOURCE_DIR) + "/tests/data/";

// One Omni family's committed pair and what its tower makes of the picture and the clip.
struct OmniPair {
  const char* name;
  std::string dir, picture;
  int width, height;          // the picture's size (not resized)
  int grid_h, grid_w;         // its merged tokens
  QwenVisionVariant variant;  // the vision half's
  const char* tower;          // `kamera vision-embed --image`'s "tower"
  const char *vision_open, *audio_open;
  int64_t clip_rows;  // the 2-s clip's
};

std::ostream& operator<<(std::ostream& os, const OmniPair& p) {
  return os << p.name;
}

const OmniPair kPairs[] = {
    {"qwen25o", kData + "qwen25o/", kData + "qwen_vision/img_140x112.png", 140, 112, 4, 5,
     QwenVisionVariant::Qwen25VL, "qwen2.5o", "<|vision_start|>", "<|audio_bos|>", 750},
    {"qwen3omni", kData + "qwen3omni/", kData + "qwen3vl/img_288x256.png", 288, 256, 8, 9,
     QwenVisionVariant::Qwen3VL, "qwen3vl_merger", "<|vision_start|>", "<|audio_start|>", 39},
};

std::vector<float> clip_samples(const std::string& dir);

class OmniVision : public ::testing::TestWithParam<OmniPair> {
 protected:
  const OmniPair& P() const { return GetParam(); }
  int picture_rows() const { return P().grid_h * P().grid_w; }
  bool have_llama_cpp() const { return bool(std::ifstream(P().dir + "llama_cpp_omni.json")); }
  json llama_cpp_chunks() const {
    std::ifstream f(P().dir + "llama_cpp_omni.json");
    return json::parse(f);
  }
  // got against the rows of each of mtmd's `media` chunks ("image" | "audio"): `count` of them,
  // each of got's rows, within 2e-3 of their largest |value|.
  void expect_mtmd_rows(const std::vector<float>& got, const char* media, int count) const {
    const std::vector<float> rows = read_f32(P().dir + "llama_cpp_omni_embd.f32");
    int seen = 0;
    const json ref = llama_cpp_chunks();  // (kept: the loop reads into it)
    for (const json& c : ref["chunks"]) {
      if (c.value("media", "") != media) continue;
      ++seen;
      ASSERT_EQ(c["rows"].get<size_t>() * 64, got.size());
      const size_t at = c["offset"].get<size_t>() * 64;
      ASSERT_LE(at + got.size(), rows.size());
      const double rel = rel_diff(got.data(), rows.data() + at, got.size());
      std::printf("%s %s %d: kamera vs llama.cpp %.3e of the largest |value|\n", P().name, media,
                  seen, rel);
      EXPECT_LT(rel, 2e-3);
    }
    EXPECT_EQ(seen, count);
  }
  // The clip's rows from the one tower beside the pair's thinker.
  std::vector<float> tower_clip_rows() const {
    auto model = tiny::load(P().dir + "decoder.gguf");
    EXPECT_TRUE(model && model->tokenizer);
    if (!model) return {};
    auto tower = load_media_tower(P().dir + "mmproj.gguf", *model, 1, nullptr);
    EXPECT_TRUE(tower.ok()) << tower.message();
    if (!tower.ok()) return {};
    auto clip = (*tower)->audio_chunk(clip_samples(P().dir), nullptr, {});
    EXPECT_TRUE(clip.ok()) << clip.message();
    return clip.ok() ? (*clip)->embeddings : std::vector<float>{};
  }
  // `kamera vision-embed --mmproj MMPROJ ARGS --json`'s answer (null when it failed).
  json vision_embed(const std::string& args) const {
    const ShellOutput o =
        run_shell(std::string(KAMERA_BINARY_DIR) + "/bin/kamera vision-embed --mmproj " + P().dir +
                  "mmproj.gguf " + args + " --json");
    EXPECT_EQ(o.rc, 0) << o.err;
    return json::parse(o.out, nullptr, false);
  }
};

#define SKIP_WITHOUT_LLAMA_CPP()                                                       \
  if (!have_llama_cpp())                                                               \
  GTEST_SKIP() << "llama.cpp's view of the picture and the clip is not in " << P().dir \
               << " (its README says how to make it)"

std::vector<float> clip_samples(const std::string& dir) {
  std::ifstream f(dir + "clip_16k.wav", std::ios::binary);
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

Prompt omni_prompt(const OmniPair& pair, const Model& decoder, MediaTower& tower) {
  const Tokenizer& tok = *decoder.tokenizer;
  const VisionDelimiters v = tower.delimiters(), a = tower.audio_delimiters();
  auto text = [&](const std::vector<int32_t>& close, const char* s,
                  const std::vector<int32_t>& open) {
    std::vector<int32_t> ids = close;
    for (int32_t t : tok.encode(s, false)) ids.push_back(t);
    ids.insert(ids.end(), open.begin(), open.end());
    return ChunkContent::from_tokens(std::move(ids));
  };
  auto picture = load_image(pair.picture);
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
  add(tower.audio_chunk(clip_samples(pair.dir), &encoded, {}));
  p.pieces.push_back(text(a.close, "a", v.open));
  add(tower.chunk(std::span(&*picture, 1), &encoded, 0, {}));
  p.pieces.push_back(text(v.close, "the<|im_end|>\n<|im_start|>assistant\n", {}));
  return p;
}

}  // namespace

TEST_P(OmniVision, VisionHalfMatchesLlamaCppMtmd) {
  auto m = QwenVisionModel::load(P().dir + "mmproj.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->cfg.variant, P().variant);
  EXPECT_EQ(m->cfg.dim, 32);
  EXPECT_EQ(m->cfg.out_dim, 64);
  auto img = load_image(P().picture);
  ASSERT_TRUE(img.ok()) << img.message();
  auto p = qwen_preprocess_image(*img, QwenImageOptions::from(m->cfg));
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_EQ(p->resized_width, P().width);  // no resize: llama.cpp saw the same pixels
  ASSERT_EQ(p->resized_height, P().height);
  ThreadPool pool(1);
  auto e = QwenVisionEncoder(*m, &pool).encode(*p);
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->rows.size(), size_t(picture_rows() * 64));
  SKIP_WITHOUT_LLAMA_CPP();
  expect_mtmd_rows(e->rows, "image", 2);
}

// The one tower's clip rows (its audio half) against mtmd's audio chunk of the same prompt.
TEST_P(OmniVision, AudioHalfMatchesLlamaCppMtmd) {
  const std::vector<float> clip = tower_clip_rows();
  ASSERT_EQ(clip.size(), size_t(P().clip_rows * 64));
  SKIP_WITHOUT_LLAMA_CPP();
  expect_mtmd_rows(clip, "audio", 1);
}

// `kamera vision-embed --mmproj OMNI --image` gives the vision half's rows: the tower's above.
TEST_P(OmniVision, VisionEmbedGivesTheVisionHalfsRows) {
  const json j = vision_embed("--image " + P().picture);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["tower"], P().tower);
  EXPECT_EQ(j["grid"], json::array({1, P().grid_h, P().grid_w}));
  EXPECT_EQ(j["resized"], json::array({P().width, P().height}));
  std::vector<float> got;
  for (const json& r : j["embeddings"])
    for (const json& v : r) got.push_back(v.get<float>());
  auto m = QwenVisionModel::load(P().dir + "mmproj.gguf");
  ASSERT_TRUE(m.ok());
  auto img = load_image(P().picture);
  ASSERT_TRUE(img.ok());
  ThreadPool pool(1);
  auto e = QwenVisionEncoder(*m, &pool).encode(
      *qwen_preprocess_image(*img, QwenImageOptions::from(m->cfg)));
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(got.size(), e->rows.size());
  EXPECT_LT(rel_diff(got.data(), e->rows.data(), got.size()), 1e-6);
}

// ... and with --audio the audio half's: the one tower's clip rows.
TEST_P(OmniVision, VisionEmbedAudioGivesTheAudioHalfsRows) {
  const json j = vision_embed("--audio " + P().dir + "clip_16k.wav");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["grid"][1], P().clip_rows);
  std::vector<float> got;
  for (const json& r : j["embeddings"])
    for (const json& v : r) got.push_back(v.get<float>());
  const std::vector<float> want = tower_clip_rows();
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(rel_diff(got.data(), want.data(), got.size()), 1e-6);
}

TEST_P(OmniVision, OneTowerTakesPicturesAndClips) {
  auto model = tiny::load(P().dir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  auto tower = load_media_tower(P().dir + "mmproj.gguf", *model, 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  EXPECT_TRUE((*tower)->takes_audio());
  // Qwen2.5-Omni's vision half takes video, timed as Omni (test_omni_video.cpp); Qwen3-Omni's
  // video timing is not implemented: refused
  EXPECT_EQ((*tower)->takes_video(), std::string(P().name) == "qwen25o");
  EXPECT_EQ((*tower)->delimiters().open_text, P().vision_open);  // the vocabulary has both
  EXPECT_EQ((*tower)->audio_delimiters().open_text, P().audio_open);
  const ImageSize size{P().width, P().height};
  EXPECT_EQ(*(*tower)->rows(std::span(&size, 1)), picture_rows());
  EXPECT_EQ(*(*tower)->audio_rows(32000), P().clip_rows);
  const Prompt p = omni_prompt(P(), *model, **tower);
  ASSERT_EQ(p.encoded, (std::vector<bool>{true, true, false}));  // the second picture: cached
  EXPECT_EQ(p.pieces[1].embeddings, p.pieces[5].embeddings);
  // the picture towers' loader (chat, C API) takes the file's vision half alone
  auto pictures = MediaTower::load(P().dir + "mmproj.gguf", *model, 1, nullptr);
  ASSERT_TRUE(pictures.ok()) << pictures.message();
  EXPECT_FALSE((*pictures)->takes_audio());
}

// Qwen2.5-Omni's vocabulary names the picture's tokens <|vision_bos|> / <|vision_eos|>: a
// vocabulary without <|vision_start|> / <|vision_end|> gets those; without either pair, none.
TEST(OmniVisionDelimiters, AVocabularyWithoutVisionStartGetsVisionBos) {
  auto model = tiny::load(kData + "qwen25o/decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
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

TEST_P(OmniVision, LayoutAndPositionsMatchLlamaCppMtmd) {
  SKIP_WITHOUT_LLAMA_CPP();
  auto model = tiny::load(P().dir + "decoder.gguf");
  ASSERT_TRUE(model && model->tokenizer);
  auto tower = load_media_tower(P().dir + "mmproj.gguf", *model, 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  const Prompt p = omni_prompt(P(), *model, **tower);
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

TEST_P(OmniVision, LogitsAfterPicturesAndClipMatchLlamaCppMtmd) {
  SKIP_WITHOUT_LLAMA_CPP();
  auto ctx = tiny::context(P().dir + "decoder.gguf", 1024, 16, size_t(1) << 26, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = load_media_tower(P().dir + "mmproj.gguf", m, 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  const Prompt p = omni_prompt(P(), m, **tower);
  const std::vector<float> want = read_f32(P().dir + "llama_cpp_omni_logits.f32");
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
      "%s logits after picture, clip, picture: kamera vs llama.cpp %.3e of the largest "
      "|logit|\n",
      P().name, rel);
  EXPECT_LT(rel, 1e-3);
  EXPECT_EQ(argmax(logits, V), argmax(want.data(), V));
}

// The picture's and the clip's chunks from the one tower, each placed from its canonical KV at
// 1, 10 and 1201 (behind token 1), give the next logits of a fresh prefill of it there.
TEST_P(OmniVision, PictureAndClipRelocateExactly) {
  auto ctx = tiny::context(P().dir + "decoder.gguf", 2048, 16, size_t(1) << 27, 1);
  ASSERT_TRUE(ctx);
  const Model& m = ctx->model();
  auto tower = load_media_tower(P().dir + "mmproj.gguf", m, 1, nullptr);
  ASSERT_TRUE(tower.ok()) << tower.message();
  const Prompt p = omni_prompt(P(), m, **tower);
  const ChunkContent q = ChunkContent::from_tokens({7, 100, 116});
  for (size_t i : {size_t(1), size_t(3)}) {  // the picture, the clip
    SCOPED_TRACE(i);
    chunk_relocation::expect_relocates(*ctx, p.pieces[i], q, {0, 9, 1200}, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, OmniVision, ::testing::ValuesIn(kPairs),
                         [](const ::testing::TestParamInfo<OmniPair>& i) {
                           return std::string(i.param.name);
                         });

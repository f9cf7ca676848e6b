// The C API (include/kamera.h, libkamera.so) against the C++ library it wraps, on the committed
// mini-VL: the same frames give the same chunk ids, the same canonical KV, and bit-identical
// logits under every serving policy and through a window.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "context/context.h"
#include "kamera.h"
#include "minivl/minivl.h"
#include "vision/frame_chunk.h"
#include "window/window.h"

using namespace kamera;

namespace {

std::string repo(const char* rel) {
  return std::string(KAMERA_SOURCE_DIR) + "/" + rel;
}

struct CApiHandles {
  kamera_model* model = nullptr;
  kamera_vision* vision = nullptr;
  kamera_context* ctx = nullptr;
  std::vector<kamera_chunk*> chunks;
  ~CApiHandles() {
    for (auto* c : chunks) kamera_chunk_free(c);
    kamera_context_free(ctx);
    kamera_vision_free(vision);
    kamera_model_free(model);
  }
};

std::vector<float> logits_of(kamera_logits* l) {
  std::vector<float> v;
  if (l)
    v.assign(kamera_logits_data(l),
             kamera_logits_data(l) + size_t(kamera_logits_rows(l)) * kamera_logits_n_vocab(l));
  kamera_logits_free(l);
  return v;
}

class CApiCross : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(kamera_model_load(repo(minivl::kDecoderFile).c_str(), nullptr, &c.model), KAMERA_OK)
        << kamera_last_error();
    ASSERT_EQ(kamera_vision_load(repo(minivl::kVisionFile).c_str(), &c.vision), KAMERA_OK)
        << kamera_last_error();
    ASSERT_EQ(kamera_context_new(c.model, nullptr, &c.ctx), KAMERA_OK) << kamera_last_error();
    auto mv = minivl::MiniVl::load(repo(minivl::kDecoderFile), repo(minivl::kVisionFile));
    ASSERT_TRUE(mv.ok()) << mv.message();
    mini = std::make_unique<minivl::MiniVl>(std::move(mv.value()));
    auto ctx = Context::create(mini->decoder, {});
    ASSERT_TRUE(ctx.ok()) << ctx.message();
    cpp = std::move(ctx.value());
    const minivl::Clip clip = minivl::make_clip(minivl::Split::Test, 3);
    VisionEncoder enc(mini->vision);
    for (int f = 0; f < 4; ++f) {
      const auto& rgb = clip.frames[size_t(f)].rgb;
      auto fc = frame_chunk(enc, clip.frames[size_t(f)].rgb);
      ASSERT_TRUE(fc.ok()) << fc.message();
      frames.push_back(std::move(fc.value()));
      kamera_chunk* ch = nullptr;
      ASSERT_EQ(kamera_vision_encode(c.vision, c.model, rgb.data(), rgb.size(), &ch), KAMERA_OK)
          << kamera_last_error();
      c.chunks.push_back(ch);
    }
    question = minivl::text_chunk(clip.questions[0].tokens);
    kamera_chunk* q = nullptr;
    ASSERT_EQ(kamera_chunk_from_tokens(c.model, question.tokens.data(), question.n(), &q),
              KAMERA_OK);
    c.chunks.push_back(q);
  }

  // The question's logits (every position) behind the frames served by each library.
  std::vector<float> via_c(kamera_policy policy, int rank) {
    kamera_serve_options o = kamera_serve_default_options();
    o.policy = policy;
    o.rank = rank;
    kamera_seq* seq = nullptr;
    kamera_logits* l = nullptr;
    EXPECT_EQ(kamera_seq_assemble(c.ctx, c.chunks.data(), 4, &o, &seq), KAMERA_OK)
        << kamera_last_error();
    EXPECT_EQ(kamera_seq_eval_chunk(seq, c.chunks[4], KAMERA_LOGITS_ALL, &l), KAMERA_OK)
        << kamera_last_error();
    kamera_seq_free(seq);
    return logits_of(l);
  }
  std::vector<float> via_cpp(ServePolicy policy, int rank) {
    ServeOptions o;
    o.policy = policy;
    o.patch.rank = rank;
    o.patch.cap_rank = true;
    ScopedSequence seq(cpp->pool());
    auto rep = cpp->cache().assemble(seq.id(), frames, o);
    EXPECT_TRUE(rep.ok()) << rep.message();
    if (!rep.ok()) return {};
    auto l = cpp->cache().forward_chunk(seq.id(), question, rep->next_position, LogitsMode::All);
    EXPECT_TRUE(l.ok()) << l.message();
    return l.ok() ? *l : std::vector<float>{};
  }

  CApiHandles c;
  std::unique_ptr<minivl::MiniVl> mini;
  std::unique_ptr<Context> cpp;
  std::vector<ChunkContent> frames;
  ChunkContent question;
};

TEST_F(CApiCross, ChunkIdsAndCanonicalKvAreTheLibrarys) {
  for (int f = 0; f < 4; ++f) {
    char hex[KAMERA_ID_HEX_SIZE];
    ASSERT_EQ(kamera_chunk_id(c.chunks[size_t(f)], hex), KAMERA_OK);
    EXPECT_EQ(std::string(hex), cpp->cache().id_of(frames[size_t(f)]).hex());
    ASSERT_EQ(kamera_context_cache_chunk(c.ctx, c.chunks[size_t(f)], nullptr), KAMERA_OK);
    auto canon = cpp->cache().canonical(frames[size_t(f)]);
    ASSERT_TRUE(canon.ok()) << canon.message();
    const ChunkKV& kv = (*canon)->kv;
    for (int l = 0; l < kv.layout.n_layers; ++l)
      for (int ch = 0; ch < 2; ++ch) {
        const float* data = nullptr;
        int32_t rows = 0, cols = 0;
        ASSERT_EQ(kamera_chunk_kv(c.chunks[size_t(f)], l, ch, &data, &rows, &cols), KAMERA_OK);
        ASSERT_EQ(rows, kv.at(l, ch).rows());
        ASSERT_EQ(cols, kv.at(l, ch).cols());
        EXPECT_EQ(std::memcmp(data, kv.at(l, ch).f32_data(), size_t(rows) * cols * 4), 0)
            << "layer " << l << " channel " << ch;
      }
  }
}

TEST_F(CApiCross, ServedLogitsAreBitIdenticalUnderEveryPolicy) {
  EXPECT_EQ(via_c(KAMERA_POLICY_REPREFILL, 0), via_cpp(ServePolicy::Reprefill, 0));
  EXPECT_EQ(via_c(KAMERA_POLICY_BLIND, 0), via_cpp(ServePolicy::Blind, 0));
  for (int rank : {1, 3, KAMERA_FULL_RANK}) {
    const std::vector<float> a = via_c(KAMERA_POLICY_PATCH, rank);
    EXPECT_EQ(a.size(), size_t(question.n()) * 64);
    EXPECT_EQ(a, via_cpp(ServePolicy::Patch, rank)) << "rank " << rank;
  }
}

TEST_F(CApiCross, WindowQueryIsTheLibrarys) {
  kamera_window_policy p = kamera_window_default_policy();
  p.rank = 2;
  kamera_window* w = nullptr;
  ASSERT_EQ(kamera_window_new(c.ctx, &p, &w), KAMERA_OK) << kamera_last_error();
  WindowPolicy wp;
  wp.rank = 2;
  auto win = Window::create(*cpp, wp);
  ASSERT_TRUE(win.ok()) << win.message();
  for (int f = 0; f < 4; ++f) {
    ASSERT_EQ(kamera_window_admit_back(w, c.chunks[size_t(f)]), KAMERA_OK) << kamera_last_error();
    ASSERT_TRUE((*win)->admit_back(frames[size_t(f)]).ok());
  }
  ASSERT_EQ(kamera_window_evict(w, 1), KAMERA_OK);
  ASSERT_TRUE((*win)->evict(1).ok());
  kamera_logits* l = nullptr;
  ASSERT_EQ(kamera_window_query(w, c.chunks[4], KAMERA_LOGITS_ALL, &l), KAMERA_OK);
  auto want = (*win)->query(question, LogitsMode::All);
  ASSERT_TRUE(want.ok()) << want.message();
  EXPECT_EQ(logits_of(l), *want);
  kamera_window_free(w);
}

}  // namespace

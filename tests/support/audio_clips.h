// What the audio-chunk tests share (Qwen2.5-Omni's and Qwen3's towers): a committed WAV's samples,
// and the check that a clip cache (audio/audio_chunks.h) encodes a clip once, another clip again,
// and that the clip's chunk relocates exactly.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audio/audio_chunks.h"
#include "media/audio_decode.h"
#include "support/chunk_relocation.h"

namespace audio_clips {

// The samples of the WAV at `path` (16 kHz expected).
inline std::vector<float> wav_samples(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f),
                                   std::istreambuf_iterator<char>()};
  auto a = kamera::decode_wav(bytes, path);
  EXPECT_TRUE(a.ok()) << a.message();
  if (!a.ok()) return {};
  EXPECT_EQ(a->sample_rate, 16000);
  return a->samples;
}

// A prompt as llama.cpp's mtmd chunked it (tests/data/idefics3/mtmd_dump.cpp's JSON at `path`):
// the text before the clip (ending in the open delimiter), after it (from the close delimiter),
// and the rows of each audio chunk between.
struct MtmdPrompt {
  std::vector<int32_t> before, after;
  std::vector<int> rows;
};

inline MtmdPrompt read_mtmd_prompt(const std::string& path) {
  std::ifstream jf(path);
  const auto ref = nlohmann::json::parse(jf);
  MtmdPrompt p;
  for (const auto& c : ref["chunks"]) {
    if (c.contains("image")) {  // mtmd_dump writes every media chunk so
      p.rows.push_back(c["image"].get<int>());
      continue;
    }
    for (int32_t t : c["text"]) (p.rows.empty() ? p.before : p.after).push_back(t);
  }
  return p;
}

// p.before, the clip's chunk, p.after decoded in ctx from position 0: the last row's logits
// against llama.cpp's (the f32 file `want_path`) within 1e-3 of their largest |logit| (printed),
// the same argmax.
inline void expect_logits_after_clip(kamera::Context& ctx, const MtmdPrompt& p,
                                     const kamera::ChunkContent& clip,
                                     const std::string& want_path) {
  using namespace kamera;
  const std::vector<float> want = idefics3_fixture::read_f32(want_path);
  const size_t V = size_t(ctx.model().cfg.n_vocab);
  ASSERT_EQ(want.size(), V);
  ChunkCache& cc = ctx.cache();
  ScopedSequence s(ctx.pool());
  const int32_t nb = int32_t(p.before.size());
  ASSERT_TRUE(cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.before), 0).ok());
  ASSERT_TRUE(cc.forward_chunk(s.id(), clip, nb).ok());
  auto got =
      cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.after), nb + clip.n(), LogitsMode::All);
  ASSERT_TRUE(got.ok()) << got.message();
  const float* last = got->data() + got->size() - V;
  const double rel = idefics3_fixture::rel_diff(last, want.data(), V);
  std::printf("logits after the clip: kamera vs llama.cpp %.3e of the largest |logit|\n", rel);
  EXPECT_LT(rel, 1e-3);
  EXPECT_EQ(std::max_element(last, last + V) - last,
            std::max_element(want.begin(), want.end()) - want.begin());
}

// The same samples are not encoded again (the kept chunk), one changed sample is another clip;
// the clip's canonical placed at 1, 10, 1201 gives a fresh prefill's logits there within 1e-5.
inline void expect_encoded_once_and_relocates(kamera::Context& ctx, kamera::AudioClipCache& clips,
                                              const std::vector<float>& samples) {
  using namespace kamera;
  bool encoded = false;
  auto clip = clips.clip(samples, &encoded);
  ASSERT_TRUE(clip.ok()) << clip.message();
  EXPECT_TRUE(encoded);
  auto again = clips.clip(samples, &encoded);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(encoded);
  EXPECT_EQ(again->get(), clip->get());
  std::vector<float> other = samples;
  other[100] += 0.01f;
  auto third = clips.clip(other, &encoded);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(encoded);
  EXPECT_NE((*third)->embeddings, (*clip)->embeddings);
  EXPECT_EQ(clips.stats().encodes, 2);
  EXPECT_EQ(clips.stats().hits, 1);
  chunk_relocation::expect_relocates(ctx, **clip, ChunkContent::from_tokens({7, 262, 266}),
                                     {0, 9, 1200}, 1e-5);
}

}  // namespace audio_clips

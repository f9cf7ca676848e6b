// What the audio-chunk tests share (Qwen2.5-Omni's and Qwen3's towers): a committed WAV's samples,
// and the check that a clip cache (audio/audio_chunks.h) encodes a clip once, another clip again,
// and that the clip's chunk relocates exactly.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "audio/audio_chunks.h"
#include "core/thread_pool.h"
#include "media/audio_decode.h"
#include "support/chunk_relocation.h"
#include "support/mtmd_reference.h"
#include "support/tiny_models.h"

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

// llama.cpp's mtmd view of a clip's prompt (support/mtmd_reference.h).
using mtmd_reference::MtmdPrompt;
using mtmd_reference::read_mtmd_prompt;

// p.before, the clip's chunk, p.after decoded in ctx against llama.cpp's logits (the f32 file
// `want_path`): within 1e-3 of their largest |logit|, the same argmax (mtmd_reference.h).
inline void expect_logits_after_clip(kamera::Context& ctx, const MtmdPrompt& p,
                                     const kamera::ChunkContent& clip,
                                     const std::string& want_path) {
  mtmd_reference::expect_logits_after(ctx, p, clip, want_path,
                                      "logits after the clip: kamera vs llama.cpp");
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

// f(clips, samples): Clips over the Tower of dir/mmproj.gguf beside a context of dir/decoder.gguf
// (n_ctx positions, kv_bytes of KV), on one thread, and the samples of dir/clip_16k.wav.
template <class Tower, class Clips, class F>
void with_clips(const std::string& dir, int n_ctx, size_t kv_bytes, F&& f) {
  using namespace kamera;
  auto ctx = tiny::context(dir + "decoder.gguf", n_ctx, 16, kv_bytes, 1);
  ASSERT_TRUE(ctx);
  auto tower = Tower::load(dir + "mmproj.gguf");
  ASSERT_TRUE(tower.ok()) << tower.message();
  ThreadPool pool(1);
  Clips clips(*tower, ctx->model().fingerprint, &pool);
  f(*ctx, clips, wav_samples(dir + "clip_16k.wav"));
}

// The committed clip of dir as a chunk of `rows` rows, row `at` at linear position `at`
// (t = h = w), then the logits after it in llama.cpp's prompt (dir/llama_cpp.json) against
// llama.cpp's (dir/llama_cpp_logits.f32), as expect_logits_after_clip checks them.
template <class Tower, class Clips>
void expect_clip_logits_match(const std::string& dir, int rows, int at) {
  using namespace kamera;
  with_clips<Tower, Clips>(dir, 1024, size_t(1) << 26,
                           [&](Context& ctx, Clips& clips, const std::vector<float>& samples) {
                             auto clip = clips.clip(samples);
                             ASSERT_TRUE(clip.ok()) << clip.message();
                             ASSERT_EQ((*clip)->n(), rows);
                             EXPECT_EQ((*clip)->layout[size_t(at)], Pos::linear(at));
                             expect_logits_after_clip(ctx, read_mtmd_prompt(dir + "llama_cpp.json"),
                                                      **clip, dir + "llama_cpp_logits.f32");
                           });
}

// expect_encoded_once_and_relocates on the committed clip of dir, its Clips over the Tower of
// dir/mmproj.gguf beside dir/decoder.gguf.
template <class Tower, class Clips>
void expect_clip_encoded_once_and_relocates(const std::string& dir) {
  with_clips<Tower, Clips>(
      dir, 4096, size_t(1) << 28,
      [](kamera::Context& ctx, Clips& clips, const std::vector<float>& samples) {
        expect_encoded_once_and_relocates(ctx, clips, samples);
      });
}

}  // namespace audio_clips

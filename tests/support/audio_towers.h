// What the audio-tower tests share (Qwen2.5-Omni's tower, tests/data/qwen25o; Qwen3-ASR's,
// tests/data/qwen3a): an encoder's rows against reference rows (float64 numpy's or llama.cpp's
// mtmd), the control that rows one step off do not match, and the refusals of every encoder.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "media/log_mel.h"
#include "support/idefics3_fixture.h"  // read_f32, rel_diff

namespace audio_towers {

// The shape the committed tiny towers share (tests/data/qwen25o, tests/data/qwen3a: the A of their
// generators): 128 mel bins, width 32, 2 layers of 4 heads, MLP 48, rows of width 64, 1500
// positions, layer-norm epsilon 1e-5.
template <class Config>
void expect_tiny_tower_shape(const Config& c) {
  EXPECT_EQ(c.n_mels, 128);
  EXPECT_EQ(c.dim, 32);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.ffn_dim, 48);
  EXPECT_EQ(c.out_dim, 64);
  EXPECT_EQ(c.n_pos, 1500);
  EXPECT_FLOAT_EQ(c.eps, 1e-5f);
}

// Encoder over `tower` (on `pool`, or the calling thread) encoding `windows`: n_values values,
// max |kamera - reference| / max |reference| below `bound` (printed after `label`), the reference
// being the f32 file `want_path`. Kamera's rows go to `rows` when given.
template <class Encoder, class Tower>
void expect_rows_match(const Tower& tower, kamera::ThreadPool* pool,
                       std::span<const kamera::LogMel> windows, const std::string& want_path,
                       size_t n_values, double bound, const char* label,
                       std::vector<float>* rows = nullptr) {
  const std::vector<float> want = idefics3_fixture::read_f32(want_path);
  ASSERT_EQ(want.size(), n_values);
  Encoder enc(tower, pool);
  auto e = enc.encode(windows, {});
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->size(), want.size());
  const double rel = idefics3_fixture::rel_diff(e->data(), want.data(), e->size());
  std::printf("%s %.3e of the largest |value|\n", label, rel);
  EXPECT_LT(rel, bound);
  if (rows) *rows = std::move(*e);
}

// The check can fail: kamera's rows moved by `shift` values (row r takes the row `shift` values
// on) are further than `floor` from the reference rows of the f32 file `want_path`.
inline void expect_shifted_rows_differ(std::vector<float> rows, const std::string& want_path,
                                       size_t shift, double floor) {
  const std::vector<float> want = idefics3_fixture::read_f32(want_path);
  ASSERT_EQ(rows.size(), want.size());
  ASSERT_LT(shift, rows.size());
  std::rotate(rows.begin(), rows.begin() + std::ptrdiff_t(shift), rows.end());
  EXPECT_GT(idefics3_fixture::rel_diff(rows.data(), want.data(), rows.size()), floor);
}

// A stop that answers true ends the encode ("stopped"); a window of 80 mel bins and `frames`
// frames is refused by name ("80 mel bins").
template <class Encoder>
void expect_stop_and_mel_bins_refused(Encoder& enc, std::span<const kamera::LogMel> windows,
                                      int frames) {
  using namespace kamera;
  auto e = enc.encode(windows, [] { return true; });
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("stopped"), std::string::npos) << e.message();
  LogMel wrong{80, frames, std::vector<float>(80 * size_t(frames))};
  auto w = enc.encode(std::span<const LogMel>(&wrong, 1), {});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("80 mel bins"), std::string::npos) << w.message();
}

}  // namespace audio_towers

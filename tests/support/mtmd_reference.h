// llama.cpp d32676d's mtmd view of a media prompt, as the media-chunk tests read it
// (tests/data/idefics3/mtmd_dump.cpp's JSON and logits): the text around the media chunks and the
// check that kamera's decode of the same prompt ends on llama.cpp's logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/chunk_cache.h"
#include "context/context.h"
#include "support/idefics3_fixture.h"  // read_f32, rel_diff
#include "vision/vl_prompt.h"

namespace mtmd_reference {

// A prompt as llama.cpp's mtmd chunked it: the text before the media (ending in the open
// delimiter), after it (from the close delimiter), and the rows of each media chunk between.
struct MtmdPrompt {
  std::vector<int32_t> before, after;
  std::vector<int> rows;
};

// mtmd_dump's JSON at `path` (it writes every media chunk, picture or clip, as {"image": rows}).
inline MtmdPrompt read_mtmd_prompt(const std::string& path) {
  std::ifstream jf(path);
  const auto ref = nlohmann::json::parse(jf);
  MtmdPrompt p;
  for (const auto& c : ref["chunks"]) {
    if (c.contains("image")) {
      p.rows.push_back(c["image"].get<int>());
      continue;
    }
    for (int32_t t : c["text"]) (p.rows.empty() ? p.before : p.after).push_back(t);
  }
  return p;
}

// kamera's text around the media (`before` then the open delimiter; the close delimiter then
// `after`, each text encoded without added specials) equal to llama.cpp's chunks of it.
inline void expect_text_around(const kamera::Tokenizer& tok, const kamera::VisionDelimiters& d,
                               const char* before, const char* after, const MtmdPrompt& p) {
  std::vector<int32_t> b = tok.encode(before, false);
  b.insert(b.end(), d.open.begin(), d.open.end());
  std::vector<int32_t> a = d.close;
  for (int32_t t : tok.encode(after, false)) a.push_back(t);
  EXPECT_EQ(b, p.before);
  EXPECT_EQ(a, p.after);
}

// mtmd_dump's chunks at `path` in one run: the text tokens, -1 where a media chunk stands.
inline std::vector<int32_t> read_flat_prompt(const std::string& path) {
  std::ifstream jf(path);
  const auto ref = nlohmann::json::parse(jf);
  std::vector<int32_t> flat;
  for (const auto& c : ref["chunks"])
    if (c.contains("image"))
      flat.push_back(-1);
    else
      for (int32_t t : c["text"]) flat.push_back(t);
  return flat;
}

// p.before, the media chunk, p.after decoded as chunks in a fresh sequence of ctx from position 0:
// the logits of the last row (none where a decode failed, which fails the test).
inline std::vector<float> last_logits_after(kamera::Context& ctx, const MtmdPrompt& p,
                                            const kamera::ChunkContent& media) {
  using namespace kamera;
  ChunkCache& cc = ctx.cache();
  ScopedSequence s(ctx.pool());
  const int32_t nb = int32_t(p.before.size());
  if (!cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.before), 0).ok() ||
      !cc.forward_chunk(s.id(), media, nb).ok()) {
    ADD_FAILURE() << "the text before the media or the media did not decode";
    return {};
  }
  auto got =
      cc.forward_chunk(s.id(), ChunkContent::from_tokens(p.after), nb + media.n(), LogitsMode::All);
  EXPECT_TRUE(got.ok()) << got.message();
  if (!got.ok()) return {};
  const size_t V = size_t(ctx.model().cfg.n_vocab);
  return std::vector<float>(got->end() - std::ptrdiff_t(V), got->end());
}

// The last row's logits of that decode against llama.cpp's (the f32 file `want_path`): within
// 1e-3 of their largest |logit| (printed after `label`), the same argmax.
inline void expect_logits_after(kamera::Context& ctx, const MtmdPrompt& p,
                                const kamera::ChunkContent& media, const std::string& want_path,
                                const char* label) {
  const std::vector<float> want = idefics3_fixture::read_f32(want_path);
  const size_t V = size_t(ctx.model().cfg.n_vocab);
  ASSERT_EQ(want.size(), V);
  const std::vector<float> last = last_logits_after(ctx, p, media);
  ASSERT_EQ(last.size(), V);
  const double rel = idefics3_fixture::rel_diff(last.data(), want.data(), V);
  std::printf("%s %.3e of the largest |logit|\n", label, rel);
  EXPECT_LT(rel, 1e-3);
  EXPECT_EQ(std::max_element(last.begin(), last.end()) - last.begin(),
            std::max_element(want.begin(), want.end()) - want.begin());
}

}  // namespace mtmd_reference

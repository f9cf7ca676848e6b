// The estimate bench's groups: from the reuse items (text) and from the mini-VL's clips (frames).
#include <random>

#include "bench/estimate_bench.h"
#include "vision/frame_chunk.h"

namespace kamera {

std::vector<EstimateGroup> text_estimate_groups(const Model& m, const std::vector<ReuseItem>& items,
                                                int antecedents, uint64_t seed,
                                                std::vector<ChunkContent>& pool) {
  int longest_query = 0;
  for (const auto& it : items) longest_query = std::max(longest_query, it.query.n());
  const int cap = std::max(1, (m.cfg.ctx_len - 1 - longest_query) / (antecedents + 1));
  pool.clear();
  for (const auto& it : items) {
    pool.push_back(truncated(it.antecedent, cap));
    pool.push_back(truncated(it.chunk, cap));
  }
  std::mt19937 rng{uint32_t(seed)};
  std::vector<EstimateGroup> groups;
  for (const auto& it : items) {
    EstimateGroup g;
    g.segment = truncated(it.chunk, cap);
    g.query = it.query;
    const ChunkContent a = truncated(it.antecedent, cap);
    g.context.reserve(size_t(antecedents));  // `used` points into it
    std::vector<const std::vector<int32_t>*> used = {&g.segment.tokens, &a.tokens};
    for (int tries = 0; int(g.context.size()) + 1 < antecedents && tries < 10000; ++tries) {
      const ChunkContent& c = pool[rng() % pool.size()];
      bool seen = false;
      for (const auto* u : used) seen = seen || *u == c.tokens;
      if (seen) continue;
      g.context.push_back(c);
      used.push_back(&g.context.back().tokens);
    }
    g.context.push_back(a);
    groups.push_back(std::move(g));
  }
  return groups;
}

Result<std::vector<EstimateGroup>> minivl_estimate_groups(const minivl::MiniVl& mv, int n_clips,
                                                          int first_clip, int antecedents,
                                                          std::vector<ChunkContent>& pool) {
  if (antecedents < 2 || antecedents > 5)
    return make_error(ErrorCode::InvalidArgument, "mini-VL groups: antecedents {} not in [2, 5]",
                      antecedents);
  VisionEncoder enc(mv.vision);
  minivl::ClipSpec spec;  // six frames, as trained
  std::vector<EstimateGroup> groups;
  pool.clear();
  for (int ci = 0; ci < n_clips; ++ci) {
    const minivl::Clip clip =
        minivl::make_clip(minivl::Split::Test, uint64_t(first_clip + ci), spec);
    std::vector<ChunkContent> frames;
    for (const auto& f : clip.frames) {
      KAMERA_ASSIGN_OR_RETURN(ChunkContent c, frame_chunk(enc, f.rgb));
      frames.push_back(std::move(c));
    }
    if (clip.questions.empty()) continue;
    const minivl::Question* q = &clip.questions[0];
    for (const auto& x : clip.questions)
      if (x.family == minivl::Family::CrossFrame) {
        q = &x;
        break;
      }
    EstimateGroup g;
    g.context.assign(frames.begin(), frames.begin() + antecedents);
    g.segment = frames[size_t(antecedents)];
    g.query = minivl::text_chunk(q->tokens);
    groups.push_back(std::move(g));
    for (auto& f : frames) pool.push_back(std::move(f));
  }
  return groups;
}

}  // namespace kamera

#include "cache/prompt_plan.h"

#include "core/mix.h"

namespace kamera {

namespace {

bool is_control(const Tokenizer& tok, int32_t id) {
  const auto& types = tok.vocab().types;
  return id >= 0 && size_t(id) < types.size() && types[size_t(id)] == TokenType::Control;
}

// Where a segment may end after token i (before i + 1): at a turn's end always (a line ended by a
// control token, <|im_end|>\n; two control tokens, Llama 3's <|eot_id|><|start_header_id|>), at
// another line's end once the segment is long enough.
enum class Cut { None, Line, Turn };

Cut cut_after(const Tokenizer& tok, std::span<const int32_t> ids, size_t i) {
  if (i + 1 >= ids.size()) return Cut::None;
  if (is_control(tok, ids[i]) && is_control(tok, ids[i + 1])) return Cut::Turn;
  const std::string p = tok.piece(ids[i]);
  if (p.empty() || p.back() != '\n') return Cut::None;
  return i > 0 && is_control(tok, ids[i - 1]) ? Cut::Turn : Cut::Line;
}

}  // namespace

std::vector<TokenSpan> cut_segments(const Tokenizer& tok, std::span<const int32_t> ids,
                                    int min_tokens) {
  std::vector<TokenSpan> out;
  int begin = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int end = int(i) + 1;
    const Cut c = cut_after(tok, ids, i);
    if (c == Cut::None || (c == Cut::Line && end - begin < min_tokens)) continue;
    out.push_back({begin, end});
    begin = end;
  }
  if (begin < int(ids.size())) out.push_back({begin, int(ids.size())});
  return out;
}

bool PromptPlan::has_media() const {
  for (const PromptSegment& s : segments)
    if (s.image) return true;
  return false;
}

PromptPlan plan_start(const ChunkCache& cache, ReusePolicy policy) {
  PromptPlan p;
  p.ids = cache.anchor();
  p.policy = policy;
  p.next_position = cache.anchor_extent();
  return p;
}

void plan_text(PromptPlan& plan, const ChunkCache& cache, const Tokenizer* tok,
               std::span<const int32_t> tokens) {
  const int begin = int(plan.ids.size());
  plan.ids.insert(plan.ids.end(), tokens.begin(), tokens.end());
  const std::vector<TokenSpan> cuts =
      tok ? cut_segments(*tok, tokens) : std::vector<TokenSpan>{{0, int(tokens.size())}};
  for (TokenSpan s : cuts) {
    const ChunkId id =
        cache.id_of(ChunkContent::from_tokens({tokens.begin() + s.begin, tokens.begin() + s.end}));
    plan.segments.push_back(
        {{begin + s.begin, begin + s.end}, id, plan.next_position + s.begin, nullptr});
  }
  plan.next_position += int32_t(tokens.size());
}

void plan_media(PromptPlan& plan, const ChunkId& id, std::shared_ptr<const ChunkContent> media) {
  const int begin = int(plan.ids.size());
  for (int64_t i = 0; i < media->n(); ++i) plan.ids.push_back(media_slot(id, i));
  const int32_t extent = media->extent();
  plan.segments.push_back(
      {{begin, int(plan.ids.size())}, id, plan.next_position, std::move(media)});
  plan.next_position += extent;
}

int32_t media_slot(const ChunkId& id, int64_t row) {
  const uint64_t h = mix64_finalize(id.lo ^ (id.hi + uint64_t(row + 1) * 0x9e3779b97f4a7c15ull));
  return -2 - int32_t(h & 0x3fffffff);
}

}  // namespace kamera

#include "server/prompt_tokens.h"

#include <algorithm>

#include "server/prompt_parts.h"

namespace kamera {

namespace {

bool is_image(const GenRequest& r, size_t i) {
  return i < r.parts.size() && r.parts[i].is_chunk && r.media && r.media->find(r.parts[i].id);
}

// r.prompt_ids: the anchor, then every part's tokens; with a tokenizer, r.segments: their spans
// past the anchor.
void segment_prompt(const ChunkCache& cache, const Tokenizer* tok, GenRequest& r) {
  std::vector<int32_t>& all = r.prompt_ids;
  all = cache.anchor();
  for (const PromptPart& p : r.parts) all.insert(all.end(), p.tokens.begin(), p.tokens.end());
  const int anchor = cache.anchor_extent();
  r.segments.clear();
  if (!tok) return;
  for (TokenSpan s : cut_segments(*tok, std::span(all).subspan(size_t(anchor)))) {
    s.begin += anchor;
    s.end += anchor;
    const auto first = all.begin() + s.begin;
    r.segments.push_back({s, cache.id_of(ChunkContent::from_tokens({first, first + s.size()}))});
  }
}

}  // namespace

bool text_only(const GenRequest& r) {
  return r.window_id.empty() && std::none_of(r.parts.begin(), r.parts.end(),
                                             [](const PromptPart& p) { return p.is_chunk; });
}

Result<std::vector<int32_t>> part_tokens(const Model& model, const GenRequest& r, size_t i,
                                         bool control_everywhere) {
  const PromptPart& p = r.parts[i];
  if (!p.tokens.empty()) return p.tokens;  // token ids (checked against the vocabulary)
  if (!model.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "this model has no tokenizer: send token chunks");
  const ControlSpots spots{i > 0 && is_image(r, i - 1), is_image(r, i + 1), control_everywhere};
  // Text is cut against the context: past it the prompt is refused anyway (at admission), so
  // tokenizing stops there.
  auto ids = text_part_ids(*model.tokenizer, p, i == 0 && r.window_id.empty(), spots,
                           size_t(model.cfg.ctx_len));
  if (ids.empty())
    return make_error(ErrorCode::InvalidArgument, "a text part is empty after tokenization");
  return ids;
}

Status tokenize_prompt(const ChunkCache& cache, GenRequest& r, const TokenizeOptions& o) {
  const Model& model = cache.model();
  for (size_t i = 0; i < r.parts.size(); ++i) {
    if (r.parts[i].is_chunk) continue;
    KAMERA_ASSIGN_OR_RETURN(r.parts[i].tokens, part_tokens(model, r, i, o.control_everywhere));
  }
  if (text_only(r))
    segment_prompt(cache, o.segments && model.tokenizer ? &*model.tokenizer : nullptr, r);
  return Status::Ok();
}

}  // namespace kamera

#include "server/prompt_tokens.h"

#include <algorithm>

#include "server/prompt_parts.h"

namespace kamera {

namespace {

std::shared_ptr<const ChunkContent> image_of(const GenRequest& r, const PromptPart& p) {
  if (!p.is_chunk || !r.media) return nullptr;
  for (const auto& [id, c] : r.media->chunks)
    if (id == p.id) return c;
  return nullptr;
}

// r.plan: the anchor, then each text part's tokens (cut into segments with a tokenizer; without
// one, each part whole: only a prompt with images needs them, for the images' positions) and each
// image as one segment of its rows (cache/prompt_plan.h).
void segment_prompt(const ChunkCache& cache, const Tokenizer* tok, GenRequest& r) {
  PromptPlan plan = plan_start(cache, r.plan.policy);
  plan.reuse_budget = r.plan.reuse_budget;
  for (const PromptPart& p : r.parts) {
    if (auto img = image_of(r, p))
      plan_media(plan, p.id, std::move(img));
    else
      plan_text(plan, cache, tok, p.tokens);
  }
  if (!tok && !plan.has_media()) plan.segments.clear();
  r.plan = std::move(plan);
}

}  // namespace

Result<std::vector<int32_t>> part_tokens(const Model& model, const GenRequest& r, size_t i,
                                         bool control_everywhere) {
  const PromptPart& p = r.parts[i];
  if (!p.tokens.empty()) return p.tokens;  // token ids (checked against the vocabulary)
  if (!model.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "this model has no tokenizer: send token chunks");
  const ControlSpots spots{control_everywhere};
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
  if (text_and_images(r))
    segment_prompt(cache, o.segments && model.tokenizer ? &*model.tokenizer : nullptr, r);
  return Status::Ok();
}

}  // namespace kamera

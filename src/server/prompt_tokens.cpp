#include "server/prompt_tokens.h"

#include <algorithm>

#include "core/mix.h"
#include "server/prompt_parts.h"

namespace kamera {

namespace {

bool is_image(const GenRequest& r, size_t i) {
  return i < r.parts.size() && r.parts[i].is_chunk && r.media && r.media->find(r.parts[i].id);
}

std::shared_ptr<const ChunkContent> image_of(const GenRequest& r, const PromptPart& p) {
  if (!p.is_chunk || !r.media) return nullptr;
  for (const auto& [id, c] : r.media->chunks)
    if (id == p.id) return c;
  return nullptr;
}

// An image's row i in r.prompt_ids: a negative value (no token is) derived from the image's id,
// so that the prefix index compares images as it compares tokens (a different image differs at
// its first row but for a 2^-30 chance per row).
int32_t media_row(const ChunkId& id, int64_t row) {
  const uint64_t h = mix64_finalize(id.lo ^ (id.hi + uint64_t(row + 1) * 0x9e3779b97f4a7c15ull));
  return -2 - int32_t(h & 0x3fffffff);
}

// r.prompt_ids: the anchor, then each text part's tokens and, for an image, one media_row per
// embedding row (the sequence's token slots); r.segments: each image one segment and, with a
// tokenizer, the text parts cut apart (serve/prompt_segments.h; without one, each part whole:
// only a prompt with images needs them, for the images' positions), with their start positions.
void segment_prompt(const ChunkCache& cache, const Tokenizer* tok, GenRequest& r) {
  std::vector<int32_t>& all = r.prompt_ids;
  all = cache.anchor();
  r.segments.clear();
  int32_t pos = cache.anchor_extent();
  for (const PromptPart& p : r.parts) {
    const int begin = int(all.size());
    if (auto img = image_of(r, p)) {
      for (int64_t i = 0; i < img->n(); ++i) all.push_back(media_row(p.id, i));
      r.segments.push_back({{begin, int(all.size())}, p.id, pos, img});
      pos += img->extent();
      continue;
    }
    all.insert(all.end(), p.tokens.begin(), p.tokens.end());
    const std::vector<TokenSpan> cuts =
        tok ? cut_segments(*tok, p.tokens) : std::vector<TokenSpan>{{0, int(p.tokens.size())}};
    for (TokenSpan s : cuts) {
      const auto first = p.tokens.begin() + s.begin;
      const ChunkId id = cache.id_of(ChunkContent::from_tokens({first, first + s.size()}));
      r.segments.push_back({{begin + s.begin, begin + s.end}, id, pos + s.begin, nullptr});
    }
    pos += int32_t(p.tokens.size());
  }
  if (!tok && !has_images(r)) r.segments.clear();
}

}  // namespace

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
  if (text_and_images(r))
    segment_prompt(cache, o.segments && model.tokenizer ? &*model.tokenizer : nullptr, r);
  return Status::Ok();
}

}  // namespace kamera

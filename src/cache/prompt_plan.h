// A prompt as the caches take it (PromptPlan): its tokens from the anchor on, cut into segments
// whose KV can be reused at another position (cache/segment_index.h), each with its id and start
// position, and the policy it may reuse cached KV under. The API layer builds it (rendering,
// tokenizing, image encoding all happen there); the assembler (cache/prompt_assembler.h) serves it.
//
// The segments of a text are the spans of a chat between the template's turns (one per message,
// tool call or tool result), and lines or paragraphs of long text.
//
// The cut is made on the prompt's tokens, never its text, so every segment is a run of the very
// tokens the prompt holds (its id is its tokens', as a chunk's): a message that tokenizes the
// same wherever it stands finds its earlier self, and one that does not is a miss, never a wrong
// hit. A turn's end always cuts: a line ended by a control token (<|im_end|>\n, <end_of_turn>\n)
// and two control tokens in a row (Llama 3's <|eot_id|><|start_header_id|>), so a short message
// is a segment of its own, the same in every context. Any other line's end cuts too, but a
// segment shorter than `min_tokens` there joins the next one, so a turn's header
// ("<|im_start|>user\n", 3 tokens, or 13 where the vocabulary spells it as text) stays with its
// content and a blank line with its paragraph: a header alone would be one segment seen in every
// context, served from the wrong one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/reuse_policy.h"
#include "reuse/chunk.h"
#include "tokenizer/tokenizer.h"

namespace kamera {

struct TokenSpan {
  int begin = 0, end = 0;  // tokens [begin, end) of the prompt
  int size() const { return end - begin; }
};

// A segment of a prompt: its tokens in the sequence (the anchor first), its id (its tokens', as a
// chunk's: ChunkCache::id_of; an image's chunk id), the position it starts at, and for an image
// or video part its content (embedding rows with their (t, h, w) layout; null: text, whose tokens
// are the prompt's ids over the span).
struct PromptSegment {
  TokenSpan span;  // of PromptPlan::ids
  ChunkId id;
  int32_t position = 0;
  std::shared_ptr<const ChunkContent> image;
};

// Segments covering tokens [0, ids.size()) in order, none empty.
std::vector<TokenSpan> cut_segments(const Tokenizer& tok, std::span<const int32_t> ids,
                                    int min_tokens = 16);

// A prompt of text (and images): `ids` holds the anchor, then each text token and, for an image,
// one negative slot per embedding row (media_slot: no token is negative); `segments` cover the
// ids past the anchor in order (empty: a prompt of text served as one run, prefix reuse only).
// The last segment is the query: its last token's logits are the first token's.
struct PromptPlan {
  std::vector<int32_t> ids;
  std::vector<PromptSegment> segments;
  ReusePolicy policy = ReusePolicy::Patch;
  // The share of the tokens that would be served from another context that may be recomputed
  // in context instead, in [0, 1] (cache/repair_plan.h; patch only: 0 for any other policy).
  double reuse_budget = 0;
  int32_t next_position = 0;  // where the next appended part starts

  bool has_media() const;
};

// An empty plan: the cache's anchor (ids and position).
PromptPlan plan_start(const ChunkCache& cache, ReusePolicy policy = ReusePolicy::Patch);
// Appends a text part's tokens, cut into segments with a tokenizer (cut_segments), else as one
// segment.
void plan_text(PromptPlan& plan, const ChunkCache& cache, const Tokenizer* tok,
               std::span<const int32_t> tokens);
// Appends an image or video part: one segment of its rows at their (t, h, w) positions.
void plan_media(PromptPlan& plan, const ChunkId& id, std::shared_ptr<const ChunkContent> media);
// The slot an image's row takes in PromptPlan::ids: a negative value derived from the image's id,
// so that the prefix index compares images as it compares tokens (a different image differs at its
// first row but for a 2^-30 chance per row).
int32_t media_slot(const ChunkId& id, int64_t row);

}  // namespace kamera

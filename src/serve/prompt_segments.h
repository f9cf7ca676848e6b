// A text prompt cut into segments whose KV can be reused at another position
// (cache/segment_index.h): the spans of a chat between the template's turns (one per message, tool
// call or tool result), and lines or paragraphs of long text.
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
  TokenSpan span;
  ChunkId id;
  int32_t position = 0;
  std::shared_ptr<const ChunkContent> image;
};

// Segments covering tokens [0, ids.size()) in order, none empty.
std::vector<TokenSpan> cut_segments(const Tokenizer& tok, std::span<const int32_t> ids,
                                    int min_tokens = 16);

}  // namespace kamera

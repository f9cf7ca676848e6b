// The images of one chat request as the scheduler sees them: their placed chunks (embedding rows
// with the (t, h, w) layout of vision/rope_index.h), named in the prompt by chunk parts between
// the vision delimiters, and what the request's usage reports about them. Filled on the HTTP
// side (server/media_parts.h); read and completed on the scheduler thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reuse/chunk.h"
#include "tokenizer/tokenizer.h"

namespace kamera {

class ChunkStore;

struct RequestMedia {
  // chunk id (chunk_id(decoder fingerprint, content)) -> the placed image or video
  std::vector<std::pair<ChunkId, std::shared_ptr<const ChunkContent>>> chunks;
  int images = 0;             // image and video parts of the request
  int frames = 0;             // decoded pictures (an image is one, a video its frames)
  int encoded = 0;            // parts this request ran the vision tower for
  int cached_embeddings = 0;  // parts whose embeddings came from the server's image cache
  int reused_chunks = 0;      // image segments served from KV already in the store (scheduler)
  int64_t image_tokens = 0;   // embedding rows of the prompt's images
  std::vector<ChunkId> embedding_hits;  // parts whose embeddings were found, not encoded
  // The vision delimiters the tower's prompt has around each picture (Qwen2-VL's
  // <|vision_start|> and <|vision_end|>, Kimi-VL's <|media_start|>image<|media_content|> and
  // <|media_end|>; empty for the mini-VL): the server's text around the chunk part of each image
  // in the prompt (server/prompt_parts.h), and the bytes of it that spell its control tokens, one
  // range each, where they are read.
  std::string open_text, close_text;
  std::vector<TextRange> open_control, close_control;

  const ChunkContent* find(const ChunkId& id) const;
  bool embedding_hit(const ChunkId& id) const;
  // Image chunks of `ids` (the prompt's chunk parts) whose canonical KV the store's memory tier
  // already holds: served relocated, never recomputed (unless the policy re-prefills).
  int already_stored(const ChunkStore& store) const;
};

}  // namespace kamera

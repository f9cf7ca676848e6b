// The images of one chat request as the prompt and the scheduler see them: each media part of
// the body (by its place: messages[message].content[content]) with its chunk id, rows and the
// vision delimiters around it, the placed chunks (embedding rows with the (t, h, w) layout of
// vision/rope_index.h) by id, and what the request's usage reports about them. Filled on the HTTP
// side (server/media_parts.h) without touching the body; the prompt code takes each part's chunk
// from here where it meets the part (server/prompt_parts.h); read and completed on the scheduler
// thread.
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

// One image or video part of the request, as the prompt puts it: the chunk between the vision
// delimiters the tower's prompt has around each picture (Qwen2-VL's <|vision_start|> and
// <|vision_end|>, Kimi-VL's <|media_start|>image<|media_content|> and <|media_end|>; empty for the
// mini-VL): text the server writes, with the bytes of it that spell its control tokens, one
// range each, where they are read.
struct MediaPart {
  size_t message = 0, content = 0;  // messages[message].content[content] (a prompt's parts: 0)
  ChunkId id;                       // chunk_id(decoder fingerprint, content)
  int64_t rows = 0;                 // the chunk's embedding rows
  std::string open_text, close_text;
  std::vector<TextRange> open_control, close_control;
};

struct RequestMedia {
  std::vector<MediaPart> parts;  // in the body's order
  // chunk id (chunk_id(decoder fingerprint, content)) -> the placed image or video
  std::vector<std::pair<ChunkId, std::shared_ptr<const ChunkContent>>> chunks;
  int images = 0;             // image and video parts of the request
  int audio_clips = 0;        // input_audio parts of the request
  int frames = 0;             // decoded pictures (an image is one, a video its frames)
  int encoded = 0;            // parts this request ran the vision tower for
  int cached_embeddings = 0;  // parts whose embeddings came from the server's image cache
  int reused_chunks = 0;      // image segments served from KV already in the store (scheduler)
  int64_t image_tokens = 0;   // embedding rows of the prompt's images
  std::vector<ChunkId> embedding_hits;  // parts whose embeddings were found, not encoded

  // The media part at messages[message].content[content], or null (not a media part).
  const MediaPart* part(size_t message, size_t content) const;
  // The first media part whose chunk is `id` (a chunk part naming a picture of the request
  // stands between that part's delimiters), or null.
  const MediaPart* part_of(const ChunkId& id) const;
  const ChunkContent* find(const ChunkId& id) const;
  bool embedding_hit(const ChunkId& id) const;
  // Image chunks of `ids` (the prompt's chunk parts) whose canonical KV the store's memory tier
  // already holds: served relocated, never recomputed (unless the policy re-prefills).
  int already_stored(const ChunkStore& store) const;
};

}  // namespace kamera
